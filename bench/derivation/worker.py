"""One folding worker: `python -m bench.derivation.worker <mongodb uri> <database> <owner>`.

Opens a Motor client of its own to the database, prints ``ready``, and when a line arrives on
stdin folds with `derivation.fold_all` pass after pass until no fact is pending. Prints what it
did as one line of JSON: facts folded, passes, sites skipped (held by the other worker), sites
failed, facts set aside, wall and CPU seconds from the go line to the end.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from derived import derivation
from documents.store import open_store

#: A pass that found every pending site held by the other worker waits this long before the
#: next, instead of asking the store again at once.
IDLE_PAUSE_SECONDS = 0.05


async def fold_until_done(uri: str, database: str, owner: str) -> dict[str, Any]:
    """Wait for the go line, then fold until nothing is pending."""
    store = open_store(uri, database)
    try:
        await store.ping()
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        started, cpu = time.perf_counter(), time.process_time()
        folded = passes = skipped = failed = 0
        quarantined: list[str] = []
        while True:
            done = await derivation.fold_all(store, owner)
            passes += 1
            folded += done.folded
            skipped += done.skipped_sites
            failed += done.failed_sites
            quarantined.extend(done.quarantined)
            if await derivation.oldest_unfolded(store) is None:
                break
            if not done.folded:
                await asyncio.sleep(IDLE_PAUSE_SECONDS)
        seconds = time.perf_counter() - started
        return {"owner": owner, "folded": folded, "passes": passes, "skipped_sites": skipped,
                "failed_sites": failed, "quarantined": len(quarantined),
                "seconds": round(seconds, 3),
                "cpu_seconds": round(time.process_time() - cpu, 3),
                "facts_per_second": round(folded / seconds, 1) if seconds else None}
    finally:
        store.close()


if __name__ == "__main__":
    print(json.dumps(asyncio.run(fold_until_done(*sys.argv[1:4]))), flush=True)
