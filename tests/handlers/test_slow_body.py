"""The slow-body guard: a body still arriving after its headers is cut off after the timeout."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import urlsplit

import pytest
from tornado.httputil import HTTPHeaders

from handlers import application
from tests.support.app import Tenant


async def _open(base_url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    address = urlsplit(base_url)
    return await asyncio.open_connection(address.hostname, address.port)


def _head(tenant: Tenant, length: int) -> bytes:
    return (f"POST /ingest/pageviews HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"X-Service-Key: {tenant.api_key}\r\nContent-Length: {length}\r\n\r\n").encode()


@pytest.fixture
def short_body_timeout(monkeypatch) -> float:
    """The guard's timeout, shortened so a test can wait it out."""
    monkeypatch.setattr(application, "BODY_TIMEOUT_SECONDS", 0.5)
    return 0.5


async def test_a_body_trickling_in_is_cut_off_after_the_timeout(
        base_url: str, tenant: Tenant, short_body_timeout: float):
    reader, writer = await _open(base_url)
    writer.write(_head(tenant, 100) + b'{"visitorId": "v1"')
    await writer.drain()
    # No answer and no more bytes: the server closes the connection once the timeout passes.
    closed = await asyncio.wait_for(reader.read(), timeout=short_body_timeout + 5)
    assert closed == b""
    writer.close()


async def test_a_body_sent_with_its_headers_or_just_after_is_answered(
        base_url: str, tenant: Tenant, short_body_timeout: float):
    body = json.dumps({"visitorId": "v1", "url": "https://shop.example/"}).encode()
    reader, writer = await _open(base_url)
    # Whole: the body is already buffered when the headers are read.
    writer.write(_head(tenant, len(body)) + body)
    await writer.drain()
    assert (await reader.readline()).startswith(b"HTTP/1.1 200")
    writer.close()
    # In two parts, the rest well within the timeout: the armed timeout does not fire.
    reader, writer = await _open(base_url)
    writer.write(_head(tenant, len(body)) + body[:10])
    await writer.drain()
    await asyncio.sleep(short_body_timeout / 5)
    writer.write(body[10:])
    await writer.drain()
    assert (await reader.readline()).startswith(b"HTTP/1.1 200")
    writer.close()


def test_the_guard_arms_the_timeout_only_when_the_body_is_not_all_buffered():
    class Stream:
        _read_buffer_size = 40

    class Connection:
        stream = Stream()

    def expected(**headers: str) -> bool:
        return application.body_still_expected(Connection(), HTTPHeaders(headers))

    assert expected(**{"Content-Length": "41"})
    assert not expected(**{"Content-Length": "40"})
    assert not expected()  # no body
    assert expected(**{"Transfer-Encoding": "chunked"})
    assert expected(**{"Content-Length": "forty"})

    class Opaque:
        pass

    # A connection whose buffer cannot be inspected is always guarded.
    assert application.body_still_expected(Opaque(), HTTPHeaders({"Content-Length": "1"}))
