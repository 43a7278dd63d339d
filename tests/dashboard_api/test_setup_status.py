"""The first-run checklist (issue 43 point 4): each step ticks as its first item arrives, and a
dropped item tells its reason on the site's own page, not only in /metrics."""

from __future__ import annotations

import json
import uuid

from tests.support.app import Fetch, Tenant

SHOP = "https://shop.example"
PAGE = f"{SHOP}/products/blue-mug"
HEADLESS = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
            "HeadlessChrome/126.0.0.0 Safari/537.36")
GOOGLEBOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
CHROME = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
          "Chrome/126.0.0.0 Safari/537.36")


async def _status(fetch: Fetch, tenant: Tenant, token: str) -> dict:
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/setup-status", token=token)
    assert answer.code == 200, answer
    return answer.json()


def _done(status: dict) -> dict[str, bool]:
    return {step["step"]: step["done"] for step in status["steps"]}


async def _ingest(fetch: Fetch, tenant: Tenant, kind: str, body: dict) -> dict:
    answer = await fetch(f"/ingest/{kind}", "POST", json_body=body,
                         headers={"X-Service-Key": tenant.api_key})
    assert answer.code == 200, answer
    return answer.json()


async def test_each_step_ticks_as_its_first_item_arrives_and_a_viewer_reads_it(
        fetch: Fetch, tenant: Tenant, viewer_token: str):
    empty = await _status(fetch, tenant, viewer_token)
    assert empty["setUp"] is False and empty["drops"] == []
    assert _done(empty) == {"installed": False, "pageview": False, "recording": False,
                            "order": False}
    assert {step["step"]: step["required"] for step in empty["steps"]} == {
        "installed": True, "pageview": True, "recording": True, "order": False}

    visit = {"visitorId": "v-1", "sessionId": "s-1", "url": PAGE, "userAgent": CHROME}
    await _ingest(fetch, tenant, "pageviews", visit)
    assert _done(await _status(fetch, tenant, viewer_token)) == {
        "installed": True, "pageview": True, "recording": False, "order": False}

    await _ingest(fetch, tenant, "recordings/start", {**visit, "recordingId": str(uuid.uuid4())})
    after_recording = await _status(fetch, tenant, viewer_token)
    assert _done(after_recording)["recording"] is True
    # Not a shop yet: the order step is optional and the site is set up.
    assert after_recording["setUp"] is True

    for step, extra in (("order_placed", {"orderId": "1001", "total": "24.90",
                                          "currency": "EUR"}),
                        ("order_paid", {"orderId": "1001"})):
        await _ingest(fetch, tenant, "commerce", {"eventId": f"e-{step}", "type": step,
                                                  "visitorId": "v-1", "sessionId": "s-1",
                                                  **extra})
    shop = await _status(fetch, tenant, tenant.token)
    assert _done(shop)["order"] is True
    assert shop["setUp"] is True


async def test_a_bot_a_headless_browser_and_a_foreign_origin_give_their_reasons(
        fetch: Fetch, tenant: Tenant, viewer_token: str):
    crawler = await _ingest(fetch, tenant, "pageviews", {"visitorId": "v-crawler", "url": PAGE,
                                                         "userAgent": GOOGLEBOT})
    assert crawler["dropped"] == "bot"
    for number in (1, 2):
        answer = await fetch(f"/sdk/v1/{tenant.public_key}/pageview", "POST",
                             body=json.dumps({"visitorId": "v-test", "url": PAGE,
                                              "pageviewId": f"pv-{number}"}),
                             headers={"Origin": SHOP, "Content-Type": "text/plain",
                                      "User-Agent": HEADLESS})
        assert answer.json()["dropped"] == "headless_browser", answer
    foreign = await fetch(f"/sdk/v1/{tenant.public_key}/pageview", "POST",
                          body=json.dumps({"visitorId": "v-2", "url": PAGE}),
                          headers={"Origin": "https://staging.shop.example",
                                   "Content-Type": "text/plain", "User-Agent": CHROME})
    assert foreign.code == 403

    status = await _status(fetch, tenant, viewer_token)
    assert [(drop["reason"], drop["count"]) for drop in status["drops"]] == [
        ("headless_browser", 2), ("bot", 1), ("origin_not_allowed", 1)]
    # Something arrived, so the snippet is in place; but no pageview was kept.
    assert _done(status) == {"installed": True, "pageview": False, "recording": False,
                             "order": False}
    assert status["setUp"] is False


async def test_consent_and_gpc_drops_are_told_too(fetch: Fetch, make_tenant, viewer_token: str,
                                                   tenant: Tenant):
    strict = await make_tenant("strict", settings={"requireConsent": True})
    await _ingest(fetch, strict, "pageviews", {"visitorId": "v-1", "url": PAGE,
                                               "userAgent": CHROME})
    gpc = await fetch(f"/sdk/v1/{strict.public_key}/pageview", "POST",
                      body=json.dumps({"visitorId": "v-2", "url": PAGE}),
                      headers={"Origin": SHOP, "Content-Type": "text/plain",
                               "User-Agent": CHROME, "Sec-GPC": "1"})
    assert gpc.code == 204
    status = await _status(fetch, strict, strict.token)
    assert sorted(drop["reason"] for drop in status["drops"]) == ["consent_missing", "gpc"]
    # Nothing of another site.
    assert (await _status(fetch, tenant, viewer_token))["drops"] == []


async def test_another_organizations_site_is_not_found(fetch: Fetch, tenant: Tenant,
                                                       make_tenant):
    other = await make_tenant("other")
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/setup-status", token=other.token)
    assert answer.code == 404
