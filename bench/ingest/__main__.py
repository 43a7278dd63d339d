"""`python -m bench.ingest`: ingest throughput against a bare Tornado JSON handler.

Both servers run as their own processes on loopback and get the same load from the same
generator in the same run; the figures are ratios of the service to the bare handler. Targets:
pageviews >= 0.5x, errors (enqueue only) >= 0.6x.

Errors are measured twice:

* `errors`: the embedded default, where the five in-process workers group every error in the
  same process while the load runs, so the figure is enqueue *and* processing;
* `errors_enqueue_only`: the production path with REDIS_URL set (a real redis-server, the
  outbox insert and the Celery send) and no worker running, which is the request's own cost.
  Afterwards the bench checks that every error answered `ok` is in the outbox and on the
  Redis queue, so nothing the figure counts was dropped.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from bench.loadgen import (
    free_port,
    peak_rss_mb,
    post_json,
    run_load,
    start_process,
    wait_for_port,
)
from tests.support.redis_server import running_redis

SECONDS = float(os.environ.get("BENCH_SECONDS", "8"))
CONNECTIONS = int(os.environ.get("BENCH_CONNECTIONS", "16"))
#: How long the enqueue-only run may take, after the load, to have every job on the Redis queue
#: (the sender's backlog, then the outbox relay for what overflowed it).
DRAIN_LIMIT_SECONDS = 120.0
UA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"


def _pageview(n: int) -> dict[str, Any]:
    return {"visitorId": f"bench-{n % 1000}", "url": f"https://shop.example/p/{n % 50}",
            "title": "Product", "ip": f"198.51.100.{n % 250}", "userAgent": UA}


def _error(n: int) -> dict[str, Any]:
    return {"visitorId": f"bench-{n % 1000}", "sessionId": f"s{n % 300}", "source": "javascript",
            "type": "TypeError", "message": f"x is undefined at item {n % 7}",
            "url": "https://shop.example/cart", "ip": "198.51.100.7", "userAgent": UA,
            "stack": "TypeError: x is undefined\n    at cart.js:10:5"}


SERVICE_ENV = {"LOG_LEVEL": "ERROR", "SITE_RATE_PER_SECOND": "1000000",
               "SITE_RATE_BURST": "1000000", "MONGODB_URI": ""}


async def _start_service(workdir: Path, name: str, redis_url: str) -> tuple[Any, int, str]:
    """A service process on the embedded store; its port and the demo site's API key."""
    port = free_port()
    demo_file = workdir / f"{name}-demo.json"
    service = start_process(["server.py", "serve"], {
        **SERVICE_ENV, "PORT": str(port), "DEMO_FILE": str(demo_file), "REDIS_URL": redis_url})
    await wait_for_port(port)
    for _ in range(100):
        if demo_file.exists():
            break
        await asyncio.sleep(0.1)
    return service, port, json.loads(demo_file.read_text())["apiKey"]


async def _compare(bare_port: int, port: int, path: str, body: Any,
                   headers: dict[str, str]) -> dict[str, Any]:
    """Warm both servers, then drive each with the same load; the service against the bare."""
    # Warm both (imports, caches, allocator) before measuring.
    await run_load(bare_port, post_json(path, body, headers), seconds=1, connections=4)
    warm_up = await run_load(port, post_json(path, body, headers), seconds=1, connections=4)
    baseline = await run_load(bare_port, post_json(path, body, headers), seconds=SECONDS,
                              connections=CONNECTIONS)
    measured = await run_load(port, post_json(path, body, headers), seconds=SECONDS,
                              connections=CONNECTIONS)
    return {
        "service_rps": round(measured.per_second, 1),
        "baseline_rps": round(baseline.per_second, 1),
        "ratio": round(measured.per_second / baseline.per_second, 3),
        "p99_ms": round(measured.percentile(99), 2),
        "baseline_p99_ms": round(baseline.percentile(99), 2),
        "statuses": measured.statuses,
        # Everything the service answered ok, warm-up included: what it must have kept.
        "accepted": measured.statuses.get(200, 0) + warm_up.statuses.get(200, 0),
    }


async def measure() -> dict[str, Any]:
    """Run the loads and return the figures."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    bare_port = free_port()
    bare = start_process(["-m", "bench.ingest.bare", str(bare_port)], {})
    figures: dict[str, Any] = {}
    try:
        await wait_for_port(bare_port)
        service, port, key = await _start_service(workdir, "embedded", "")
        try:
            headers = {"X-Service-Key": key}
            figures["pageviews"] = await _compare(bare_port, port, "/ingest/pageviews",
                                                  _pageview, headers)
            figures["errors"] = await _compare(bare_port, port, "/ingest/errors", _error,
                                               headers)
            figures["server_peak_rss_mb"] = round(peak_rss_mb(service.pid), 1)
        finally:
            service.terminate()
            service.wait(timeout=30)
        with running_redis() as redis_url:
            service, port, key = await _start_service(workdir, "celery", redis_url)
            try:
                # The demo data seeded at start queued errors of its own; count only the load's.
                seeded = _queued_jobs(redis_url)
                figures["errors_enqueue_only"] = await _compare(
                    bare_port, port, "/ingest/errors", _error, {"X-Service-Key": key})
                # The answer comes once the job is in the outbox; the sender publishes it to
                # Redis after, and what it had to leave is relayed once due. Wait for all of it.
                measured = figures["errors_enqueue_only"]
                waited = time.monotonic()
                for _poll in range(int(DRAIN_LIMIT_SECONDS * 2)):  # another process fills it
                    if _queued_jobs(redis_url) - seeded >= measured["accepted"]:
                        break
                    await asyncio.sleep(0.5)
                measured["kept"] = _queued_jobs(redis_url) - seeded
                measured["seconds_until_all_on_queue"] = round(time.monotonic() - waited, 1)
            finally:
                service.terminate()
                service.wait(timeout=30)
    finally:
        bare.terminate()
        bare.wait(timeout=30)
    figures["targets"] = {"pageviews": 0.5, "errors": None, "errors_enqueue_only": 0.6}
    return figures


def _queued_jobs(redis_url: str) -> int:
    """Jobs waiting on the errors-ingest queue in Redis (kombu keeps a queue as a list)."""
    client = redis.Redis.from_url(redis_url)
    try:
        return int(client.llen("errors-ingest"))
    finally:
        client.close()


LABELS = {
    "pageviews": "POST /ingest/pageviews (embedded default)",
    "errors": "POST /ingest/errors (embedded: enqueue + in-process processing)",
    "errors_enqueue_only": "POST /ingest/errors (enqueue only: outbox + Redis, no worker)",
}


def main() -> dict[str, Any]:
    """Measure, print a table, return the figures."""
    figures = asyncio.run(measure())
    print(f"{'endpoint':<64}{'req/s':>9}{'bare':>9}{'ratio':>8}{'target':>8}{'p99 ms':>9}")
    for name, label in LABELS.items():
        f = figures[name]
        target = figures["targets"][name]
        print(f"{label:<64}{f['service_rps']:>9}{f['baseline_rps']:>9}{f['ratio']:>8}"
              f"{target if target is not None else '-':>8}{f['p99_ms']:>9}")
    enqueued = figures["errors_enqueue_only"]
    print(f"errors answered ok: {enqueued['accepted']}; jobs on the Redis queue: "
          f"{enqueued['kept']}, all of them {enqueued['seconds_until_all_on_queue']} s after "
          f"the load")
    print(f"server peak RSS (embedded default): {figures['server_peak_rss_mb']} MB")
    return figures


if __name__ == "__main__":
    main()
