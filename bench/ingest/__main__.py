"""`python -m bench.ingest`: ingest throughput and CPU per request, against bare Tornado.

The service and a bare Tornado JSON handler run as their own processes on loopback and get the
same load from the same generator in the same run. Figures, with no target (issue 18 withdrew
the old ones): requests per second and its ratio to the bare handler, p99, and the CPU time
(user + system) the service process spends per request answered 200, beside the bare one's.

Three loads: pageviews and errors on the embedded default (errors there are enqueued *and*
grouped in the same process), and errors with REDIS_URL and no worker (outbox + Celery send,
the request's own cost); afterwards every error answered `ok` must be on the Redis queue.

Before and after: with BENCH_BEFORE_REF (default 55ebd9a, the last commit before issue 18
removed the in-memory store's speed-ups and the hand-written ingest edge; empty to skip) the
same loads also run against that commit, checked out in a temporary git worktree and started
with the same Python, against the same bare baseline in the same run.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from bench.loadgen import (
    ROOT,
    cpu_seconds,
    free_port,
    peak_rss_mb,
    post_json,
    run_load,
    start_process,
    wait_for_port,
)
from tests.support.redis_server import running_redis

SECONDS = float(os.environ.get("BENCH_SECONDS", "8"))
BEFORE_REF = os.environ.get("BENCH_BEFORE_REF", "55ebd9a")
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


async def _start_service(workdir: Path, name: str, redis_url: str, tree: Path
                         ) -> tuple[Any, int, str]:
    """A service process of the code in `tree` on the embedded store; its port and the demo
    site's API key."""
    port = free_port()
    demo_file = workdir / f"{name}-demo.json"
    service = start_process(["server.py", "serve"], {
        **SERVICE_ENV, "PORT": str(port), "DEMO_FILE": str(demo_file), "REDIS_URL": redis_url},
        cwd=tree)
    await wait_for_port(port)
    for _ in range(100):
        if demo_file.exists():
            break
        await asyncio.sleep(0.1)
    return service, port, json.loads(demo_file.read_text())["apiKey"]


async def _compare(bare: Any, bare_port: int, service: Any, port: int, path: str, body: Any,
                   headers: dict[str, str]) -> dict[str, Any]:
    """Warm both servers, then drive each with the same load; the service against the bare."""
    # Warm both (imports, caches, allocator) before measuring.
    await run_load(bare_port, post_json(path, body, headers), seconds=1, connections=4)
    warm_up = await run_load(port, post_json(path, body, headers), seconds=1, connections=4)
    spent = cpu_seconds(bare.pid)
    baseline = await run_load(bare_port, post_json(path, body, headers), seconds=SECONDS,
                              connections=CONNECTIONS)
    baseline_cpu = cpu_seconds(bare.pid) - spent
    spent = cpu_seconds(service.pid)
    measured = await run_load(port, post_json(path, body, headers), seconds=SECONDS,
                              connections=CONNECTIONS)
    service_cpu = cpu_seconds(service.pid) - spent
    answered = measured.statuses.get(200, 0)
    return {
        "service_rps": round(measured.per_second, 1),
        "baseline_rps": round(baseline.per_second, 1),
        "ratio": round(measured.per_second / baseline.per_second, 3),
        "p99_ms": round(measured.percentile(99), 2),
        "baseline_p99_ms": round(baseline.percentile(99), 2),
        "cpu_us_per_request": round(service_cpu / answered * 1e6, 1) if answered else None,
        "baseline_cpu_us_per_request": round(baseline_cpu / baseline.requests * 1e6, 1)
        if baseline.requests else None,
        "statuses": measured.statuses,
        # Everything the service answered ok, warm-up included: what it must have kept.
        "accepted": answered + warm_up.statuses.get(200, 0),
    }


async def _measure_tree(tree: Path, workdir: Path, bare: Any, bare_port: int
                        ) -> dict[str, Any]:
    """The three loads against the service code in `tree`."""
    figures: dict[str, Any] = {}
    service, port, key = await _start_service(workdir, f"embedded-{tree.name}", "", tree)
    try:
        headers = {"X-Service-Key": key}
        figures["pageviews"] = await _compare(bare, bare_port, service, port,
                                              "/ingest/pageviews", _pageview, headers)
        figures["errors"] = await _compare(bare, bare_port, service, port, "/ingest/errors",
                                           _error, headers)
        figures["server_peak_rss_mb"] = round(peak_rss_mb(service.pid), 1)
    finally:
        service.terminate()
        service.wait(timeout=30)
    with running_redis() as redis_url:
        service, port, key = await _start_service(workdir, f"celery-{tree.name}", redis_url,
                                                  tree)
        try:
            # The demo data seeded at start queued errors of its own; count only the load's.
            seeded = _queued_jobs(redis_url)
            measured = figures["errors_enqueue_only"] = await _compare(
                bare, bare_port, service, port, "/ingest/errors", _error,
                {"X-Service-Key": key})
            # The answer comes once the job is in the outbox; the sender publishes it to Redis
            # after, and what it had to leave is relayed once due. Wait for all of it.
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
    return figures


def _checkout(ref: str, into: Path) -> Path:
    """A detached worktree of `ref` (the code before), to start its server from."""
    tree = into / "before"
    subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(tree), ref], cwd=ROOT,
                   check=True)
    return tree


def _remove_checkout(tree: Path) -> None:
    subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)


async def measure() -> dict[str, Any]:
    """Run the loads (after, and before when asked) and return the figures."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    bare_port = free_port()
    bare = start_process(["-m", "bench.ingest.bare", str(bare_port)], {})
    figures: dict[str, Any] = {}
    try:
        await wait_for_port(bare_port)
        figures["after"] = await _measure_tree(ROOT, workdir, bare, bare_port)
        if BEFORE_REF:
            tree = _checkout(BEFORE_REF, workdir)
            try:
                figures["before"] = await _measure_tree(tree, workdir, bare, bare_port)
                figures["before"]["ref"] = BEFORE_REF
            finally:
                _remove_checkout(tree)
    finally:
        bare.terminate()
        bare.wait(timeout=30)
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
    print(f"{'':<7}{'endpoint':<62}{'req/s':>8}{'bare':>8}{'ratio':>7}{'CPU µs':>8}"
          f"{'bare µs':>9}{'p99 ms':>8}")
    for when in ("before", "after"):
        if when not in figures:
            continue
        for name, label in LABELS.items():
            f = figures[when][name]
            print(f"{when:<7}{label:<62}{f['service_rps']:>8}{f['baseline_rps']:>8}"
                  f"{f['ratio']:>7}{f['cpu_us_per_request']:>8}"
                  f"{f['baseline_cpu_us_per_request']:>9}{f['p99_ms']:>8}")
        enqueued = figures[when]["errors_enqueue_only"]
        print(f"{when:<7}errors answered ok: {enqueued['accepted']}; on the Redis queue: "
              f"{enqueued['kept']}, all of them {enqueued['seconds_until_all_on_queue']} s "
              f"after the load; server peak RSS {figures[when]['server_peak_rss_mb']} MB")
    return figures


if __name__ == "__main__":
    main()
