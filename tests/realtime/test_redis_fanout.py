"""Live events through real Redis: two server processes' hubs, one publishing worker.

The embedded store cannot be shared between OS processes, so each "server process" here is a
Tornado app with its own HTTP server, its own RedisBus subscription and its own hub, sharing
the test's store; the publisher is a third RedisBus standing in for the Celery worker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio
import tornado.httpserver
import tornado.netutil

import server
from realtime.bus import RedisBus
from realtime.events import new_error_event
from realtime.hub import LiveHub
from tests.support.app import Tenant
from tests.support.live import open_live


@dataclasses.dataclass
class ServerProcess:
    """One server's app, bus and hub."""

    base_url: str
    deps: server.Deps
    http_server: tornado.httpserver.HTTPServer


@pytest.fixture
async def two_servers(settings, deps: server.Deps, redis_url: str
                      ) -> AsyncIterator[list[ServerProcess]]:
    """Two servers subscribed to the same Redis."""
    started: list[ServerProcess] = []
    for _ in range(2):
        bus = RedisBus(redis_url)
        hub = LiveHub(settings.live_queue_limit)
        own = dataclasses.replace(deps, bus=bus, hub=hub, closers=[])
        bus.listen(hub.dispatch)
        await server.start_live(own)
        await asyncio.wait_for(bus.subscribed.wait(), 5)
        http_server = server.make_http_server(settings, server.make_app(settings, own))
        sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
        http_server.add_sockets(sockets)
        started.append(ServerProcess(f"http://127.0.0.1:{sockets[0].getsockname()[1]}", own,
                                     http_server))
    yield started
    for process in started:
        process.http_server.stop()
        await process.deps.hub.close()
        await process.http_server.close_all_connections()
        await process.deps.bus.close()


@pytest.fixture
async def worker_bus(redis_url: str) -> AsyncIterator[RedisBus]:
    """A publish-only bus, as the Celery worker has."""
    bus = RedisBus(redis_url)
    yield bus
    await bus.close()


def error_event(site_id: str) -> dict:
    return new_error_event(site_id, error_id=str(uuid.uuid4()), fingerprint="fp",
                           message="boom", occurrence_count=1, status="open", reopened=True)


async def test_clients_on_two_server_processes_receive_new_error_within_one_second(
        settings, two_servers: list[ServerProcess], worker_bus: RedisBus, make_tenant):
    tenant: Tenant = await make_tenant("shop")
    bystander_tenant: Tenant = await make_tenant("elsewhere")
    watchers = [await open_live(p.base_url, origin=settings.public_url, token=tenant.token,
                                site_ids=(tenant.site_id,)) for p in two_servers]
    bystander = await open_live(two_servers[0].base_url, origin=settings.public_url,
                                token=bystander_tenant.token,
                                site_ids=(bystander_tenant.site_id,))
    event = error_event(tenant.site_id)
    published = time.monotonic()
    await worker_bus.publish(tenant.site_id, event)
    for watcher in watchers:
        assert await watcher.receive(within=1.0) == event
    assert time.monotonic() - published < 1.0
    with pytest.raises(TimeoutError):
        await bystander.receive(within=0.3)
    for client in [*watchers, bystander]:
        client.close()


async def test_a_dropped_redis_subscription_is_re_established_and_logged(
        settings, two_servers: list[ServerProcess], worker_bus: RedisBus, redis_url: str,
        tenant: Tenant, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger="realtime.bus")
    watcher = await open_live(two_servers[0].base_url, origin=settings.public_url,
                              token=tenant.token, site_ids=(tenant.site_id,))
    admin = redis.asyncio.Redis.from_url(redis_url)
    killed = await admin.client_kill_filter(_type="pubsub")
    await admin.aclose()
    assert killed >= 2
    bus = two_servers[0].deps.bus
    assert isinstance(bus, RedisBus)
    for _poll in range(250):  # up to 5 s
        if bus.reconnects:
            break
        await asyncio.sleep(0.02)
    assert bus.reconnects == 1
    await worker_bus.publish(tenant.site_id, error_event(tenant.site_id))
    assert (await watcher.receive(within=1.0))["type"] == "new_error"
    messages = [record.getMessage() for record in caplog.records]
    assert "live bus subscription lost; reconnecting" in messages
    assert "live bus subscription re-established" in messages
    watcher.close()
