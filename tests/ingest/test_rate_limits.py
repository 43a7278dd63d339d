"""Per-site rate limits hold for the whole deployment, and survive a Redis outage."""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from ingest.ratelimit import SharedSiteRateLimiter, SiteRateLimiter
from tests.support.processes import free_port, wait_for_port
from tests.support.secantus import running_secantus

ROOT = Path(__file__).resolve().parents[2]


async def test_two_processes_sharing_redis_share_one_bucket(redis_url: str):
    # A rate so low that no token comes back during the test: only the burst counts.
    first = SharedSiteRateLimiter(redis_url, 0.001, 10)
    second = SharedSiteRateLimiter(redis_url, 0.001, 10)
    try:
        answers = [await (first if n % 2 else second).take("site-a") for n in range(30)]
        assert answers.count(None) == 10
        assert all(wait is not None and wait >= 1 for wait in answers[10:])
        # Another site has a bucket of its own.
        assert await first.take("site-b") is None
    finally:
        await first.close()
        await second.close()


async def test_a_redis_outage_falls_back_to_this_process_s_buckets(caplog):
    caplog.set_level(logging.INFO)
    limiter = SharedSiteRateLimiter(f"redis://127.0.0.1:{free_port()}/0", 0.001, 3)
    try:
        answers = [await limiter.take("site-a") for _ in range(10)]
    finally:
        await limiter.close()
    assert answers.count(None) == 3, "neither no limit nor refusing everything"
    assert caplog.text.count("rate limits fall back to this process") == 1


async def test_the_local_limiter_still_limits_the_embedded_default():
    limiter = SiteRateLimiter(0.001, 2)
    assert [await limiter.take("s") for _ in range(3)][:2] == [None, None]
    assert await limiter.take("s") is not None


def _cli(args: list[str], env: dict[str, str]) -> dict:
    done = subprocess.run([sys.executable, "server.py", *args], cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True, timeout=60)
    return json.loads(done.stdout.strip().splitlines()[-1])


async def test_two_server_processes_together_accept_the_configured_rate_not_twice_it(
        redis_url: str):
    burst, rate = 20, 2.0
    with running_secantus() as mongodb_uri:
        env = {**os.environ, "MONGODB_URI": mongodb_uri, "MONGODB_DATABASE": "rate_limits",
               "REDIS_URL": redis_url, "LOG_LEVEL": "WARNING",
               "SITE_RATE_PER_SECOND": str(rate), "SITE_RATE_BURST": str(burst),
               "SECRET_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
               "MASTER_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
               "VISITOR_SERVICE_PASSWORD": secrets.token_urlsafe(12)}
        _cli(["create-user", "--email", "owner@example.com"], env)
        site = _cli(["create-site", "--email", "owner@example.com", "--name", "shop"], env)
        ports = [free_port(), free_port()]
        servers = [subprocess.Popen([sys.executable, "server.py", "serve"], cwd=ROOT,  # noqa: ASYNC220 - started, not awaited
                                    env={**env, "PORT": str(port)},
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                   for port in ports]
        client = AsyncHTTPClient()
        try:
            for port in ports:
                await wait_for_port(port)
            body = json.dumps({"visitorId": "v-1", "url": "https://shop.example/"})
            started = time.monotonic()
            statuses = []
            for n in range(3 * burst):
                request = HTTPRequest(f"http://127.0.0.1:{ports[n % 2]}/ingest/pageviews",
                                      method="POST", body=body, request_timeout=30, headers={
                                          "X-Service-Key": site["apiKey"],
                                          "Content-Type": "application/json"})
                statuses.append((await client.fetch(request, raise_error=False)).code)
            elapsed = time.monotonic() - started
        finally:
            for server in servers:
                server.terminate()
            for server in servers:
                server.wait(timeout=30)
    accepted = statuses.count(200)
    assert set(statuses) <= {200, 429}
    # One bucket for both: the burst plus what the rate refilled while the requests ran. Two
    # buckets of their own would have let 2 x burst through at once.
    assert burst <= accepted <= burst + math.ceil(rate * elapsed) + 1, (accepted, elapsed)
    assert accepted < 2 * burst
