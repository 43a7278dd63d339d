"""Bots and headless browsers are no visitors: nothing they send reaches a figure, and each drop
is counted with its reason (issue 28 point 14)."""

from __future__ import annotations

import json

from tests.recordings.kit import gzip_json, rrweb_events
from tests.support.app import Fetch, Tenant

SHOP = "https://shop.example"
PAGE = f"{SHOP}/products/blue-mug"
HEADLESS = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
            "HeadlessChrome/126.0.0.0 Safari/537.36")
GOOGLEBOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
CHROME = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
          "Chrome/126.0.0.0 Safari/537.36")
RECORDING = "00000000-0000-4000-8000-0000000000b0"


async def _sdk(fetch: Fetch, tenant: Tenant, path: str, body: dict, user_agent: str):
    answer = await fetch(f"/sdk/v1/{tenant.public_key}/{path}", "POST", body=json.dumps(body),
                         headers={"Origin": SHOP, "Content-Type": "text/plain;charset=UTF-8",
                                  "User-Agent": user_agent})
    assert answer.code == 200, answer
    return answer.json()


async def test_a_headless_browser_is_left_out_of_visitors_pageviews_and_devices(
        fetch: Fetch, tenant: Tenant, deps):
    visit = {"visitorId": "v-bot", "sessionId": "s-bot", "url": PAGE}
    answer = await _sdk(fetch, tenant, "pageview", {**visit, "pageviewId": "pv-1"}, HEADLESS)
    assert answer["dropped"] == "headless_browser"
    await _sdk(fetch, tenant, "recordings/start", {**visit, "recordingId": RECORDING}, HEADLESS)
    await _sdk(fetch, tenant, "interactions", {**visit, "interactions": [
        {"kind": "click", "x": 10, "y": 10, "selector": "a"}]}, HEADLESS)
    await _sdk(fetch, tenant, "errors", {**visit, "type": "TypeError", "message": "x",
                                         "source": "javascript"}, HEADLESS)
    segment = await fetch(f"/sdk/v1/{tenant.public_key}/recordings/segment", "POST",
                          body=gzip_json(rrweb_events(console=False)), headers={
                              "Origin": SHOP, "Content-Type": "application/octet-stream",
                              "User-Agent": HEADLESS, "X-Recording-Id": RECORDING,
                              "X-Segment-Seq": "0", "X-Visitor-Id": "v-bot",
                              "X-Session-Id": "s-bot", "X-Page-Url": PAGE})
    assert segment.code == 200 and segment.json()["dropped"] == "headless_browser", segment
    crawler = await fetch("/ingest/pageviews", "POST", headers={"X-Service-Key": tenant.api_key},
                          json_body={"visitorId": "v-crawler", "url": PAGE,
                                     "userAgent": GOOGLEBOT})
    assert crawler.json()["dropped"] == "bot", crawler
    await _sdk(fetch, tenant, "pageview", {"visitorId": "v-real", "pageviewId": "pv-2",
                                           "url": PAGE}, CHROME)

    assert await deps.store.collection("visitors").distinct("visitorId") == ["v-real"]
    for name in ("recordings", "interaction_buckets", "error_outbox"):
        assert await deps.store.collection(name).count_documents({"visitorId": "v-bot"}) == 0
    buckets = await deps.store.collection("pageview_buckets").distinct("visitorId")
    assert buckets == ["v-real"]
    metrics = deps.metrics
    for kind in ("pageview", "recording", "interaction", "error"):
        assert metrics.value("ingest_items_total", kind=kind, outcome="dropped",
                             reason="headless_browser") >= 1, kind
    assert metrics.value("ingest_items_total", kind="pageview", outcome="dropped",
                         reason="bot") == 1
