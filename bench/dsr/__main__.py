"""`python -m bench.dsr`: access export and erasure of a large visitor against one 10x smaller.

Seeds a visitor with 50,000 pageviews, 200 recordings of 10 segments, 20 leads and 50 errors
(and a second visitor with a tenth of each), then through the HTTP API: streams each export to
a client that only counts bytes, sampling the server's RSS meanwhile, and erases each. The
small visitor is the baseline measured in the same run; target: export RSS growth < 64 MB.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from bench.tenant import create_tenant
from documents.activity import BUCKET_CAP, COLLECTION, bucket_id
from documents.store import Store

LARGE = {"pageviews": 50_000, "recordings": 200, "segments": 10, "leads": 20, "errors": 50}


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


class RssSampler:
    """Samples this process's RSS every few milliseconds on a thread; keeps the peak."""

    def __init__(self) -> None:
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss_mb())
            time.sleep(0.005)

    def __enter__(self) -> RssSampler:
        self.peak = _rss_mb()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


async def seed(store: Store, site_id: str, visitor_id: str, scale: dict[str, int]) -> None:
    """Write the visitor's data straight into the collections, in the shapes ingest writes."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    await store.collection("visitors").insert_one({
        "_id": f"{site_id}:{visitor_id}", "siteId": site_id, "visitorId": visitor_id,
        "displayName": f"Visitor #{visitor_id}", "firstSeen": start, "lastSeen": start,
        "counts": {"pageviews": scale["pageviews"]}, "restricted": False, "objected": False})
    buckets = []
    for sequence in range((scale["pageviews"] + BUCKET_CAP - 1) // BUCKET_CAP):
        events = [{"id": f"{visitor_id}-{n}", "at": start + timedelta(seconds=n),
                   "url": f"https://shop.example/p/{n % 500}", "title": "Product page",
                   "referrer": None, "sessionId": f"s-{n // 20}", "duration": 12.5}
                  for n in range(sequence * BUCKET_CAP,
                                 min(scale["pageviews"], (sequence + 1) * BUCKET_CAP))]
        buckets.append({"_id": bucket_id(site_id, visitor_id, sequence), "siteId": site_id,
                        "visitorId": visitor_id, "sequence": sequence, "count": len(events),
                        "events": events, "firstAt": events[0]["at"],
                        "lastAt": events[-1]["at"]})
    await store.collection(COLLECTION).insert_many(buckets)
    segment = b"\x1f\x8b" + secrets.token_bytes(2000)
    for r in range(scale["recordings"]):
        recording_id = str(uuid.uuid4())
        at = start + timedelta(hours=r)
        await store.collection("recordings").insert_one({
            "_id": recording_id, "siteId": site_id, "visitorId": visitor_id,
            "sessionId": f"s-{r}", "status": "ended", "startedAt": at, "lastActivityAt": at,
            "endedAt": at + timedelta(minutes=5), "pages": [{"url": "https://shop.example/",
                                                            "at": at}]})
        for seq in range(scale["segments"]):
            await store.bucket("segments").upload(
                str(uuid.uuid4()), f"{recording_id}/{seq}.json.gz", segment,
                {"siteId": site_id, "visitorId": visitor_id, "recordingId": recording_id,
                 "seq": seq, "sentFor": recording_id, "consoleChecked": True,
                 "startedAt": at, "endedAt": at})
    await store.collection("leads").insert_many([{
        "_id": str(uuid.uuid4()), "siteId": site_id, "visitorId": visitor_id,
        "createdAt": start, "email": f"{visitor_id}@example.com", "name": "Bench Person",
        "fields": {"note": "x" * 200}} for _ in range(scale["leads"])])
    await store.collection("error_occurrences").insert_many([{
        "_id": str(uuid.uuid4()), "siteId": site_id, "visitorId": visitor_id,
        "sessionId": f"s-{n}", "errorId": str(uuid.uuid4()), "type": "TypeError",
        "message": f"fault {n}", "occurredAt": start} for n in range(scale["errors"])])


async def _measure(base_url: str, token: str, site_id: str, visitor_id: str) -> dict[str, Any]:
    client = AsyncHTTPClient(max_body_size=1 << 40)
    received = [0]

    def count(chunk: bytes) -> None:
        received[0] += len(chunk)

    before = _rss_mb()
    with RssSampler() as sampler:
        started = time.perf_counter()
        await client.fetch(HTTPRequest(
            f"{base_url}/api/v1/sites/{site_id}/visitors/{visitor_id}/export.json",
            headers={"Authorization": f"Bearer {token}"}, streaming_callback=count,
            request_timeout=600))
        export_seconds = time.perf_counter() - started
    started = time.perf_counter()
    await client.fetch(HTTPRequest(
        f"{base_url}/api/v1/sites/{site_id}/visitors/{visitor_id}/data", method="DELETE",
        headers={"Authorization": f"Bearer {token}"}, request_timeout=600))
    erase_seconds = time.perf_counter() - started
    return {"export_seconds": round(export_seconds, 2),
            "export_mb": round(received[0] / 1e6, 1),
            "export_rss_growth_mb": round(sampler.peak - before, 1),
            "erase_seconds": round(erase_seconds, 2)}


async def measure() -> dict[str, Any]:
    """Seed both visitors, then export and erase each through the API."""
    tenant = await create_tenant()
    deps, site = tenant.deps, tenant.site
    small = {key: max(1, value // 10) for key, value in LARGE.items()}
    small["segments"] = LARGE["segments"]
    await seed(deps.store, site["_id"], "large", LARGE)
    await seed(deps.store, site["_id"], "small", small)
    served = await tenant.serve()
    try:
        baseline = await _measure(served.base_url, served.token, site["_id"], "small")
        large = await _measure(served.base_url, served.token, site["_id"], "large")
    finally:
        served.http.stop()
        await deps.close()
    return {"large": {**LARGE, **large}, "small_baseline": {**small, **baseline},
            "export_time_ratio": round(large["export_seconds"] /
                                       max(baseline["export_seconds"], 1e-3), 1),
            "target_export_rss_growth_mb": 64}


def main() -> dict[str, Any]:
    """Measure, print a table, return the figures."""
    figures = asyncio.run(measure())
    print(f"{'visitor':<16}{'pageviews':>10}{'export s':>10}{'export MB':>11}"
          f"{'RSS growth MB':>15}{'erase s':>9}")
    for name in ("small_baseline", "large"):
        f = figures[name]
        print(f"{name:<16}{f['pageviews']:>10}{f['export_seconds']:>10}{f['export_mb']:>11}"
              f"{f['export_rss_growth_mb']:>15}{f['erase_seconds']:>9}")
    print(f"export time, large / small: {figures['export_time_ratio']}x for 10x the data; "
          f"target RSS growth < {figures['target_export_rss_growth_mb']} MB")
    return figures


if __name__ == "__main__":
    main()
