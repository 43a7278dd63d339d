"""`python -m bench.ingest`: ingest throughput against a bare Tornado JSON handler.

Both servers run as their own processes on loopback and get the same load from the same
generator in the same run; the figures are ratios of the service to the bare handler. Targets:
pageviews >= 0.5x, errors (enqueue only) >= 0.6x.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from bench.loadgen import (
    free_port,
    peak_rss_mb,
    post_json,
    run_load,
    start_process,
    wait_for_port,
)

SECONDS = float(os.environ.get("BENCH_SECONDS", "8"))
CONNECTIONS = int(os.environ.get("BENCH_CONNECTIONS", "16"))
UA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"


def _pageview(n: int) -> dict[str, Any]:
    return {"visitorId": f"bench-{n % 1000}", "url": f"https://shop.example/p/{n % 50}",
            "title": "Product", "ip": f"198.51.100.{n % 250}", "userAgent": UA}


def _error(n: int) -> dict[str, Any]:
    return {"visitorId": f"bench-{n % 1000}", "sessionId": f"s{n % 300}", "source": "javascript",
            "type": "TypeError", "message": f"x is undefined at item {n % 7}",
            "url": "https://shop.example/cart", "ip": "198.51.100.7", "userAgent": UA,
            "stack": "TypeError: x is undefined\n    at cart.js:10:5"}


async def measure() -> dict[str, Any]:
    """Run the four loads and return the figures."""
    service_port, bare_port = free_port(), free_port()
    workdir = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    demo_file = workdir / "demo.json"
    service = start_process(["server.py", "serve"], {
        "PORT": str(service_port), "DEMO_FILE": str(demo_file), "LOG_LEVEL": "ERROR",
        "SITE_RATE_PER_SECOND": "1000000", "SITE_RATE_BURST": "1000000",
        "MONGODB_URI": "", "REDIS_URL": ""})
    bare = start_process(["-m", "bench.ingest.bare", str(bare_port)], {})
    try:
        await wait_for_port(service_port)
        await wait_for_port(bare_port)
        key = json.loads(demo_file.read_text())["apiKey"]
        headers = {"X-Service-Key": key}
        figures: dict[str, Any] = {}
        for name, path, body in (("pageviews", "/ingest/pageviews", _pageview),
                                 ("errors", "/ingest/errors", _error)):
            # Warm both (imports, caches, JIT-free but allocator warm-up) before measuring.
            await run_load(bare_port, post_json(path, body, headers), seconds=1, connections=4)
            await run_load(service_port, post_json(path, body, headers), seconds=1,
                           connections=4)
            baseline = await run_load(bare_port, post_json(path, body, headers),
                                      seconds=SECONDS, connections=CONNECTIONS)
            measured = await run_load(service_port, post_json(path, body, headers),
                                      seconds=SECONDS, connections=CONNECTIONS)
            figures[name] = {
                "service_rps": round(measured.per_second, 1),
                "baseline_rps": round(baseline.per_second, 1),
                "ratio": round(measured.per_second / baseline.per_second, 3),
                "p99_ms": round(measured.percentile(99), 2),
                "baseline_p99_ms": round(baseline.percentile(99), 2),
                "statuses": measured.statuses,
            }
        figures["server_peak_rss_mb"] = round(peak_rss_mb(service.pid), 1)
        figures["targets"] = {"pageviews": 0.5, "errors": 0.6}
        return figures
    finally:
        for process in (service, bare):
            process.terminate()
            process.wait(timeout=30)


def main() -> dict[str, Any]:
    """Measure, print a table, return the figures."""
    figures = asyncio.run(measure())
    print(f"{'endpoint':<22}{'service req/s':>15}{'bare req/s':>12}{'ratio':>8}{'target':>8}"
          f"{'p99 ms':>9}")
    for name in ("pageviews", "errors"):
        f = figures[name]
        print(f"POST /ingest/{name:<9}{f['service_rps']:>15}{f['baseline_rps']:>12}"
              f"{f['ratio']:>8}{figures['targets'][name]:>8}{f['p99_ms']:>9}")
    print(f"server peak RSS: {figures['server_peak_rss_mb']} MB")
    return figures


if __name__ == "__main__":
    main()
