"""Tornado's body timeout: a body still arriving after its headers is cut off after it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest
import tornado.netutil

import server
from tests.support.app import Tenant

BODY_TIMEOUT = 0.5


@pytest.fixture
async def slow_url(settings, deps) -> AsyncIterator[str]:
    """The app behind a server whose body timeout a test can wait out."""
    http_server = server.make_http_server(settings, server.make_app(settings, deps),
                                          body_timeout=BODY_TIMEOUT)
    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
    http_server.add_sockets(sockets)
    yield f"http://127.0.0.1:{sockets[0].getsockname()[1]}"
    http_server.stop()
    await http_server.close_all_connections()


async def _open(base_url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    address = urlsplit(base_url)
    return await asyncio.open_connection(address.hostname, address.port)


def _head(tenant: Tenant, length: int) -> bytes:
    return (f"POST /ingest/pageviews HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"X-Service-Key: {tenant.api_key}\r\nContent-Length: {length}\r\n\r\n").encode()


async def test_a_body_trickling_in_is_cut_off_after_the_timeout(slow_url: str, tenant: Tenant):
    reader, writer = await _open(slow_url)
    writer.write(_head(tenant, 100) + b'{"visitorId": "v1"')
    await writer.drain()
    # No answer and no more bytes: the server closes the connection once the timeout passes.
    closed = await asyncio.wait_for(reader.read(), timeout=BODY_TIMEOUT + 5)
    assert closed == b""
    writer.close()


async def test_a_body_that_arrives_within_the_timeout_is_answered(slow_url: str,
                                                                  tenant: Tenant):
    body = json.dumps({"visitorId": "v1", "url": "https://shop.example/"}).encode()
    reader, writer = await _open(slow_url)
    writer.write(_head(tenant, len(body)) + body[:10])
    await writer.drain()
    await asyncio.sleep(BODY_TIMEOUT / 5)
    writer.write(body[10:])
    await writer.drain()
    assert (await reader.readline()).startswith(b"HTTP/1.1 200")
    writer.close()
