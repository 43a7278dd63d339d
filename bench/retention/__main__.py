"""`python -m bench.retention`: the retention purge of a site with many stored pageviews.

Seeds sites straight into the collections, in the shapes ingest writes: visitors of
PAGEVIEWS_PER_VISITOR pageviews each, all three years old, so the purge removes every pageview
(activity, 25 months) and every profile (not seen for 25 months). Then, in one process on the
embedded default (the store, the server and the purge share one event loop, as `make run` does):

1. purges a site of PAGEVIEWS / 10 pageviews: the baseline;
2. purges a site of PAGEVIEWS pageviews: time, peak RSS and its growth against the baseline;
3. drives POST /ingest/pageviews over 4 keep-alive connections for a few seconds without a
   purge, then again while a third site of PAGEVIEWS pageviews is purged: the ingest p99 during
   the purge against without, in the same run.

BENCH_RETENTION_PAGEVIEWS sets the scale: by default the issue's million (about 17 minutes on
two shared cores, embedded); 30,000 is a quick run of under a minute. MONGODB_URI, when set,
runs it on that store instead of the embedded one (docs/performance.md has both).
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.dsr.__main__ import RssSampler, _rss_mb
from bench.loadgen import LoadResult, post_json, run_load
from bench.tenant import BenchTenant, create_tenant
from documents.activity import COLLECTION, bucket_id

PAGEVIEWS = int(os.environ.get("BENCH_RETENTION_PAGEVIEWS", "1000000"))
PAGEVIEWS_PER_VISITOR = 100
LOAD_SECONDS = float(os.environ.get("BENCH_SECONDS", "5"))
CONNECTIONS = 4
UA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"


async def seed(tenant: BenchTenant, name: str, pageviews: int) -> str:
    """A new site with `pageviews` three-year-old pageviews and their visitors' profiles."""
    deps = tenant.deps
    user = await _owner(tenant)
    site, _ = await deps.keyring.create_site(user, tenant.site["organizationId"], name, [], {})
    site_id = site["_id"]
    old = datetime.now(UTC) - timedelta(days=3 * 365)
    visitors = (pageviews + PAGEVIEWS_PER_VISITOR - 1) // PAGEVIEWS_PER_VISITOR
    for first in range(0, visitors, 500):
        profiles, buckets = [], []
        for v in range(first, min(visitors, first + 500)):
            visitor_id = f"{name}-{v}"
            count = min(PAGEVIEWS_PER_VISITOR, pageviews - v * PAGEVIEWS_PER_VISITOR)
            events = [{"id": f"{visitor_id}-{n}", "at": old + timedelta(minutes=n),
                       "url": f"https://shop.example/p/{n % 50}", "title": "Product page",
                       "referrer": None, "sessionId": f"s-{visitor_id}-{n // 10}",
                       "duration": 12.5} for n in range(count)]
            profiles.append({
                "_id": f"{site_id}:{visitor_id}", "siteId": site_id, "visitorId": visitor_id,
                "displayName": f"Visitor #{visitor_id}", "firstSeen": old,
                "lastSeen": events[-1]["at"], "counts": {"pageviews": count},
                "restricted": False, "objected": False})
            buckets.append({"_id": bucket_id(site_id, visitor_id, 0), "siteId": site_id,
                            "visitorId": visitor_id, "sequence": 0, "count": count,
                            "events": events, "firstAt": events[0]["at"],
                            "lastAt": events[-1]["at"]})
        await deps.store.collection("visitors").insert_many(profiles)
        await deps.store.collection(COLLECTION).insert_many(buckets)
    return site_id


async def _owner(tenant: BenchTenant) -> Any:
    from documents import accounts

    owner = await accounts.find_user_by_email(tenant.deps.store, "bench@example.com")
    return await accounts.load_authenticated_user(tenant.deps.store, owner["_id"], "")


async def timed_purge(tenant: BenchTenant) -> dict[str, Any]:
    """One purge pass: seconds, peak RSS (the process's, and its growth), what it removed."""
    before = _rss_mb()
    with RssSampler() as sampler:
        started = time.perf_counter()
        report = await tenant.deps.purge.purge()
        seconds = time.perf_counter() - started
    assert report is not None
    return {"seconds": round(seconds, 2), "rss_growth_mb": round(sampler.peak - before, 1),
            "rss_peak_mb": round(sampler.peak, 1),
            "removed": {k: v for k, v in report.removed.items() if v}}


