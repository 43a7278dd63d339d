"""The dashboard live socket: authentication, origin, subscriptions, flow control, expiry."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from tornado.httpclient import HTTPClientError

import server
from auth.tokens import ACCESS_TOKEN_SECONDS, TokenIssuer
from realtime.events import InvalidEvent, new_error_event, new_lead_event, validate_event
from realtime.hub import CLOSE_UNAUTHENTICATED
from tests.support.app import Fetch, Tenant


def error_event(site_id: str, message: str = "TypeError: x is undefined") -> dict:
    return new_error_event(site_id, error_id=str(uuid.uuid4()), fingerprint="fp1",
                           message=message, occurrence_count=1, status="open", reopened=False)


async def test_a_subscribed_client_receives_new_error_for_its_site(
        deps: server.Deps, ws_connect, tenant: Tenant):
    client = await ws_connect(token=tenant.token, site_ids=(tenant.site_id,))
    event = error_event(tenant.site_id)
    await deps.bus.publish(tenant.site_id, event)
    assert await client.receive() == event


async def test_a_new_lead_reaches_the_dashboard_with_its_summary(
        deps: server.Deps, ws_connect, tenant: Tenant):
    client = await ws_connect(token=tenant.token, site_ids=(tenant.site_id,))
    event = new_lead_event(tenant.site_id, lead_id="l1", display_name="Ada", visitor_id="v1")
    await deps.bus.publish(tenant.site_id, event)
    received = await client.receive_type("new_lead")
    assert received["lead"] == {"id": "l1", "displayName": "Ada", "visitorId": "v1"}


async def test_a_client_watching_another_site_receives_nothing(
        deps: server.Deps, ws_connect, make_tenant):
    watched, other = await make_tenant("watched"), await make_tenant("other")
    bystander = await ws_connect(token=other.token, site_ids=(other.site_id,))
    watcher = await ws_connect(token=watched.token, site_ids=(watched.site_id,))
    await deps.bus.publish(watched.site_id, error_event(watched.site_id))
    await watcher.receive_type("new_error")
    with pytest.raises(TimeoutError):
        await bystander.receive(within=0.3)


async def test_a_subscription_before_authentication_closes_the_socket(
        ws_connect, tenant: Tenant):
    client = await ws_connect()
    await client.send({"type": "subscribe", "siteIds": [tenant.site_id]})
    assert await client.closed() == CLOSE_UNAUTHENTICATED


async def test_an_invalid_token_closes_the_socket(ws_connect):
    client = await ws_connect()
    await client.send({"type": "auth", "token": "not-a-jwt"})
    assert await client.closed() == CLOSE_UNAUTHENTICATED


@pytest.fixture
def settings_env(settings_env: dict[str, str]) -> dict[str, str]:
    """Short live deadlines so the closing rules can be watched in a test."""
    return {**settings_env, "LIVE_AUTH_TIMEOUT_SECONDS": "0.5",
            "LIVE_SESSION_CHECK_SECONDS": "0.2", "LIVE_QUEUE_LIMIT": "20"}


async def test_a_socket_that_never_authenticates_is_closed_after_the_deadline(ws_connect):
    client = await ws_connect()
    started = time.monotonic()
    assert await client.closed(within=3) == CLOSE_UNAUTHENTICATED
    assert time.monotonic() - started < 2


async def test_another_organizations_site_is_refused_with_an_error_frame(
        deps: server.Deps, ws_connect, make_tenant):
    victim, intruder = await make_tenant("victim"), await make_tenant("intruder")
    client = await ws_connect(token=intruder.token)
    await client.send({"type": "subscribe", "siteIds": [victim.site_id, intruder.site_id]})
    refusal = await client.receive_type("error")
    assert refusal["code"] == "subscription_refused"
    assert refusal["siteIds"] == [victim.site_id]
    assert (await client.receive_type("subscribed"))["siteIds"] == [intruder.site_id]
    await deps.bus.publish(victim.site_id, error_event(victim.site_id))
    with pytest.raises(TimeoutError):
        await client.receive(within=0.3)


async def test_a_socket_from_a_foreign_origin_is_refused(ws_connect):
    with pytest.raises(HTTPClientError) as refused:
        await ws_connect(origin="https://evil.example")
    assert refused.value.code == 403


async def test_a_message_over_the_size_limit_closes_the_socket(ws_connect):
    client = await ws_connect()
    await client.send({"type": "auth", "token": "x" * 20_000})
    assert await client.closed() == 1009


async def test_the_socket_closes_when_the_access_token_expires(
        settings, ws_connect, tenant: Tenant):
    nearly_expired = TokenIssuer(settings.secret_key, settings.public_url,
                                 clock=lambda: time.time() - ACCESS_TOKEN_SECONDS + 1)
    token, _ = nearly_expired.issue_access(tenant.user_id, str(uuid.uuid4()))
    client = await ws_connect(token=token, site_ids=(tenant.site_id,))
    assert await client.closed(within=4) == CLOSE_UNAUTHENTICATED


async def test_re_authenticating_keeps_the_socket_open_past_the_old_expiry(
        settings, deps: server.Deps, ws_connect, tenant: Tenant):
    nearly_expired = TokenIssuer(settings.secret_key, settings.public_url,
                                 clock=lambda: time.time() - ACCESS_TOKEN_SECONDS + 1)
    token, _ = nearly_expired.issue_access(tenant.user_id, str(uuid.uuid4()))
    client = await ws_connect(token=token, site_ids=(tenant.site_id,))
    await client.authenticate(tenant.token)
    await asyncio.sleep(1.5)
    await deps.bus.publish(tenant.site_id, error_event(tenant.site_id))
    assert (await client.receive_type("new_error"))["siteId"] == tenant.site_id


async def test_logout_closes_the_socket(fetch: Fetch, ws_connect, tenant: Tenant):
    client = await ws_connect(token=tenant.token, site_ids=(tenant.site_id,))
    logout = await fetch("/auth/logout", "POST", json_body={"refreshToken": tenant.refresh_token})
    assert logout.code in (200, 204), logout
    assert await client.closed(within=3) == CLOSE_UNAUTHENTICATED


async def test_a_client_that_stops_reading_is_dropped_while_others_keep_receiving(
        deps: server.Deps, ws_connect, tenant: Tenant):
    stalled = await ws_connect(token=tenant.token, site_ids=(tenant.site_id,))
    reader = await ws_connect(token=tenant.token, site_ids=(tenant.site_id,))
    stalled_stream = stalled.connection.protocol.stream
    stalled_stream.io_loop.remove_handler(stalled_stream.socket)  # stop reading, keep the socket
    received = 0
    for _batch in range(2000):
        for _ in range(10):
            await deps.bus.publish(tenant.site_id, error_event(tenant.site_id, "m" * 500))
        for _ in range(10):
            await reader.receive_type("new_error")
            received += 1
        if deps.hub.dropped_slow:
            break
    assert deps.hub.dropped_slow == 1, f"not dropped after {received} events"
    assert deps.hub.watchers(tenant.site_id) == 1
    await deps.bus.publish(tenant.site_id, error_event(tenant.site_id))
    await reader.receive_type("new_error")
    assert received > 20
    stalled_stream.close()  # its reads are off, so the close handshake would never finish


def test_events_outside_the_contract_are_refused_at_publish():
    site_id = str(uuid.uuid4())
    with pytest.raises(InvalidEvent):
        validate_event(site_id, {"type": "presence", "siteId": site_id})
    with pytest.raises(InvalidEvent):
        validate_event(site_id, {**error_event(site_id), "siteId": "another"})
