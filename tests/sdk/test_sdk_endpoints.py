"""The /sdk/v1 endpoints as a browser calls them: key + Origin, CORS, GPC, consent, limits."""

from __future__ import annotations

import gzip
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest

from privacy.statements import derive_statement_key, sign_statement
from tests.support.app import Fetch, Tenant, all_documents_text
from tests.support.faulty_store import InjectedFault

SHOP = "https://shop.example"
CHROME = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
          "Chrome/126.0.0.0 Safari/537.36")
PAGE = "https://shop.example/products/blue-mug"


def _pageview(**extra: Any) -> dict[str, Any]:
    return {"visitorId": "v-1", "pageviewId": "pv-1", "url": PAGE, "title": "Blue mug",
            "language": "de-DE", "screen": "1920x1080", **extra}


async def _send(fetch: Fetch, tenant: Tenant, path: str, body: Any, *, origin: str = SHOP,
                content_type: str = "text/plain;charset=UTF-8",
                headers: dict[str, str] | None = None, key: str | None = None) -> Any:
    return await fetch(f"/sdk/v1/{key or tenant.public_key}/{path}", "POST",
                       body=json.dumps(body), headers={
                           "Origin": origin, "Content-Type": content_type,
                           "User-Agent": CHROME, **(headers or {})})


async def _stored(deps) -> int:
    total = 0
    for name in ("visitors", "pageview_buckets", "consent_decisions", "statement_nonces"):
        total += await deps.store.collection(name).count_documents({})
    return total


