"""Direct ingest: pageviews, visitors, leads, surveys, chats and consents, as shops send them."""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.support.app import Fetch, Tenant, all_documents_text

CHROME = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
          "Chrome/126.0.0.0 Safari/537.36")


def _key(tenant: Tenant) -> dict[str, str]:
    return {"X-Service-Key": tenant.api_key}


async def _ingest(fetch: Fetch, tenant: Tenant, kind: str, body: dict) -> object:
    return await fetch(f"/ingest/{kind}", "POST", json_body=body, headers=_key(tenant))


def _pageview(**extra) -> dict:
    return {"visitorId": "v-1", "url": "https://shop.example/shoes", "title": "Shoes",
            "ip": "203.0.113.77", "userAgent": CHROME, "language": "de-DE",
            "screen": "1920x1080", "occurredAt": "2026-11-20T10:00:00Z", **extra}


async def test_a_pageview_creates_a_profile_with_device_location_and_activity(
        fetch: Fetch, tenant: Tenant, deps):
    answer = await _ingest(fetch, tenant, "pageviews", _pageview(productId=42))
    assert answer.code == 200, answer
    assert answer.json()["ok"] is True and answer.json()["id"]
    profile = await deps.store.collection("visitors").find_one({"visitorId": "v-1"})
    assert profile["siteId"] == tenant.site_id
    assert profile["displayName"] == "Visitor #v-1"
    assert profile["device"] == {"browser": "Chrome 126", "os": "Windows 10", "type": "desktop",
                                 "screen": "1920x1080", "language": "de-DE"}
    assert profile["location"]["ipAddress"] == "203.0.113.0"
    assert profile["counts"]["pageviews"] == 1
    assert profile["recent"][-1]["url"] == "https://shop.example/shoes"
    bucket = await deps.store.collection("pageview_buckets").find_one({"visitorId": "v-1"})
    assert bucket["events"][0]["product"] == {"productId": "42", "via": "server"}


async def test_the_full_ip_address_is_stored_nowhere_and_logged_nowhere(
        fetch: Fetch, tenant: Tenant, deps, caplog):
    import logging

    caplog.set_level(logging.DEBUG)
    full = "198.51.100.123"
    full_v6 = "2001:db8:abcd:12:3456:789a:bcde:f012"
    await _ingest(fetch, tenant, "pageviews", _pageview(ip=full))
    await _ingest(fetch, tenant, "pageviews", _pageview(visitorId="v-6", ip=full_v6))
    await _ingest(fetch, tenant, "leads", {"visitorId": "v-1", "email": "a@b.example",
                                           "ip": full})
    text = await all_documents_text(deps.store)
    assert full not in text and full_v6 not in text
    assert "198.51.100.0" in text and "2001:db8:abcd::" in text
    assert full not in caplog.text and full_v6 not in caplog.text


async def test_addresses_in_the_page_url_title_and_referrer_are_stored_anonymised(
        fetch: Fetch, tenant: Tenant, deps):
    """A shop's own pages can carry addresses ("?ip=…", an admin page titled with one)."""
    v4, v6 = "198.51.100.123", "2001:db8:abcd:12:3456:789a:bcde:f012"
    answer = await _ingest(fetch, tenant, "pageviews", _pageview(
        url=f"https://shop.example/track?ip={v4}", title=f"Session of {v6}",
        referrer=f"http://[{v6}]:8080/from"))
    assert answer.code == 200, answer
    text = await all_documents_text(deps.store)
    assert v4 not in text and v6 not in text
    bucket = await deps.store.collection("pageview_buckets").find_one({"visitorId": "v-1"})
    event = bucket["events"][0]
    assert event["url"] == "https://shop.example/track?ip=198.51.100.0"
    assert event["title"] == "Session of 2001:db8:abcd::"
    assert event["referrer"] == "http://[2001:db8:abcd::]:8080/from"


async def test_repeated_pageviews_go_to_capped_buckets_not_one_growing_array(
        fetch: Fetch, tenant: Tenant, deps):
    from documents import activity

    for n in range(7):
        await activity.append_pageview(deps.store, tenant.site_id, "v-9", {
            "id": f"p{n}", "at": datetime(2026, 1, 1, n), "url": "u"}, ordinal=n + 1, cap=3)
    buckets = await deps.store.collection("pageview_buckets").find(
        {"visitorId": "v-9"}).to_list(None)
    assert sorted(b["count"] for b in buckets) == [1, 3, 3]
    ids = [e["id"] async for e in activity.pageviews_of(deps.store, tenant.site_id, "v-9")]
    assert ids == [f"p{n}" for n in range(7)]


