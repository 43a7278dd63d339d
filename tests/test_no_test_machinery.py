"""No production module knows about fault injection or call recording: tests wrap the store with
tests/support/faulty_store.py, and production code never carries their hooks."""

from __future__ import annotations

import re

from tests.support.code_scan import ROOT, matching_lines, places, production_modules

#: The names of the test machinery and of where it lives.
MACHINERY = re.compile(
    r"\b(FaultPlan|FaultyStore|FaultyCollection|InjectedFault|record_calls|transaction_calls"
    r"|faulty_store|tests\.support)\b|\.faults\b|fault[- ]injection",
    re.IGNORECASE,
)


def test_no_production_module_references_fault_injection_or_call_recording():
    modules = production_modules()
    assert ROOT / "documents" / "store.py" in modules
    assert places(MACHINERY, modules) == []


def test_the_scan_catches_a_fault_hook():
    """The scan is not vacuous: a store that consults a fault plan is reported."""
    sample = ("from tests.support import faulty_store\n"
              "class Store:\n    def __init__(self):\n        self.faults = FaultPlan()\n"
              "    def check(self):\n        return self.faults.record_calls\n")
    assert matching_lines(MACHINERY, sample) == [1, 4, 6]
