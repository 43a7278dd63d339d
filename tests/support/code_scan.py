"""The service's own Python files, for tests that scan production code for what must not be there
(test machinery, a private instant formatter)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: What is not production: the tests, the benchmarks, and what is installed or built.
NOT_PRODUCTION = {"tests", "bench", "node_modules", "dist", "build"}


def production_modules() -> list[Path]:
    """Every Python file of the service, outside NOT_PRODUCTION and hidden folders."""
    return sorted(
        path for path in ROOT.rglob("*.py")
        if not any(part.startswith(".") or part in NOT_PRODUCTION
                   for part in path.relative_to(ROOT).parts[:-1])
    )


def matching_lines(pattern: re.Pattern[str], text: str) -> list[int]:
    """The numbers of the lines of `text` that `pattern` finds something in."""
    return [number for number, line in enumerate(text.splitlines(), 1) if pattern.search(line)]


def places(pattern: re.Pattern[str], modules: list[Path]) -> list[str]:
    """`path:line` of every line of `modules` that `pattern` finds something in."""
    return [f"{path.relative_to(ROOT)}:{number}" for path in modules
            for number in matching_lines(pattern, path.read_text(encoding="utf-8"))]