async def test_a_retried_pageview_is_stored_once(fetch: Fetch, tenant: Tenant, deps):
    for _ in range(2):
        await _ingest(fetch, tenant, "pageviews", _pageview(pageviewId="pv-1"))
    bucket = await deps.store.collection("pageview_buckets").find_one({"visitorId": "v-1"})
    assert bucket["count"] == 1
    profile = await deps.store.collection("visitors").find_one({"visitorId": "v-1"})
    assert profile["counts"]["pageviews"] == 1


async def test_a_lead_names_the_visitor_and_announces_new_lead(
        fetch: Fetch, tenant: Tenant, deps):
    events = []
    deps.bus.listen(lambda site_id, event: events.append((site_id, event)))
    await _ingest(fetch, tenant, "pageviews", _pageview())
    answer = await _ingest(fetch, tenant, "leads", {
        "visitorId": "v-1", "email": "Ada@Example.com", "name": "Ada Lovelace", "kind": "checkout",
        "cart": {"items": [{"productId": 42, "quantity": 1, "price": 99.5}], "total": 99.5,
                 "currency": "EUR"},
        "ecommerceSessionId": "wc-123", "wpUserId": 7})
    assert answer.code == 200, answer
    profile = await deps.store.collection("visitors").find_one({"visitorId": "v-1"})
    assert profile["displayName"] == "Ada Lovelace"
    assert profile["wpUserId"] == "7"
    assert profile["emails"] == ["ada@example.com"]
    lead = await deps.store.collection("leads").find_one({"_id": answer.json()["id"]})
    assert lead["email"] == "ada@example.com" and lead["ecommerceSessionId"] == "wc-123"
    assert events == [(tenant.site_id, {
        "type": "new_lead", "siteId": tenant.site_id, "id": lead["_id"],
        "time": events[0][1]["time"],
        "lead": {"id": lead["_id"], "displayName": "Ada Lovelace", "visitorId": "v-1"}})]


async def test_profiles_sharing_a_wordpress_user_stay_separate_but_linked(
        fetch: Fetch, tenant: Tenant, deps):
    await _ingest(fetch, tenant, "visitors", {"visitorId": "laptop", "wpUserId": 7})
    await _ingest(fetch, tenant, "visitors", {"visitorId": "phone", "wpUserId": "7"})
    linked = await deps.store.collection("visitors").find(
        {"siteId": tenant.site_id, "wpUserId": "7"}).to_list(None)
    assert sorted(p["visitorId"] for p in linked) == ["laptop", "phone"]


async def test_surveys_chats_and_consents_are_stored(fetch: Fetch, tenant: Tenant, deps):
    survey = await _ingest(fetch, tenant, "surveys", {
        "sessionId": "s-1", "surveyId": "nps", "answers": [{"question": "Recommend?", "score": 9}]})
    chat = await _ingest(fetch, tenant, "chats", {
        "emails": ["ada@example.com"], "messages": [{"from": "visitor", "text": "hi"}]})
    consent = await _ingest(fetch, tenant, "consents", {
        "visitorId": "v-1", "decision": "granted", "signal": "banner"})
    assert survey.code == chat.code == consent.code == 200
    assert (await deps.store.collection("survey_responses").find_one())["sessionId"] == "s-1"
    assert (await deps.store.collection("chat_transcripts").find_one())["emails"] == [
        "ada@example.com"]
    assert (await deps.store.collection("consent_decisions").find_one())["signal"] == "banner"


@pytest.mark.parametrize(("body", "reason"), [
    (_pageview(gpc=True), "gpc"),
    (_pageview(url="https://shop.example/checkout/pay"), "excluded_url"),
])
async def test_privacy_rules_acknowledge_and_store_nothing(
        fetch: Fetch, make_tenant, deps, body: dict, reason: str):
    tenant = await make_tenant(settings={"excludedUrls": [{"pattern": "/checkout*",
                                                          "scope": "all"}]})
    answer = await _ingest(fetch, tenant, "pageviews", body)
    assert answer.code == 200
    assert answer.json() == {"ok": True, "dropped": reason}
    assert await deps.store.collection("visitors").count_documents({}) == 0
    assert await deps.store.collection("pageview_buckets").count_documents({}) == 0
    assert deps.metrics.value("ingest_items_total", kind="pageview", outcome="dropped",
                              reason=reason) == 1


