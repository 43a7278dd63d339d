"""The JSON ingest routes answer like every other API route: headers, failures, the access log,
and a body over the limit refused with the JSON 413 before it is read.

The contract itself (statuses, error codes, auth on every ingest route) is covered by the route
sweep, the OpenAPI fuzz test and the ingest tests.
"""

from __future__ import annotations

import asyncio
import json
import logging

from handlers import ingest as ingest_handlers
from tests.support.app import Fetch, Tenant

PAGEVIEW = {"visitorId": "v-edge", "url": "https://shop.example/"}


async def _exchange(base_url: str, request: bytes, answers: int = 1) -> bytes:
    """Send raw bytes on one connection and read `answers` answers (each with a body length)."""
    host, port = base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request)
        await writer.drain()
        received = b""
        for _ in range(answers):
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5)
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:")))
            is_head = request.startswith(b"HEAD")
            received += head + (b"" if is_head else await reader.readexactly(length))
        return received
    finally:
        writer.close()


def _post(tenant: Tenant, body: bytes, path: str = "/ingest/pageviews") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"X-Service-Key: {tenant.api_key}\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode() + body


async def test_answers_carry_the_api_headers_accepted_or_refused(fetch: Fetch, tenant: Tenant):
    accepted = await fetch("/ingest/pageviews", "POST", json_body=PAGEVIEW,
                           headers={"X-Service-Key": tenant.api_key})
    refused = await fetch("/ingest/pageviews", "POST", json_body=PAGEVIEW)
    assert accepted.code == 200 and refused.code == 401
    for answer in (accepted, refused):
        headers = answer.response.headers
        assert headers["Content-Type"] == "application/json; charset=utf-8"
        assert headers["Cache-Control"] == "no-store"
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert "Server" not in headers
        assert headers["Date"].endswith(" GMT")
        assert int(headers["Content-Length"]) == len(answer.response.body)


async def test_several_requests_on_one_connection_are_each_answered(base_url: str,
                                                                    tenant: Tenant, deps):
    body = json.dumps(PAGEVIEW).encode()
    answers = await _exchange(base_url, _post(tenant, body) + _post(tenant, b"{bad")
                              + _post(tenant, body), answers=3)
    assert answers.count(b"HTTP/1.1 200 OK") == 2
    assert answers.count(b"HTTP/1.1 400 Bad Request") == 1
    profile = await deps.store.collection("visitors").find_one(
        {"_id": f"{tenant.site_id}:v-edge"})
    assert profile["counts"]["pageviews"] == 2


async def test_an_unexpected_failure_is_a_logged_and_counted_500_in_the_one_shape(
        fetch: Fetch, tenant: Tenant, deps, monkeypatch, caplog):
    async def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("a bug in the intake")

    monkeypatch.setattr(ingest_handlers.activity, "record_pageview", broken)
    caplog.set_level(logging.ERROR)
    answer = await fetch("/ingest/pageviews", "POST", json_body=PAGEVIEW,
                         headers={"X-Service-Key": tenant.api_key})
    assert answer.code == 500
    assert answer.json() == {"error": {"code": "internal_error", "message": "internal error"}}
    assert "a bug in the intake" in caplog.text and "Traceback" in caplog.text
    assert deps.metrics.value("ingest_rejected_total", kind="pageview", reason="500") == 1
    # The server goes on answering.
    monkeypatch.undo()
    again = await fetch("/ingest/pageviews", "POST", json_body=PAGEVIEW,
                        headers={"X-Service-Key": tenant.api_key})
    assert again.code == 200


async def test_every_answer_has_an_access_log_line_with_secrets_redacted(
        fetch: Fetch, tenant: Tenant, caplog):
    caplog.set_level(logging.INFO, logger="visitor_service.access")
    await fetch("/ingest/pageviews?token=sk_secret", "POST", json_body=PAGEVIEW,
                headers={"X-Service-Key": tenant.api_key})
    await fetch("/ingest/pageviews", "POST", json_body={})
    lines = [record for record in caplog.records if record.name == "visitor_service.access"]
    assert [(record.levelno, record.args[2]) for record in lines] == [
        (logging.INFO, 200), (logging.WARNING, 401)]
    assert all(record.args[0] == "POST" for record in lines)
    assert "sk_secret" not in "".join(record.getMessage() for record in lines)
    assert all(isinstance(record.duration_ms, float) for record in lines)


async def test_a_client_that_leaves_before_its_body_is_complete_stores_nothing(
        base_url: str, tenant: Tenant, deps, fetch: Fetch):
    body = json.dumps(PAGEVIEW).encode()
    request = _post(tenant, body)
    host, port = base_url.removeprefix("http://").split(":")
    _, writer = await asyncio.open_connection(host, int(port))
    writer.write(request[:-5])
    await writer.drain()
    writer.close()
    await asyncio.sleep(0.2)
    assert await deps.store.collection("visitors").count_documents({}) == 0
    answer = await fetch("/ingest/pageviews", "POST", json_body=PAGEVIEW,
                         headers={"X-Service-Key": tenant.api_key})
    assert answer.code == 200


async def test_a_body_over_the_servers_cap_gets_the_json_413_before_it_is_sent(
        base_url: str, tenant: Tenant, settings):
    # Only the headers go out: the answer must not wait for (or need) the body.
    declared = max(settings.max_segment_bytes, settings.max_event_body_bytes) * 4
    host, port = base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write((f"POST /ingest/pageviews HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  f"Content-Type: application/json\r\nX-Service-Key: {tenant.api_key}\r\n"
                  f"Content-Length: {declared}\r\n\r\n").encode())
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), timeout=5)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 ")
    assert b"Content-Type: application/json" in head
    assert json.loads(body)["error"]["code"] == "payload_too_large"


async def test_a_body_over_the_routes_limit_gets_the_json_413(fetch: Fetch, tenant: Tenant,
                                                             settings):
    body = b'{"visitorId": "' + b"v" * settings.max_event_body_bytes + b'"}'
    answer = await fetch("/ingest/pageviews", "POST", body=body,
                         headers={"X-Service-Key": tenant.api_key,
                                  "Content-Type": "application/json"})
    assert answer.code == 413 and answer.error_code == "payload_too_large"
