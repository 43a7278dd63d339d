"""The first-run checklist on a new site's overview in Chromium (issue 43 point 4): it waits for
the first pageview, says why a headless browser's visit was not counted, ticks the pageview once
one arrives, and is gone on a site that is set up (the demo's). Clean under axe-core at 1280 and
390 px."""

from __future__ import annotations

import json

from playwright.async_api import Page, expect
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from tests.ui.accessibility import assert_accessible
from tests.ui.conftest import Dashboard, sign_in

PHONE = {"width": 390, "height": 844}
HEADLESS = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
            "HeadlessChrome/126.0.0.0 Safari/537.36")
CHROME = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
          "Chrome/126.0.0.0 Safari/537.36")


async def _call(dashboard: Dashboard, path: str, body: dict, headers: dict) -> dict:
    answer = await AsyncHTTPClient().fetch(HTTPRequest(
        dashboard.url + path, "POST", body=json.dumps(body),
        headers={"Content-Type": "application/json", **headers}))
    return json.loads(answer.body)


async def _new_site(dashboard: Dashboard) -> dict:
    login = await _call(dashboard, "/auth/login",
                        {"email": dashboard.email, "password": dashboard.password}, {})
    return await _call(dashboard, "/api/v1/sites",
                       {"name": "New shop", "allowedOrigins": ["https://new-shop.example"]},
                       {"Authorization": f"Bearer {login['accessToken']}"})


async def test_a_new_sites_overview_walks_its_owner_through_the_first_data(
        page: Page, dashboard: Dashboard):
    site = await _new_site(dashboard)
    await sign_in(page, dashboard)
    # The demo site has its data: no checklist there.
    await expect(page.locator("#overview-figures")).to_be_visible()
    await expect(page.locator("#setup-checklist")).to_have_count(0)

    await page.goto(f"{dashboard.url}/app/sites/{site['id']}")
    checklist = page.locator("#setup-checklist")
    await expect(checklist.get_by_role("heading", name="Getting started")).to_be_visible()
    await expect(checklist.locator("[data-step='pageview']")).to_have_attribute(
        "data-done", "false")
    await expect(checklist.locator("[data-step='order']")).to_contain_text("shops only")
    await assert_accessible(page, "the checklist of an empty site at 1280 px")

    key = {"X-Service-Key": site["apiKey"]}
    dropped = await _call(dashboard, "/ingest/pageviews", {
        "visitorId": "v-test", "url": "https://new-shop.example/", "userAgent": HEADLESS}, key)
    assert dropped["dropped"] == "headless_browser"
    await page.reload()
    await expect(checklist.locator("[data-step='installed']")).to_have_attribute(
        "data-done", "true")
    await expect(checklist.locator("#checklist-drops [data-reason='headless_browser']")
                 ).to_contain_text("headless browser")
    await page.set_viewport_size(PHONE)
    await assert_accessible(page, "the checklist with a drop reason at 390 px")

    await _call(dashboard, "/ingest/pageviews", {
        "visitorId": "v-real", "url": "https://new-shop.example/", "userAgent": CHROME}, key)
    await page.reload()
    await expect(checklist.locator("[data-step='pageview']")).to_have_attribute(
        "data-done", "true")
    await expect(checklist.locator("[data-step='recording']")).to_have_attribute(
        "data-done", "false")