async def ingest_load(port: int, api_key: str, until: asyncio.Task[Any] | None) -> LoadResult:
    """Pageviews over CONNECTIONS connections: for LOAD_SECONDS, or until `until` is done."""
    def pageview(n: int) -> dict[str, Any]:
        return {"visitorId": f"live-{n % 500}", "url": f"https://shop.example/p/{n % 50}",
                "title": "Product", "ip": f"198.51.100.{n % 250}", "userAgent": UA}

    request = post_json("/ingest/pageviews", pageview, {"X-Service-Key": api_key})
    if until is None:
        return await run_load(port, request, seconds=LOAD_SECONDS, connections=CONNECTIONS)
    total = LoadResult(0, 0.0, [], {})
    while not until.done():
        part = await run_load(port, request, seconds=1.0, connections=CONNECTIONS)
        total.latencies_ms.extend(part.latencies_ms)
        total.seconds += part.seconds
        total.requests += part.requests
        for status, count in part.statuses.items():
            total.statuses[status] = total.statuses.get(status, 0) + count
    return total


async def measure() -> dict[str, Any]:
    """Baseline purge, large purge, then ingest p99 without and during a purge."""
    environ = {"SITE_RATE_PER_SECOND": "1000000", "SITE_RATE_BURST": "1000000"}
    if os.environ.get("MONGODB_URI"):
        environ["MONGODB_URI"] = os.environ["MONGODB_URI"]
    tenant = await create_tenant(environ)
    served = await tenant.serve()
    # As `make run` does: the figures are folded beside the requests, purge or not.
    tenant.deps.derivation.start()
    try:
        await seed(tenant, "small", PAGEVIEWS // 10)
        small = await timed_purge(tenant)
        # A full-size run takes a while: each step says when it is done.
        print(f"baseline purge: {small}", flush=True)
        await seed(tenant, "large", PAGEVIEWS)
        large = await timed_purge(tenant)
        print(f"large purge: {large}", flush=True)

        _, api_key = await tenant.deps.keyring.rotate_api_key(tenant.site, 0)
        port = int(served.base_url.rsplit(":", 1)[1])
        await ingest_load(port, api_key, None)  # warm-up
        without = await ingest_load(port, api_key, None)
        await seed(tenant, "during", PAGEVIEWS)
        purge = asyncio.create_task(timed_purge(tenant))
        during = await ingest_load(port, api_key, purge)
        concurrent = await purge
    finally:
        served.http.stop()
        await tenant.deps.close()
    return {
        "store": "MONGODB_URI" if os.environ.get("MONGODB_URI") else "embedded",
        "pageviews": PAGEVIEWS, "visitors": PAGEVIEWS // PAGEVIEWS_PER_VISITOR,
        "batch": tenant.settings.retention_purge_batch,
        "small_baseline": {"pageviews": PAGEVIEWS // 10, **small},
        "large": {"pageviews": PAGEVIEWS, **large},
        "ingest": {
            "without_purge": {"p99_ms": round(without.percentile(99), 2),
                              "per_second": round(without.per_second, 1),
                              "p50_ms": round(without.percentile(50), 2),
                              "requests": without.requests, "statuses": without.statuses},
            "during_purge": {"p99_ms": round(during.percentile(99), 2),
                             "per_second": round(during.per_second, 1),
                             "p50_ms": round(during.percentile(50), 2),
                             "requests": during.requests, "statuses": during.statuses,
                             "purge_seconds": concurrent["seconds"]},
        },
    }


def main() -> dict[str, Any]:
    """Measure, print a table, return the figures."""
    figures = asyncio.run(measure())
    print(f"store: {figures['store']}")
    print(f"{'site':<16}{'pageviews':>10}{'purge s':>9}{'RSS growth MB':>15}{'peak RSS MB':>13}")
    for name in ("small_baseline", "large"):
        f = figures[name]
        print(f"{name:<16}{f['pageviews']:>10}{f['seconds']:>9}{f['rss_growth_mb']:>15}"
              f"{f['rss_peak_mb']:>13}")
    ingest = figures["ingest"]
    for when in ("without_purge", "during_purge"):
        f = ingest[when]
        print(f"ingest {when.replace('_', ' ')}: p99 {f['p99_ms']} ms, p50 {f['p50_ms']} ms, "
              f"{f['per_second']} pageviews/s")
    print(f"purge under that load: {ingest['during_purge']['purge_seconds']} s")
    return figures


if __name__ == "__main__":
    main()
