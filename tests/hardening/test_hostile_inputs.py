"""Hostile inputs are refused quickly and never stored; Mongo operators stay literal text.

Already covered elsewhere and not repeated here: invalid UTF-8 and NaN on one route
(tests/handlers/test_error_shape.py), the sweeper's own gzip-bomb cap and memory bound
(tests/recordings/test_segment_sweeper.py), segment size limits (test_segment_limits.py).
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import time
import uuid
from typing import Any

import pytest

import server
from tests.support.app import Fetch, Tenant, all_documents_text

#: "Quickly": well under a second on a loaded CI machine; the point is "not parsed for long".
QUICK_SECONDS = 1.0

JSON_INGEST = {
    "/ingest/pageviews": {"visitorId": "v-1", "url": "https://shop.example/"},
    "/ingest/leads": {"visitorId": "v-1", "email": "ann@example.com"},
    "/ingest/errors": {"visitorId": "v-1", "source": "javascript", "type": "TypeError",
                       "message": "boom"},
}


async def _visitor_data_count(deps: server.Deps) -> int:
    total = 0
    for name in ("visitors", "pageview_buckets", "leads", "errors", "recordings"):
        total += await deps.store.collection(name).count_documents({})
    return total


async def _timed(call: Any) -> tuple[Any, float]:
    started = time.monotonic()
    answer = await call
    return answer, time.monotonic() - started


@pytest.mark.parametrize("path", sorted(JSON_INGEST))
async def test_a_megabyte_of_nested_arrays_is_refused_quickly_and_nothing_is_stored(
        fetch: Fetch, tenant: Tenant, deps: server.Deps, path: str):
    depth = 512 * 1024
    body = "[" * depth + "]" * depth
    answer, took = await _timed(fetch(path, "POST", body=body, headers={
        "Content-Type": "application/json", "X-Service-Key": tenant.api_key}))
    assert answer.code == 413, answer
    assert answer.json()["error"]["code"] == "payload_too_large"
    assert took < QUICK_SECONDS
    assert await _visitor_data_count(deps) == 0


@pytest.mark.parametrize("path", sorted(JSON_INGEST))
async def test_deep_nesting_under_the_size_limit_is_a_400_not_a_crash(
        fetch: Fetch, tenant: Tenant, deps: server.Deps, path: str):
    depth = 100_000  # 200 KB: under MAX_EVENT_BODY_BYTES, far past Python's recursion limit
    answer, took = await _timed(fetch(path, "POST", body="[" * depth + "]" * depth, headers={
        "Content-Type": "application/json", "X-Service-Key": tenant.api_key}))
    assert answer.code == 400, answer
    assert answer.json()["error"]["code"] == "malformed_request"
    assert took < QUICK_SECONDS
    assert await _visitor_data_count(deps) == 0


@pytest.mark.parametrize("path", sorted(JSON_INGEST))
async def test_invalid_utf8_is_refused_on_every_json_ingest_route(
        fetch: Fetch, tenant: Tenant, deps: server.Deps, path: str):
    body = json.dumps(JSON_INGEST[path]).encode()[:-1] + b', "name": "\xff\xfe\xc3\x28"}'
    answer = await fetch(path, "POST", body=body, headers={
        "Content-Type": "application/json", "X-Service-Key": tenant.api_key})
    assert answer.code == 400, answer
    assert answer.json()["error"] == {"code": "malformed_request",
                                      "message": "body is not valid UTF-8"}
    assert await _visitor_data_count(deps) == 0


async def test_invalid_utf8_is_refused_on_the_browser_routes(
        fetch: Fetch, tenant: Tenant, deps: server.Deps):
    answer = await fetch(f"/sdk/v1/{tenant.public_key}/pageview", "POST",
                         body=b'{"visitorId": "v-1", "url": "https://shop.example/\xff"}',
                         headers={"Content-Type": "application/json",
                                  "Origin": "https://shop.example"})
    assert answer.code == 400, answer
    assert await _visitor_data_count(deps) == 0


def _segment_headers(tenant: Tenant) -> dict[str, str]:
    return {"X-Service-Key": tenant.api_key, "Content-Type": "application/octet-stream",
            "X-Recording-Id": str(uuid.uuid4()), "X-Segment-Seq": "0", "X-Visitor-Id": "v-1",
            "X-Page-Url": "https://shop.example/"}


async def test_a_gzip_bomb_segment_is_taken_without_inflating_and_rejected_by_the_sweeper(
        fetch: Fetch, tenant: Tenant, deps: server.Deps, settings):
    inflated = 2 * settings.segment_max_inflated_bytes  # 100 MiB of zeros in ~100 KB
    bomb = await asyncio.to_thread(gzip.compress, bytes(inflated), 9)
    assert len(bomb) < settings.max_segment_bytes
    answer, took = await _timed(fetch("/ingest/recordings/segment", "POST", body=bomb,
                                      headers=_segment_headers(tenant)))
    # The request path checks only the gzip magic bytes: answered at once, never inflated.
    assert answer.code == 200 and answer.json()["ok"] is True, answer
    assert took < QUICK_SECONDS
    assert await deps.segment_sweeper.sweep() == 1
    files = [f async for f in deps.store.collection("segments.files").find({})]
    assert [f["metadata"].get("rejected") for f in files] == ["too_large_inflated"]
    assert await deps.store.collection("segments.chunks").count_documents({}) == 0
    recording_id = answer.json()["recordingId"]
    listed = await fetch(f"/api/v1/sites/{tenant.site_id}/recordings/{recording_id}/segments",
                         token=tenant.token)
    assert listed.code == 200 and listed.json()["segments"] == [], listed


async def _raw_request(base_url: str, request: bytes) -> bytes:
    host, port = base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(65536), timeout=5)
    except ConnectionResetError:
        return b""
    finally:
        writer.close()


def _pageview_request(tenant: Tenant, extra_headers: str) -> bytes:
    body = json.dumps(JSON_INGEST["/ingest/pageviews"]).encode()
    return (f"POST /ingest/pageviews HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nX-Service-Key: {tenant.api_key}\r\n"
            f"{extra_headers}Content-Length: {len(body)}\r\n\r\n").encode() + body


async def test_a_ten_thousand_character_header_is_a_json_431_and_nothing_is_stored(
        base_url: str, fetch: Fetch, tenant: Tenant, deps: server.Deps):
    started = time.monotonic()
    padded = _pageview_request(tenant, f"X-Padding: {'a' * 10_000}\r\n")
    answer = await _raw_request(base_url, padded)
    assert time.monotonic() - started < QUICK_SECONDS
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] == b"431", answer[:200]
    assert json.loads(body)["error"]["code"] == "header_too_large"
    assert await _visitor_data_count(deps) == 0
    assert (await fetch("/healthz")).code == 200


async def test_a_header_block_over_the_cap_is_cut_off_and_the_server_keeps_serving(
        base_url: str, fetch: Fetch, tenant: Tenant, deps: server.Deps):
    # Each header under the 8 KiB a single one may have, together over MAX_HEADER_BYTES.
    padding = "".join(f"X-Padding-{n}: {'a' * 4000}\r\n"
                      for n in range(server.MAX_HEADER_BYTES // 4000 + 1))
    started = time.monotonic()
    answer = await _raw_request(base_url, _pageview_request(tenant, padding))
    assert time.monotonic() - started < QUICK_SECONDS
    # Tornado refuses an oversized header block before any handler runs, by closing.
    assert answer == b"", answer[:200]
    assert await _visitor_data_count(deps) == 0
    assert (await fetch("/healthz")).code == 200


async def test_a_list_query_with_the_longest_documented_cursor_gets_an_answer(
        fetch: Fetch, tenant: Tenant):
    cursor = "\U00051e34" * 512  # 512 characters, 6 KB percent-encoded: what the fuzzer sent
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors?cursor={_quote(cursor)}"
                         f"&q={_quote('é' * 200)}", token=tenant.token)
    assert answer.code == 422 and answer.json()["error"]["field"] == "cursor", answer


# Operator injection ---------------------------------------------------------------------------

OPERATORS = [{"$gt": ""}, {"$ne": None}, {"$where": "sleep(1000)"}, {"$regex": ".*"}]


@pytest.mark.parametrize("operator", OPERATORS, ids=lambda o: next(iter(o)))
@pytest.mark.parametrize("path", sorted(JSON_INGEST))
async def test_an_operator_in_place_of_an_identifier_is_a_422(
        fetch: Fetch, tenant: Tenant, deps: server.Deps, path: str, operator: dict):
    answer = await fetch(path, "POST", json_body={**JSON_INGEST[path], "visitorId": operator},
                         headers={"X-Service-Key": tenant.api_key})
    assert answer.code == 422 and answer.json()["error"]["field"] == "visitorId", answer
    assert await _visitor_data_count(deps) == 0


async def test_operators_as_lead_field_names_are_refused_or_kept_as_literal_text(
        fetch: Fetch, tenant: Tenant, deps: server.Deps):
    fields = {"$where": "sleep(1000)", "$gt": "", "a.b": "dotted", "company": "ACME"}
    answer = await fetch("/ingest/leads", "POST", headers={"X-Service-Key": tenant.api_key},
                         json_body={**JSON_INGEST["/ingest/leads"], "fields": fields})
    if answer.code == 422:
        assert answer.json()["error"]["field"].startswith("fields")
        assert await deps.store.collection("leads").count_documents({}) == 0
        return
    assert answer.code == 200, answer
    lead = await deps.store.collection("leads").find_one({})
    assert lead["fields"] == fields


async def test_operators_in_error_context_are_stored_as_literal_keys(
        fetch: Fetch, tenant: Tenant, deps: server.Deps):
    body = {**JSON_INGEST["/ingest/errors"], "context": {"$where": "sleep(1000)",
                                                         "nested": {"$gt": ""}}}
    answer = await fetch("/ingest/errors", "POST", json_body=body,
                         headers={"X-Service-Key": tenant.api_key})
    assert answer.code in (200, 422), answer
    await deps.queue.join()  # type: ignore[attr-defined]  # the embedded queue
    failed = await deps.store.collection("failed_jobs").count_documents({})
    assert failed == 0, "an operator-looking key made the error job fail"
    if answer.code == 200:
        record = await deps.store.collection("errors").find_one({})
        assert record is not None


@pytest.mark.parametrize("q", ["$where", '{"$gt": ""}', ".*", "^", "a|b", "\\"])
async def test_visitor_search_treats_operators_and_regex_syntax_as_literal_text(
        fetch: Fetch, tenant: Tenant, q: str):
    ingested = await fetch("/ingest/pageviews", "POST", json_body=JSON_INGEST["/ingest/pageviews"],
                           headers={"X-Service-Key": tenant.api_key})
    assert ingested.code == 200, ingested
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors?q="
                         + _quote(q), token=tenant.token)
    assert answer.code == 200, answer
    assert answer.json()["items"] == []


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


@pytest.mark.parametrize("smuggled", [{"$gt": ""}, {"$ne": None}, ["$where"], 1])
async def test_a_cursor_carrying_an_operator_is_a_422(fetch: Fetch, tenant: Tenant,
                                                      smuggled: Any):
    raw = json.dumps(["2026-01-01T00:00:00+00:00", smuggled]).encode()
    cursor = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    for listing in ("visitors", "errors", "leads", "recordings"):
        answer = await fetch(f"/api/v1/sites/{tenant.site_id}/{listing}?cursor={cursor}",
                             token=tenant.token)
        assert answer.code == 422 and answer.json()["error"]["field"] == "cursor", answer


async def test_a_login_with_an_operator_for_an_email_is_a_422(fetch: Fetch, tenant: Tenant):
    answer = await fetch("/auth/login", "POST",
                         json_body={"email": {"$gt": ""}, "password": {"$ne": None}})
    assert answer.code == 422, answer


async def test_operators_in_a_lead_rectification_are_refused_or_literal(
        fetch: Fetch, tenant: Tenant, deps: server.Deps):
    ingested = await fetch("/ingest/leads", "POST", json_body=JSON_INGEST["/ingest/leads"],
                           headers={"X-Service-Key": tenant.api_key})
    assert ingested.code == 200, ingested
    lead = await deps.store.collection("leads").find_one({})
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/leads/{lead['_id']}", "PATCH",
                         token=tenant.token,
                         json_body={"fields": {"$set": "x", "$where": "1"}, "name": "Ann"})
    assert answer.code in (200, 422), answer
    after = await deps.store.collection("leads").find_one({"_id": lead["_id"]})
    if answer.code == 200:
        assert after["fields"] == {"$set": "x", "$where": "1"}
    else:
        assert after == lead
    assert "sleep" not in await all_documents_text(deps.store)


#: JSON escapes that decode to text no store can hold: a lone high and a lone low surrogate.
LONE_SURROGATES = ["\\ud800", "x\\udfffy"]


def _with_raw_text(body: dict[str, Any], field: str, escaped: str) -> str:
    """`body` as JSON with `field` set to a raw JSON string escape (json.dumps would refuse)."""
    text = json.dumps({**body, field: "__RAW__"})
    return text.replace('"__RAW__"', f'"{escaped}"')


@pytest.mark.parametrize("escaped", LONE_SURROGATES)
@pytest.mark.parametrize(("path", "field"), [
    ("/ingest/pageviews", "url"), ("/ingest/leads", "email"), ("/ingest/errors", "message")])
async def test_a_lone_surrogate_on_an_ingest_route_is_a_4xx_naming_the_field(
        fetch: Fetch, tenant: Tenant, deps: server.Deps, path: str, field: str, escaped: str):
    body = _with_raw_text(JSON_INGEST[path], field, escaped)
    answer = await fetch(path, "POST", body=body, headers={
        "Content-Type": "application/json", "X-Service-Key": tenant.api_key})
    assert 400 <= answer.code < 500, answer
    assert answer.json()["error"]["field"] == field
    await deps.queue.join()  # type: ignore[attr-defined]  # the embedded queue
    assert await _visitor_data_count(deps) == 0


@pytest.mark.parametrize("escaped", LONE_SURROGATES)
async def test_a_lone_surrogate_anywhere_is_refused_on_browser_login_and_dashboard_routes(
        fetch: Fetch, tenant: Tenant, deps: server.Deps, escaped: str):
    sdk = await fetch(f"/sdk/v1/{tenant.public_key}/pageview", "POST",
                      body=_with_raw_text({"visitorId": "v-1"}, "url", escaped),
                      headers={"Content-Type": "text/plain",
                               "Origin": "https://shop.example"})
    login = await fetch("/auth/login", "POST",
                        body=_with_raw_text({"password": "x"}, "email", escaped),
                        headers={"Content-Type": "application/json"})
    nested = json.dumps({"settings": {"excludedUrls": ["__RAW__"]}}).replace(
        '"__RAW__"', f'"{escaped}"')
    update = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", body=nested,
                         token=tenant.token, headers={"Content-Type": "application/json"})
    assert [sdk.code // 100, login.code // 100, update.code // 100] == [4, 4, 4]
    assert sdk.json()["error"]["field"] == "url"
    assert login.json()["error"]["field"] == "email"
    assert update.json()["error"]["field"] == "settings.excludedUrls.0"
    assert await _visitor_data_count(deps) == 0
    site = await deps.store.collection("sites").find_one({"_id": tenant.site_id})
    assert site["settings"].get("excludedUrls", []) == []


async def test_a_surrogate_pair_is_one_character_and_is_stored(
        fetch: Fetch, tenant: Tenant, deps: server.Deps):
    body = _with_raw_text({"visitorId": "v-1", "url": "https://shop.example/"}, "title",
                          "Grinning \\ud83d\\ude00")
    answer = await fetch("/ingest/pageviews", "POST", body=body, headers={
        "Content-Type": "application/json", "X-Service-Key": tenant.api_key})
    assert answer.code == 200, answer
    assert "Grinning \U0001F600" in await all_documents_text(deps.store)


@pytest.mark.parametrize(("query", "field"), [
    ("q=" + "a" * 300, "q"), ("limit=500", "limit"), ("limit=ten", "limit"),
    ("cursor=" + "c" * 600, "cursor"),
])
async def test_declared_query_limits_are_kept_with_the_field_named(
        fetch: Fetch, tenant: Tenant, query: str, field: str):
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors?{query}", token=tenant.token)
    assert answer.code == 422, answer
    assert answer.json()["error"]["field"] == field
    ok = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors?q={'a' * 200}&limit=100",
                     token=tenant.token)
    assert ok.code == 200, ok


@pytest.mark.parametrize(("raw_context", "field"), [
    ('{"order": 123456789012345678901234567890}', "context.order"),
    ('{"big": [1, -99999999999999999999]}', "context.big.1"),
    ('{"a\\u0000b": 1}', "context.a\\0b"),
    ("[" * 70 + "]" * 70, "context" + ".0" * 64),
])
async def test_values_no_store_can_hold_are_refused_at_the_door_never_acknowledged(
        fetch: Fetch, tenant: Tenant, deps: server.Deps, raw_context: str, field: str):
    """Acknowledged means stored or counted: what would fail later in the store or the worker
    (BSON has no integers past 64 bits, no NUL in names, a nesting limit) is refused first."""
    body = json.dumps({**JSON_INGEST["/ingest/errors"], "context": "__RAW__"}).replace(
        '"__RAW__"', raw_context)
    answer = await fetch("/ingest/errors", "POST", body=body, headers={
        "Content-Type": "application/json", "X-Service-Key": tenant.api_key})
    assert answer.code == 422, answer
    assert answer.json()["error"]["field"] == field
    await deps.queue.join()  # type: ignore[attr-defined]  # the embedded queue
    assert await _visitor_data_count(deps) == 0
    assert await deps.store.collection("failed_jobs").count_documents({}) == 0