async def test_a_site_requiring_consent_stores_nothing_until_consent_is_granted(
        fetch: Fetch, make_tenant, deps):
    tenant = await make_tenant(settings={"requireConsent": True})
    dropped = await _ingest(fetch, tenant, "pageviews", _pageview())
    assert dropped.json() == {"ok": True, "dropped": "consent_missing"}
    stored = await _ingest(fetch, tenant, "pageviews", _pageview(consent="granted"))
    assert "id" in stored.json()
    assert await deps.store.collection("pageview_buckets").count_documents({}) == 1


async def test_a_restricted_or_objected_visitor_is_acknowledged_and_not_stored(
        fetch: Fetch, tenant: Tenant, deps):
    await _ingest(fetch, tenant, "pageviews", _pageview())
    await deps.store.collection("visitors").update_one({"visitorId": "v-1"},
                                                       {"$set": {"objected": True}})
    answer = await _ingest(fetch, tenant, "pageviews", _pageview(pageviewId="later"))
    assert answer.json() == {"ok": True, "dropped": "objected"}
    bucket = await deps.store.collection("pageview_buckets").find_one({"visitorId": "v-1"})
    assert bucket["count"] == 1


@pytest.mark.parametrize(("headers", "body", "status", "field"), [
    ({}, _pageview(), 401, None),
    ({"X-Service-Key": "sk_wrong"}, _pageview(), 401, None),
    (None, {"visitorId": "v-1"}, 422, "url"),
    (None, {**_pageview(), "fullIp": "1.2.3.4"}, 422, "fullIp"),
    (None, _pageview(visitorId="bad id!"), 422, "visitorId"),
])
async def test_bad_requests_are_refused_and_store_nothing(
        fetch: Fetch, tenant: Tenant, deps, headers, body, status, field):
    answer = await fetch("/ingest/pageviews", "POST", json_body=body,
                         headers=_key(tenant) if headers is None else headers)
    assert answer.code == status, answer
    if field:
        assert answer.json()["error"]["field"] == field
    assert await deps.store.collection("pageview_buckets").count_documents({}) == 0
    assert deps.metrics.total("ingest_rejected_total", kind="pageview") == 1


async def test_malformed_json_and_oversized_bodies_are_refused(
        fetch: Fetch, tenant: Tenant, settings):
    bad = await fetch("/ingest/pageviews", "POST", body="{", headers={
        **_key(tenant), "Content-Type": "application/json"})
    assert bad.code == 400
    big = await fetch("/ingest/pageviews", "POST", json_body=_pageview(
        title="x" * settings.max_event_body_bytes), headers=_key(tenant))
    assert big.code == 413


@pytest.fixture
def settings_env(settings_env: dict[str, str]) -> dict[str, str]:
    """A small per-site burst, so the limit is reached quickly."""
    return {**settings_env, "SITE_RATE_BURST": "3", "SITE_RATE_PER_SECOND": "0.5"}


async def test_a_site_over_its_rate_limit_gets_429_with_retry_after(
        fetch: Fetch, tenant: Tenant):
    codes = [(await _ingest(fetch, tenant, "visitors", {"visitorId": "v"})).code
             for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    answer = await _ingest(fetch, tenant, "visitors", {"visitorId": "v"})
    assert int(answer.headers["Retry-After"]) >= 1


async def test_a_lead_that_completes_an_order_ends_the_visitors_recording(
        fetch: Fetch, tenant: Tenant, deps):
    started = await _ingest(fetch, tenant, "recordings/start", {"visitorId": "v-1"})
    recording_id = started.json()["id"]
    await _ingest(fetch, tenant, "leads", {"visitorId": "v-1", "email": "a@b.example",
                                           "kind": "checkout", "orderCompleted": True})
    recording = await deps.store.collection("recordings").find_one({"_id": recording_id})
    assert recording["status"] == "ended" and recording["endReason"] == "order"
