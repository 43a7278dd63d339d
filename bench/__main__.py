"""`make bench`: run every benchmark, write one JSON report and print a summary.

Each benchmark module has `main() -> dict` and measures its own baseline in the same run, so the
ratios mean the same on any machine. The report goes to bench/results/report.json.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
import traceback
from pathlib import Path

BENCHMARKS = ["bench.ingest", "bench.live", "bench.dsr", "bench.soak"]
RESULTS = Path(__file__).resolve().parent / "results"


def main() -> int:
    """Run what exists; a benchmark that fails is reported, the others still run."""
    report: dict[str, object] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    failed = False
    for name in BENCHMARKS:
        try:
            module = importlib.import_module(f"{name}.__main__")
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith(name):
                report[name] = {"status": "not present"}
                continue
            raise
        print(f"\n=== {name}")
        try:
            report[name] = {"status": "ok", "figures": module.main()}
        except Exception:  # noqa: BLE001 - one broken benchmark must not hide the others
            traceback.print_exc()
            report[name] = {"status": "failed"}
            failed = True
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "report.json"
    path.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"\nreport: {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
