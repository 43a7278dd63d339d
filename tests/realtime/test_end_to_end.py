"""End to end through real Redis: ingest on one server, a Celery worker, dashboards on two servers.

Issue 4 asks for two server processes and a Celery worker. Here the two "server processes" are
two Tornado applications in this OS process, each with its own HTTP server on its own port, its
own RedisBus subscription and its own LiveHub, so an event can only reach the second one's
sockets through Redis. They share the test's store object because the embedded store
(mongomock) cannot be shared between OS processes. The worker is a real Celery worker
(celery.contrib.testing.worker, threads pool, concurrency 5) consuming errors-ingest from the
real redis-server; like `visitor-service worker` it publishes `new_error` through a RedisBus of
its own, never through a server's bus. Its task threads run each job's coroutine on the test's
event loop, which owns the store (see tasks/celery_app.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis
import tornado.httpserver
import tornado.netutil

import server
from realtime.bus import RedisBus
from realtime.hub import LiveHub
from tasks.celery_app import CeleryErrorQueue, TaskConsumer, make_celery_app
from tasks.notify_port import SilentNotifier
from tasks.queue import ErrorPipeline, RetryPolicy
from tests.support.app import Fetch, Tenant
from tests.support.celery_worker import running_worker
from tests.support.live import LiveClient, open_live
from tests.tasks.support import js_error, post_error

pytestmark = pytest.mark.slow

EVENT_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture
def settings_env(settings_env: dict[str, str], redis_url: str) -> dict[str, str]:
    """Server A sends errors to Celery and publishes through the real, empty redis-server."""
    redis.Redis.from_url(redis_url).flushdb()
    return {**settings_env, "REDIS_URL": redis_url, "ERROR_RETRY_BASE_SECONDS": "0.01"}


@pytest.fixture
async def server_a(deps: server.Deps, base_url: str) -> str:
    """The first server: the suite's own app, subscribed to Redis."""
    assert isinstance(deps.bus, RedisBus) and isinstance(deps.queue, CeleryErrorQueue)
    await asyncio.wait_for(deps.bus.subscribed.wait(), 5)
    return base_url


@pytest.fixture
async def server_b(settings, deps: server.Deps, redis_url: str) -> AsyncIterator[str]:
    """A second server: its own HTTP server, Celery queue, Redis subscription and hub."""
    bus = RedisBus(redis_url)
    hub = LiveHub(settings.live_queue_limit)
    queue = CeleryErrorQueue(make_celery_app(redis_url))
    own = dataclasses.replace(deps, bus=bus, hub=hub, queue=queue, closers=[])
    bus.listen(hub.dispatch)
    await server.start_live(own)
    await asyncio.wait_for(bus.subscribed.wait(), 5)
    http_server = server.make_http_server(settings, server.make_app(settings, own))
    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
    http_server.add_sockets(sockets)
    yield f"http://127.0.0.1:{sockets[0].getsockname()[1]}"
    http_server.stop()
    await hub.close()
    await http_server.close_all_connections()
    await bus.close()
    await queue.close()


@pytest.fixture
async def celery_worker(deps: server.Deps, redis_url: str) -> AsyncIterator[RedisBus]:
    """A real Celery worker publishing through its own RedisBus; yields that bus."""
    loop = asyncio.get_running_loop()
    worker_bus = RedisBus(redis_url)

    def run_on_test_loop(coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=30)

    pipeline = ErrorPipeline(deps.store, notifier=SilentNotifier(), bus=worker_bus,
                             metrics=deps.metrics, policy=RetryPolicy(base_delay=0.01))
    app = make_celery_app(redis_url, consumer=TaskConsumer(pipeline, run_on_test_loop))
    async with running_worker(app):
        yield worker_bus
    app.close()
    await worker_bus.close()


async def watch(base_url: str, settings, tenant: Tenant) -> LiveClient:
    """A dashboard socket on one server, watching the tenant's site."""
    return await open_live(base_url, origin=settings.public_url, token=tenant.token,
                           site_ids=(tenant.site_id,))


async def test_clients_on_both_servers_receive_new_error_within_one_second_of_the_ingest(
        settings, fetch: Fetch, deps: server.Deps, server_a: str, server_b: str,
        celery_worker: RedisBus, make_tenant, ws_connect):
    shop, elsewhere = await make_tenant("shop"), await make_tenant("elsewhere")
    on_a = await ws_connect(token=shop.token, site_ids=(shop.site_id,))
    on_b = await watch(server_b, settings, shop)
    bystanders = [await ws_connect(token=elsewhere.token, site_ids=(elsewhere.site_id,)),
                  await watch(server_b, settings, elsewhere)]

    answer = await post_error(fetch, shop)
    answered = time.monotonic()
    assert answer.code == 200 and answer.json() == {"ok": True}, answer
    received = [await client.receive_type("new_error", within=1.0) for client in (on_a, on_b)]
    assert time.monotonic() - answered < 1.0

    record = await deps.store.collection("errors").find_one({"siteId": shop.site_id})
    assert record is not None
    assert received[0] == received[1]
    event = received[0]
    assert set(event) == {"type", "siteId", "id", "time", "error"}
    assert (event["siteId"], event["id"]) == (shop.site_id, str(record["_id"]))
    assert EVENT_TIME.match(event["time"]), event["time"]
    assert event["error"] == {
        "fingerprint": record["fingerprint"], "message": js_error()["message"],
        "occurrenceCount": 1, "status": "open", "reopened": False, "type": js_error()["type"],
        "new": True,
    }
    assert celery_worker.publish_failures == 0
    for bystander in bystanders:
        with pytest.raises(TimeoutError):
            await bystander.receive(within=0.3)
    on_b.close()
    bystanders[1].close()


async def test_a_lead_ingested_on_one_server_reaches_a_dashboard_on_the_other_through_redis(
        settings, fetch: Fetch, deps: server.Deps, server_a: str, server_b: str,
        tenant: Tenant):
    on_b = await watch(server_b, settings, tenant)
    answer = await fetch("/ingest/leads", "POST", headers={"X-Service-Key": tenant.api_key},
                         json_body={"visitorId": "ada-1", "sessionId": "sess-ada-1",
                                    "url": "https://shop.example/checkout",
                                    "userAgent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0",
                                    "email": "ada@example.com", "name": "Ada Lovelace",
                                    "kind": "checkout"})
    answered = time.monotonic()
    assert answer.code == 200, answer
    event = await on_b.receive_type("new_lead", within=1.0)
    assert time.monotonic() - answered < 1.0
    lead = await deps.store.collection("leads").find_one({"siteId": tenant.site_id})
    assert lead is not None
    assert (event["siteId"], event["id"]) == (tenant.site_id, str(lead["_id"]))
    assert event["lead"]["id"] == str(lead["_id"])
    assert event["lead"]["visitorId"] == "ada-1"
    assert isinstance(event["lead"]["displayName"], str) and event["lead"]["displayName"]
    on_b.close()