async def test_a_preflight_from_an_allowed_origin_echoes_that_origin_and_never_a_wildcard(
        fetch: Fetch, tenant: Tenant):
    answer = await fetch(f"/sdk/v1/{tenant.public_key}/pageview", "OPTIONS", headers={
        "Origin": "https://SHOP.example:443", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert answer.code == 204
    assert answer.headers["Access-Control-Allow-Origin"] == SHOP
    assert "Origin" in answer.headers["Vary"]
    assert answer.headers["Access-Control-Allow-Methods"] == "POST"
    assert answer.headers["Access-Control-Allow-Headers"].lower() == "content-type"


@pytest.mark.parametrize("origin", ["https://evil.example", "http://shop.example", "null", ""])
async def test_a_preflight_from_any_other_origin_is_refused_without_cors_headers(
        fetch: Fetch, tenant: Tenant, origin: str):
    answer = await fetch(f"/sdk/v1/{tenant.public_key}/pageview", "OPTIONS", headers={
        "Origin": origin, "Access-Control-Request-Method": "POST"})
    assert answer.code == 403
    assert answer.error_code == "origin_not_allowed"
    assert "Access-Control-Allow-Origin" not in answer.headers
    assert "Origin" in answer.headers["Vary"]


async def test_a_pageview_sent_as_a_text_plain_beacon_is_stored_with_the_address_anonymised(
        fetch: Fetch, tenant: Tenant, deps):
    answer = await _send(fetch, tenant, "pageview", _pageview())
    assert answer.code == 200, answer
    assert answer.json() == {"ok": True, "id": "pv-1"}
    assert answer.headers["Access-Control-Allow-Origin"] == SHOP
    profile = await deps.store.collection("visitors").find_one({"visitorId": "v-1"})
    assert profile["siteId"] == tenant.site_id
    assert profile["location"]["ipAddress"] == "127.0.0.0"
    assert profile["device"]["browser"] == "Chrome 126"
    assert "127.0.0.1" not in await all_documents_text(deps.store)


async def test_the_browser_cannot_claim_an_address_a_user_agent_or_a_cms_user(
        fetch: Fetch, tenant: Tenant, deps):
    for field, value in (("ip", "203.0.113.9"), ("userAgent", "x"), ("wpUserId", 7),
                         ("productId", "SKU-1"), ("gpc", False)):
        answer = await _send(fetch, tenant, "pageview", _pageview(**{field: value}))
        assert answer.code == 422, (field, answer)
        assert answer.json()["error"]["field"] == field
    assert await _stored(deps) == 0


async def test_an_unknown_public_key_is_refused_with_401_and_nothing_is_stored(
        fetch: Fetch, tenant: Tenant, deps):
    for key in ("pk_unknown", tenant.api_key, "nothing"):
        answer = await _send(fetch, tenant, "pageview", _pageview(), key=key)
        assert answer.code == 401, answer
        assert answer.error_code == "invalid_public_key"
        assert "Access-Control-Allow-Origin" not in answer.headers
    assert await _stored(deps) == 0
    assert deps.metrics.total("sdk_rejected_total", reason="invalid_public_key") == 3


async def test_a_post_from_a_foreign_origin_is_refused_and_stores_nothing(
        fetch: Fetch, tenant: Tenant, deps):
    answer = await _send(fetch, tenant, "pageview", _pageview(), origin="https://evil.example")
    assert answer.code == 403
    assert await _stored(deps) == 0


async def test_global_privacy_control_answers_204_stores_nothing_and_is_counted(
        fetch: Fetch, tenant: Tenant, deps):
    for path, body in (("pageview", _pageview()),
                       ("consents", {"visitorId": "v-1", "decision": "granted",
                                     "signal": "banner"}),
                       ("time-on-page", {"visitorId": "v-1", "pageviewId": "pv-1",
                                         "duration": 3})):
        answer = await _send(fetch, tenant, path, body, headers={"Sec-GPC": "1", "DNT": "0"})
        assert answer.code == 204, answer
        assert answer.body == b""
    assert await _stored(deps) == 0
    assert deps.metrics.total("ingest_items_total", outcome="dropped", reason="gpc") == 3


async def test_do_not_track_is_ignored(fetch: Fetch, tenant: Tenant, deps):
    answer = await _send(fetch, tenant, "pageview", _pageview(), headers={"DNT": "1"})
    assert answer.json()["id"] == "pv-1"


async def test_a_site_requiring_consent_stores_nothing_until_the_loader_says_granted(
        fetch: Fetch, make_tenant, deps):
    tenant = await make_tenant(origins=(SHOP,), settings={"requireConsent": True})
    dropped = await _send(fetch, tenant, "pageview", _pageview())
    assert dropped.json() == {"ok": True, "dropped": "consent_missing"}
    assert await _stored(deps) == 0
    decision = await _send(fetch, tenant, "consents", {
        "visitorId": "v-1", "decision": "granted", "signal": "api", "url": PAGE})
    assert "id" in decision.json()
    stored = await _send(fetch, tenant, "pageview", _pageview(consent="granted"))
    assert stored.json() == {"ok": True, "id": "pv-1"}
    record = await deps.store.collection("consent_decisions").find_one({})
    assert (record["decision"], record["signal"]) == ("granted", "api")


async def test_excluded_urls_restriction_and_objection_behave_as_on_ingest(
        fetch: Fetch, make_tenant, deps):
    tenant = await make_tenant(origins=(SHOP,), settings={
        "excludedUrls": [{"pattern": "/checkout*", "scope": "all"}]})
    excluded = await _send(fetch, tenant, "pageview",
                           _pageview(url="https://shop.example/checkout/pay"))
    assert excluded.json()["dropped"] == "excluded_url"
    await _send(fetch, tenant, "pageview", _pageview())
    await deps.store.collection("visitors").update_one({"visitorId": "v-1"},
                                                       {"$set": {"restricted": True}})
    restricted = await _send(fetch, tenant, "pageview", _pageview(pageviewId="pv-2"))
    assert restricted.json()["dropped"] == "restricted"


async def test_time_on_page_sets_the_pageview_duration_and_the_longest_report_wins(
        fetch: Fetch, tenant: Tenant, deps):
    await _send(fetch, tenant, "pageview", _pageview())
    for seconds in (12.5, 4):
        answer = await _send(fetch, tenant, "time-on-page",
                             {"visitorId": "v-1", "pageviewId": "pv-1", "duration": seconds,
                              "url": PAGE})
        assert answer.json() == {"ok": True, "id": "pv-1"}
    bucket = await deps.store.collection("pageview_buckets").find_one({"visitorId": "v-1"})
    assert bucket["events"][0]["duration"] == 12.5
    unknown = await _send(fetch, tenant, "time-on-page",
                          {"visitorId": "v-1", "pageviewId": "nope", "duration": 1})
    assert unknown.json() == {"ok": True, "dropped": "unknown_pageview"}


async def test_the_config_carries_the_sites_collection_settings_to_allowed_origins_only(
        fetch: Fetch, make_tenant):
    tenant = await make_tenant(origins=(SHOP,), settings={
        "requireConsent": True, "recordings": False,
        "excludedUrls": [{"pattern": "/account*", "scope": "replay"}]})
    answer = await fetch(f"/sdk/v1/{tenant.public_key}/config", headers={"Origin": SHOP})
    assert answer.code == 200
    assert answer.json() == {"requireConsent": True, "recordings": False,
                             "consoleCapture": False,
                             "excludedUrls": [{"pattern": "/account*", "scope": "replay"}],
                             "surveys": []}
    assert answer.headers["Access-Control-Allow-Origin"] == SHOP
    refused = await fetch(f"/sdk/v1/{tenant.public_key}/config",
                          headers={"Origin": "https://evil.example"})
    assert refused.code == 403


async def test_an_error_answer_to_an_allowed_origin_is_readable_by_the_page(
        fetch: Fetch, tenant: Tenant):
    answer = await _send(fetch, tenant, "pageview", {"visitorId": "v-1"})
    assert answer.code == 422
    assert answer.headers["Access-Control-Allow-Origin"] == SHOP
    assert answer.json()["error"]["field"] == "url"


async def test_other_content_types_and_oversized_bodies_are_refused(
        fetch: Fetch, tenant: Tenant, settings, deps):
    form = await _send(fetch, tenant, "pageview", _pageview(),
                       content_type="application/x-www-form-urlencoded")
    assert form.code == 415
    big = await _send(fetch, tenant, "pageview",
                      _pageview(title="x" * settings.max_event_body_bytes))
    assert big.code == 413
    assert await _stored(deps) == 0


async def test_the_loader_is_served_with_the_sites_settings_written_in(
        fetch: Fetch, make_tenant):
    tenant = await make_tenant(origins=(SHOP,), settings={"requireConsent": True})
    answer = await fetch(f"/sdk/v1/loader.js?key={tenant.public_key}")
    assert answer.code == 200, "build the SDK first: make test runs npm ci and the build"
    assert answer.headers["Content-Type"].startswith("text/javascript")
    assert b"wpelVisitorId" in answer.body
    assert b"__SVC_SITE_CONFIG__" not in answer.body
    assert b'\\"requireConsent\\": true' in answer.body
    unknown = await fetch("/sdk/v1/loader.js?key=pk_unknown")
    assert unknown.code == 404


# Product statements ------------------------------------------------------------------------


def _statement(tenant: Tenant, *, url: str = PAGE, issued_at: int | None = None,
               nonce: str | None = None, api_key: str | None = None) -> str:
    key = derive_statement_key(api_key or tenant.api_key)
    return sign_statement(key, "SKU-1001", url, int(time.time()) if issued_at is None
                          else issued_at, nonce)


async def _product_of(deps, pageview_id: str) -> Any:
    bucket = await deps.store.collection("pageview_buckets").find_one(
        {"events.id": pageview_id})
    event = next(e for e in bucket["events"] if e["id"] == pageview_id)
    return event.get("product")


async def test_a_valid_statement_attributes_the_pageview_to_its_product(
        fetch: Fetch, tenant: Tenant, deps):
    answer = await _send(fetch, tenant, "pageview",
                         _pageview(url=PAGE + "#reviews", statement=_statement(tenant)))
    assert answer.json()["id"] == "pv-1"
    assert await _product_of(deps, "pv-1") == {"productId": "SKU-1001", "via": "statement"}
    assert deps.metrics.value("product_statements_total", outcome="accepted", reason="") == 1


@pytest.mark.parametrize(("make", "reason"), [
    (lambda t: _statement(t)[:-3] + "AAA", "bad_signature"),
    (lambda t: _statement(t, issued_at=int(time.time()) - 3600), "expired"),
    (lambda t: _statement(t, issued_at=int(time.time()) + 3600), "from_future"),
    (lambda t: _statement(t, url="https://shop.example/products/red-mug"), "url_mismatch"),
    (lambda t: _statement(t, api_key="sk_someone_else"), "bad_signature"),
    (lambda t: "v1.not-a-token", "malformed"),
])
async def test_a_bad_statement_keeps_the_pageview_without_attribution_and_is_counted(
        fetch: Fetch, tenant: Tenant, deps, make, reason: str):
    answer = await _send(fetch, tenant, "pageview", _pageview(statement=make(tenant)))
    assert answer.json() == {"ok": True, "id": "pv-1"}
    assert await _product_of(deps, "pv-1") is None
    assert deps.metrics.value("product_statements_total", outcome="rejected",
                              reason=reason) == 1


async def test_a_replayed_statement_attributes_only_the_first_pageview(
        fetch: Fetch, tenant: Tenant, deps):
    token = _statement(tenant)
    await _send(fetch, tenant, "pageview", _pageview(statement=token))
    await _send(fetch, tenant, "pageview", _pageview(pageviewId="pv-2", statement=token))
    assert await _product_of(deps, "pv-1") == {"productId": "SKU-1001", "via": "statement"}
    assert await _product_of(deps, "pv-2") is None
    assert deps.metrics.value("product_statements_total", outcome="rejected",
                              reason="replayed") == 1
    nonce = await deps.store.collection("statement_nonces").find_one({})
    assert nonce["siteId"] == tenant.site_id and nonce["expiresAt"]


async def test_after_a_key_rotation_old_statements_verify_only_during_the_grace_window(
        fetch: Fetch, tenant: Tenant, deps):
    before = _statement(tenant)
    rotated = await fetch(f"/api/v1/sites/{tenant.site_id}/api-key/rotate", "POST",
                          token=tenant.token)
    new_key = rotated.json()["apiKey"]
    await _send(fetch, tenant, "pageview", _pageview(statement=before))
    assert await _product_of(deps, "pv-1") is not None
    # The grace ends: written by hand, so announced by hand (documents/sites.py).
    await deps.store.collection("sites").update_one(
        {"_id": tenant.site_id}, {"$set": {"previousStatementKeyUntil": _past()}})
    await deps.keyring.site_changed(tenant.site_id)
    await _send(fetch, tenant, "pageview", _pageview(pageviewId="pv-2",
                                                     statement=_statement(tenant)))
    assert await _product_of(deps, "pv-2") is None
    await _send(fetch, tenant, "pageview", _pageview(pageviewId="pv-3",
                                                     statement=_statement(tenant,
                                                                          api_key=new_key)))
    assert await _product_of(deps, "pv-3") == {"productId": "SKU-1001", "via": "statement"}


def _past() -> datetime:
    return datetime.now(UTC) - timedelta(seconds=1)


@pytest.fixture
def settings_env(settings_env: dict[str, str]) -> dict[str, str]:
    """A per-site burst that the rate-limit test reaches and the other tests do not."""
    return {**settings_env, "SITE_RATE_BURST": "20", "SITE_RATE_PER_SECOND": "0.5"}


async def test_a_public_key_over_its_rate_limit_gets_429_with_retry_after_and_cors(
        fetch: Fetch, tenant: Tenant, deps):
    codes = [(await _send(fetch, tenant, "pageview", _pageview(pageviewId=f"p{n}"))).code
             for n in range(21)]
    assert codes == [200] * 20 + [429]
    answer = await _send(fetch, tenant, "pageview", _pageview(pageviewId="late"))
    assert int(answer.headers["Retry-After"]) >= 1
    assert answer.headers["Access-Control-Allow-Origin"] == SHOP
    server_side = await fetch("/ingest/visitors", "POST", json_body={"visitorId": "v"},
                              headers={"X-Service-Key": tenant.api_key})
    assert server_side.code == 200, "the browser bucket must not starve /ingest"


# Errors, interactions and recordings: the same functions as /ingest -------------------------


async def test_a_browser_error_goes_through_the_errors_ingest_queue_with_the_address_anonymised(
        fetch: Fetch, tenant: Tenant, deps):
    answer = await _send(fetch, tenant, "errors", {
        "visitorId": "v-1", "url": PAGE, "source": "javascript", "type": "TypeError",
        "message": "x is undefined", "stack": "TypeError: x is undefined\n    at a (app.js:1:2)"})
    assert answer.json() == {"ok": True}
    await deps.queue.join()
    record = await deps.store.collection("errors").find_one({"siteId": tenant.site_id})
    assert record["visitorId"] == "v-1"
    assert record["ipAddress"] == "127.0.0.0"


async def test_interactions_from_the_browser_are_stored_for_the_visitor(
        fetch: Fetch, tenant: Tenant, deps):
    answer = await _send(fetch, tenant, "interactions", {
        "visitorId": "v-1", "url": PAGE, "interactions": [
            {"kind": "rage_click", "selector": "button#buy", "count": 3, "x": 1, "y": 2},
            {"kind": "scroll_depth", "depth": 80}]})
    assert answer.json() == {"ok": True, "stored": 2, "droppedCount": 0}
    bucket = await deps.store.collection("interaction_buckets").find_one({"visitorId": "v-1"})
    assert [event["kind"] for event in bucket["events"]] == ["rage_click", "scroll_depth"]


async def test_a_segment_preflight_allows_exactly_the_metadata_headers_and_the_upload_stores_it(
        fetch: Fetch, tenant: Tenant, deps):
    path = f"/sdk/v1/{tenant.public_key}/recordings/segment"
    preflight = await fetch(path, "OPTIONS", headers={
        "Origin": SHOP, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,x-recording-id,x-segment-seq"})
    allowed = {h.strip().lower() for h in
               preflight.headers["Access-Control-Allow-Headers"].split(",")}
    assert {"content-type", "x-recording-id", "x-segment-seq", "x-page-url"} <= allowed
    assert "x-visitor-gpc" not in allowed
    started = await _send(fetch, tenant, "recordings/start", {"visitorId": "v-1", "url": PAGE})
    recording_id = started.json()["id"]
    segment = gzip.compress(json.dumps([{"type": 4, "data": {}, "timestamp": 1}]).encode())
    answer = await fetch(path, "POST", body=segment, headers={
        "Origin": SHOP, "Content-Type": "application/octet-stream",
        "X-Recording-Id": recording_id, "X-Segment-Seq": "0", "X-Visitor-Id": "v-1",
        "X-Page-Url": PAGE})
    assert answer.code == 200, answer
    assert answer.json()["recordingId"] == recording_id and answer.json()["id"]
    assert answer.headers["Access-Control-Allow-Origin"] == SHOP


async def test_a_segment_sent_as_a_simple_request_carries_its_metadata_in_the_query(
        fetch: Fetch, tenant: Tenant, deps):
    """What the recorder sends as the page is left: text/plain, no custom header, no preflight."""
    started = await _send(fetch, tenant, "recordings/start", {"visitorId": "v-1", "url": PAGE})
    recording_id = started.json()["id"]
    segment = gzip.compress(json.dumps([{"type": 4, "data": {}, "timestamp": 1}]).encode())
    query = urlencode({"recordingId": recording_id, "seq": "3", "visitorId": "v-1",
                       "url": PAGE, "startedAt": "2026-11-22T10:00:00Z"})
    answer = await fetch(f"/sdk/v1/{tenant.public_key}/recordings/segment?{query}", "POST",
                         body=segment, headers={"Origin": SHOP, "Content-Type": "text/plain"})
    assert answer.code == 200, answer
    assert answer.json()["recordingId"] == recording_id
    assert answer.headers["Access-Control-Allow-Origin"] == SHOP
    (stored,) = await deps.store.bucket("segments").files.find({}).to_list(None)
    assert stored["metadata"]["seq"] == 3 and stored["metadata"]["pageUrl"] == PAGE
    # The same rules as for the headers: a missing field is named, nothing is stored.
    no_seq = urlencode({"recordingId": recording_id, "visitorId": "v-1", "url": PAGE})
    refused = await fetch(f"/sdk/v1/{tenant.public_key}/recordings/segment?{no_seq}", "POST",
                          body=segment, headers={"Origin": SHOP, "Content-Type": "text/plain"})
    assert refused.code == 422 and refused.json()["error"]["field"] == "seq"
    assert await deps.store.bucket("segments").files.count_documents({}) == 1



async def test_the_longest_documented_query_form_of_a_segment_is_answered(
        fetch: Fetch, tenant: Tenant, deps):
    """Every field at its longest, the page URL in four-byte characters (12 bytes each once
    percent-encoded): the request line is about 50 KB, and the server must still read it."""
    started = await _send(fetch, tenant, "recordings/start", {"visitorId": "v-1", "url": PAGE})
    recording_id = started.json()["id"]
    segment = gzip.compress(json.dumps([{"type": 4, "data": {}, "timestamp": 1}]).encode())
    longest_url = "https://shop.example/" + "\U0001F600" * (4096 - len("https://shop.example/"))
    query = urlencode({"recordingId": recording_id, "seq": "1000000000", "visitorId": "v" * 64,
                       "sessionId": "s" * 64, "url": longest_url,
                       "startedAt": "2026-11-22T10:00:00.000+00:00",
                       "endedAt": "2026-11-22T10:00:01.000+00:00",
                       "consent": "granted", "orderCompleted": "false"})
    assert len(query) > 48_000
    answer = await fetch(f"/sdk/v1/{tenant.public_key}/recordings/segment?{query}", "POST",
                         body=segment, headers={"Origin": SHOP, "Content-Type": "text/plain"})
    assert answer.code == 200, answer
    (stored,) = await deps.store.bucket("segments").files.find({}).to_list(None)
    assert stored["metadata"]["pageUrl"] == longest_url


# Refusals the page can read: CORS on early errors, 503 on a database hiccup ------------------


async def test_refusals_before_the_key_is_checked_carry_cors_for_an_allowed_origin_only(
        fetch: Fetch, tenant: Tenant, settings):
    oversized = _pageview(title="x" * settings.max_event_body_bytes)
    long_header = {"X-Filler": "x" * 9000}
    for refused, code in (
            (await _send(fetch, tenant, "pageview", oversized), 413),
            (await _send(fetch, tenant, "pageview", _pageview(), headers=long_header), 431),
            (await fetch(f"/sdk/v1/{tenant.public_key}/pageview", "POST", body="{not json",
                         headers={"Origin": SHOP, "Content-Type": "text/plain"}), 400)):
        assert refused.code == code, refused
        assert refused.headers["Access-Control-Allow-Origin"] == SHOP, code
        assert "Origin" in refused.headers["Vary"]
        assert set(refused.json()) == {"error"}
    foreign = await _send(fetch, tenant, "pageview", oversized, origin="https://evil.example")
    assert foreign.code == 413
    assert "Access-Control-Allow-Origin" not in foreign.headers


SDK_WRITES = [
    ("pageview", _pageview()),
    ("time-on-page", {"visitorId": "v-1", "pageviewId": "pv-1", "duration": 3}),
    ("consents", {"visitorId": "v-1", "decision": "granted", "signal": "banner"}),
    ("interactions", {"visitorId": "v-1", "url": PAGE, "interactions": [{"kind": "click"}]}),
    ("recordings/start", {"visitorId": "v-1", "url": PAGE}),
    ("recordings/end", {"visitorId": "v-1",
                        "recordingId": "0f0e0d0c-0b0a-4909-8807-060504030201"}),
]


@pytest.mark.parametrize(("path", "body"), SDK_WRITES, ids=[path for path, _ in SDK_WRITES])
async def test_a_database_hiccup_after_the_key_check_answers_503_with_retry_after_and_cors(
        fetch: Fetch, tenant: Tenant, deps, path: str, body: dict[str, Any], faults):
    faults.fail(skip=1)  # the key lookup passes; the next operation fails

    answer = await _send(fetch, tenant, path, body)

    assert answer.code == 503, answer
    assert answer.json() == {"error": {"code": "unavailable",
                                       "message": "the database is briefly unavailable"}}
    assert answer.headers["Retry-After"] == "1"
    assert answer.headers["Access-Control-Allow-Origin"] == SHOP
    assert "Retry-After" in answer.headers["Access-Control-Expose-Headers"]
    assert (await _send(fetch, tenant, path, body)).code == 200


async def test_a_segment_upload_during_a_database_hiccup_answers_503_and_its_retry_stores_it(
        fetch: Fetch, tenant: Tenant, deps, faults):
    segment = gzip.compress(json.dumps([{"type": 4, "data": {}, "timestamp": 1}]).encode())
    headers = {"Origin": SHOP, "Content-Type": "application/octet-stream",
               "X-Recording-Id": "0f0e0d0c-0b0a-4909-8807-060504030201", "X-Segment-Seq": "0",
               "X-Visitor-Id": "v-1", "X-Page-Url": PAGE}
    path = f"/sdk/v1/{tenant.public_key}/recordings/segment"
    faults.fail("segments.files", "insert_one")

    failed = await fetch(path, "POST", body=segment, headers=headers)
    retried = await fetch(path, "POST", body=segment, headers=headers)

    assert failed.code == 503 and failed.headers["Retry-After"] == "1"
    assert failed.headers["Access-Control-Allow-Origin"] == SHOP
    assert retried.code == 200 and "id" in retried.json()
    assert await deps.store.bucket("segments").files.count_documents({}) == 1


async def test_a_database_hiccup_in_the_key_lookup_answers_503_without_cors(
        fetch: Fetch, tenant: Tenant, deps, faults):
    faults.fail("sites", "find_one", error=lambda: InjectedFault("lookup"))

    answer = await fetch(f"/sdk/v1/{tenant.public_key}/config", headers={"Origin": SHOP})

    assert answer.code == 503, answer
    assert answer.error_code == "unavailable"
    assert answer.headers["Retry-After"] == "1"
    # Whether the site allows this origin is not known, so the answer does not allow it.
    assert "Access-Control-Allow-Origin" not in answer.headers


async def test_a_retried_interaction_batch_from_the_browser_is_stored_once(
        fetch: Fetch, tenant: Tenant, deps):
    batch = {"visitorId": "v-1", "url": PAGE, "batchId": "0f0e0d0c-0b0a-4909-8807-060504030201",
             "interactions": [{"kind": "click", "selector": "#buy"}, {"kind": "dead_click"}]}

    first = await _send(fetch, tenant, "interactions", batch)
    again = await _send(fetch, tenant, "interactions", batch)

    assert first.json() == {"ok": True, "stored": 2, "droppedCount": 0}
    assert again.json() == {"ok": True, "stored": 2, "droppedCount": 0, "duplicate": True}
    assert again.headers["Access-Control-Allow-Origin"] == SHOP
    buckets = [doc async for doc in deps.store.collection("interaction_buckets").find({})]
    assert sum(len(bucket["events"]) for bucket in buckets) == 2
