"""A survey on a WordPress shop (issue 20): shown on the product page it targets, answered with
the keyboard, and sent through the plugin's same-origin route, never straight to /sdk/v1."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from playwright.async_api import Browser, Request, expect
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from tests.support.browser import eventually
from tests.wordpress.conftest import ShopFactory, documents

DELAY = 2


async def test_a_survey_shows_on_the_product_page_and_its_answer_goes_through_the_cms_route(
        browser: Browser, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    product_path = urlsplit(shop.wp.product_url).path
    created = await AsyncHTTPClient().fetch(HTTPRequest(
        f"{shop.service.url}/api/v1/sites/{shop.tenant.site_id}/surveys", "POST",
        headers={"Authorization": f"Bearer {shop.tenant.token}",
                 "Content-Type": "application/json"},
        body=json.dumps({"name": "Product NPS", "questionType": "score",
                         "question": "How likely are you to recommend this mug?",
                         "pages": [product_path + "*"], "delaySeconds": DELAY})))
    survey_id = json.loads(created.body)["id"]

    context = await browser.new_context()
    page = await context.new_page()
    posted: list[tuple[str, str]] = []

    def note(request: Request) -> None:
        if request.method == "POST" or request.url.endswith("/survey.js"):
            posted.append((request.method, request.url))

    page.on("request", note)
    await page.goto(shop.url + "/")
    await page.wait_for_load_state("networkidle")
    assert not [url for _, url in posted if url.endswith("/survey.js")]

    await page.goto(shop.wp.product_url)
    dialog = page.get_by_role("dialog")
    await expect(dialog).to_have_count(0)
    await expect(dialog).to_be_visible(timeout=DELAY * 1000 + 10000)
    for _ in range(10):
        await page.keyboard.press("ArrowRight")  # from 0 to 10
    await page.keyboard.press("Tab")
    await page.keyboard.press("Enter")
    await expect(dialog.get_by_role("heading", name="Thank you!")).to_be_visible()

    stored = (await eventually(
        lambda: documents(deps, "survey_responses", shop.tenant.site_id),
        message="the survey answer, forwarded by the shop"))[0]
    assert stored["surveyId"] == survey_id
    assert stored["answers"] == [{"question": "How likely are you to recommend this mug?",
                                  "score": 10}]
    # The host is an IPv4 literal here, which the service stores anonymised like any address.
    assert urlsplit(stored["url"]).path == product_path
    assert stored["visitorId"] == await page.evaluate("localStorage.getItem('wpelVisitorId')")
    survey_posts = [url for method, url in posted if method == "POST" and "surveys" in url]
    assert survey_posts == [shop.url + "/wp-json/service/v1/surveys"]
    assert ("POST", "/ingest/surveys") in {(m, p) for m, p, *_ in shop.service.requests}
    await context.close()


async def test_with_gpc_the_product_page_shows_no_survey_and_sends_nothing(
        browser: Browser, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    await AsyncHTTPClient().fetch(HTTPRequest(
        f"{shop.service.url}/api/v1/sites/{shop.tenant.site_id}/surveys", "POST",
        headers={"Authorization": f"Bearer {shop.tenant.token}",
                 "Content-Type": "application/json"},
        body=json.dumps({"name": "Product NPS", "questionType": "score", "question": "Why?",
                         "pages": ["/*"], "delaySeconds": 0})))
    context = await browser.new_context()
    await context.add_init_script(
        "Object.defineProperty(Navigator.prototype, 'globalPrivacyControl', "
        "{get: () => true, configurable: true});")
    page = await context.new_page()
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if r.method == "POST"
            or "/sdk/v1/" in r.url and "loader.js" not in r.url else None)
    before = len(shop.service.requests)
    await page.goto(shop.wp.product_url)
    await page.wait_for_load_state("networkidle")
    await page.wait_for_timeout(1500)
    await expect(page.get_by_role("dialog")).to_have_count(0)
    assert sent == []
    assert [r for r in shop.service.requests[before:] if "loader.js" not in r[1]] == []
    assert await documents(deps, "survey_responses", shop.tenant.site_id) == []
    await context.close()
