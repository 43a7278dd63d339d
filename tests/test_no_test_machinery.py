"""No production module knows about fault injection or call recording: tests wrap the store with
tests/support/faulty_store.py, and production code never carries their hooks."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What is not production: the tests, the benchmarks, and what is installed or built.
NOT_PRODUCTION = {"tests", "bench", "node_modules", "dist", "build"}
#: The names of the test machinery and of where it lives.
MACHINERY = re.compile(
    r"\b(FaultPlan|FaultyStore|FaultyCollection|InjectedFault|record_calls|transaction_calls"
    r"|faulty_store|tests\.support)\b|\.faults\b|fault[- ]injection",
    re.IGNORECASE,
)


def production_modules() -> list[Path]:
    """Every Python file of the service, outside tests/, bench/ and hidden folders."""
    return sorted(
        path for path in ROOT.rglob("*.py")
        if not any(part.startswith(".") or part in NOT_PRODUCTION
                   for part in path.relative_to(ROOT).parts[:-1])
    )


def machinery_lines(text: str) -> list[int]:
    """The numbers of the lines that mention the test machinery."""
    return [number for number, line in enumerate(text.splitlines(), 1) if MACHINERY.search(line)]


def test_no_production_module_references_fault_injection_or_call_recording():
    modules = production_modules()
    assert ROOT / "documents" / "store.py" in modules
    found = [f"{path.relative_to(ROOT)}:{number}" for path in modules
             for number in machinery_lines(path.read_text(encoding="utf-8"))]
    assert found == []


def test_the_scan_catches_a_fault_hook():
    """The scan is not vacuous: a store that consults a fault plan is reported."""
    sample = ("from tests.support import faulty_store\n"
              "class Store:\n    def __init__(self):\n        self.faults = FaultPlan()\n"
              "    def check(self):\n        return self.faults.record_calls\n")
    assert machinery_lines(sample) == [1, 4, 6]
