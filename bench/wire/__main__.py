"""`python -m bench.wire`: the service's CPU time per request on the production driver path.

The service runs as its own process against a SecantusDB (the MongoDB wire protocol, through
the real driver) and a real redis-server, with no error worker: pageviews are written to the
store during the request, errors are kept in the outbox and published to Celery's queue. The
figure is the CPU time (user + system) the service process spent per request answered 200,
beside a bare Tornado JSON handler's under the same load in the same run. The store's and the
broker's own CPU are in their own processes and are not counted. No target: a figure to watch.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import subprocess
import sys
from typing import Any

from bench.ingest.__main__ import _error, _pageview
from bench.loadgen import (
    ROOT,
    cpu_seconds,
    free_port,
    post_json,
    run_load,
    start_process,
    wait_for_port,
)
from tests.support.redis_server import running_redis
from tests.support.secantus import running_secantus

SECONDS = float(os.environ.get("BENCH_SECONDS", "8"))
CONNECTIONS = int(os.environ.get("BENCH_CONNECTIONS", "16"))


def _cli(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "server.py", *args], cwd=ROOT, env={**os.environ,
                          **env}, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


async def _cpu_per_request(port: int, pid: int, path: str, body: Any,
                           headers: dict[str, str]) -> dict[str, Any]:
    request = post_json(path, body, headers)
    await run_load(port, request, seconds=1, connections=4)  # warm up
    before = cpu_seconds(pid)
    load = await run_load(port, request, seconds=SECONDS, connections=CONNECTIONS)
    spent = cpu_seconds(pid) - before
    answered = load.statuses.get(200, 0)
    return {"cpu_us_per_request": round(spent / answered * 1e6, 1) if answered else None,
            "rps": round(load.per_second, 1), "p99_ms": round(load.percentile(99), 2),
            "statuses": load.statuses}


async def measure() -> dict[str, Any]:
    """Run both loads against the service on the wire and against bare Tornado."""
    figures: dict[str, Any] = {}
    bare_port = free_port()
    bare = start_process(["-m", "bench.ingest.bare", str(bare_port)], {})
    try:
        await wait_for_port(bare_port)
        with running_secantus() as mongodb_uri, running_redis() as redis_url:
            env = {"MONGODB_URI": mongodb_uri, "MONGODB_DATABASE": "bench_wire",
                   "REDIS_URL": redis_url, "LOG_LEVEL": "ERROR",
                   "SITE_RATE_PER_SECOND": "1000000", "SITE_RATE_BURST": "1000000",
                   "SECRET_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
                   "MASTER_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
                   "VISITOR_SERVICE_PASSWORD": secrets.token_urlsafe(12)}
            _cli(["create-user", "--email", "bench@example.com"], env)
            site = _cli(["create-site", "--email", "bench@example.com", "--name", "bench"], env)
            port = free_port()
            service = start_process(["server.py", "serve"], {**env, "PORT": str(port)})
            try:
                await wait_for_port(port)
                headers = {"X-Service-Key": site["apiKey"]}
                for name, path, body in (("pageviews", "/ingest/pageviews", _pageview),
                                         ("errors", "/ingest/errors", _error)):
                    measured = await _cpu_per_request(port, service.pid, path, body, headers)
                    baseline = await _cpu_per_request(bare_port, bare.pid, path, body, {})
                    figures[name] = {**measured,
                                     "baseline_cpu_us_per_request":
                                         baseline["cpu_us_per_request"],
                                     "baseline_rps": baseline["rps"]}
            finally:
                service.terminate()
                service.wait(timeout=30)
    finally:
        bare.terminate()
        bare.wait(timeout=30)
    return figures


def main() -> dict[str, Any]:
    """Measure, print a table, return the figures."""
    figures = asyncio.run(measure())
    print(f"{'on the wire (SecantusDB + Redis)':<36}{'CPU µs/req':>12}{'bare µs/req':>13}"
          f"{'ratio':>8}{'req/s':>9}{'p99 ms':>9}")
    for name, f in figures.items():
        ratio = round(f["cpu_us_per_request"] / f["baseline_cpu_us_per_request"], 2)
        print(f"{'POST /ingest/' + name:<36}{f['cpu_us_per_request']:>12}"
              f"{f['baseline_cpu_us_per_request']:>13}{ratio:>8}{f['rps']:>9}{f['p99_ms']:>9}")
    return figures


if __name__ == "__main__":
    main()
