"""Clicks as the shop owner reads them (issue 28 points 2, 3 and 6), from real Chromium.

Each test opens the test shop's page (it loads the real loader from the service, as a shop
does), gives it the content the test needs, clicks the way a visitor does, and reads
what the owner would see: the stored clicks, rage clicks and dead clicks, and where the heatmap
finds each click's element (it looks the stored selector up with querySelector).
"""

from __future__ import annotations

import json
from typing import Any

from playwright.async_api import Browser, Page
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from tests.browser.conftest import Service, Shop, ShopFactory
from tests.support.browser import eventually

CHECKOUT = """
<h1>Checkout</h1>
<form onsubmit="return false">
  <p><label id="name-label" for="name">Name</label> <input id="name" name="name"></p>
  <p><textarea id="note" name="note"></textarea></p>
  <p><select id="country" name="country"><option>Austria</option><option>Chile</option>
  </select></p>
  <div id="address" contenteditable="true">Street</div>
</form>
<button id="dead">Does nothing</button>
"""

HEADER_OF_LINKS = """
<header><a href="#shop">Shop</a> <a href="#blog">Blog</a> <a href="#contact">Contact</a>
</header>
<main><p>Welcome</p></main>
"""


async def open_page(browser: Browser, shop: Shop, body: str) -> Page:
    """A fresh visitor on the shop's page, its content replaced by `body`, the loader running."""
    page = await browser.new_page()
    await page.goto(shop.page("/"))
    await page.wait_for_function("window.svc && window.svc.length === 1")  # the loader's own
    await page.evaluate("""body => {
        for (const node of [...document.body.children]) {
            if (!node.hasAttribute('data-svc-survey')) node.remove();
        }
        document.body.insertAdjacentHTML('afterbegin', body);
    }""", body)
    return page


async def interactions(deps, site_id: str) -> list[dict[str, Any]]:
    """Every stored interaction of the site."""
    events: list[dict[str, Any]] = []
    async for bucket in deps.store.collection("interaction_buckets").find({"siteId": site_id}):
        events.extend(bucket["events"])
    return events


async def test_clicking_into_form_fields_and_the_survey_is_not_a_dead_click(
        browser: Browser, service: Service, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    answer = await AsyncHTTPClient().fetch(HTTPRequest(
        f"{service.url}/api/v1/sites/{shop.tenant.site_id}/surveys", "POST",
        headers={"Authorization": f"Bearer {shop.tenant.token}",
                 "Content-Type": "application/json"},
        body=json.dumps({"name": "Checkout", "questionType": "score",
                         "question": "How likely are you to recommend us?", "pages": ["/*"],
                         "trigger": "delay", "delaySeconds": 0})))
    assert answer.code == 201
    page = await open_page(browser, shop, CHECKOUT)
    for field in ("#name-label", "#name", "#note", "#country", "#address"):
        await page.click(field)
    survey = page.locator("[data-svc-survey]")
    await survey.wait_for(state="attached")
    # Clicking on the widget's question changes nothing on the shop's page.
    box = await survey.evaluate("""host => {
        const r = host.shadowRoot.querySelector('#svc-survey-title').getBoundingClientRect();
        return {x: r.x + r.width / 2, y: r.y + r.height / 2};
    }""")
    await page.mouse.click(box["x"], box["y"])
    await page.click("#dead", force=True)
    await page.wait_for_timeout(1300)  # a dead click is one with no effect for 1 s

    async def the_dead_button() -> list[dict[str, Any]]:
        events = await interactions(deps, shop.tenant.site_id)
        return events if any(e["kind"] == "dead_click" for e in events) else []

    events = await eventually(the_dead_button, message="the dead click on the button")
    clicked = {e["selector"] for e in events if e["kind"] == "click"}
    assert {"input#name", "textarea#note", "select#country", "div#address"} <= clicked
    assert [e["selector"] for e in events if e["kind"] == "dead_click"] == ["button#dead"]


async def test_five_fast_clicks_on_one_spot_are_one_rage_click_of_five_and_no_dead_clicks(
        browser: Browser, service: Service, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    page = await open_page(browser, shop, CHECKOUT)
    box = await page.locator("#dead").bounding_box()
    for _ in range(5):
        await page.mouse.click(box["x"] + 5, box["y"] + 5)
    await page.wait_for_timeout(1300)  # the burst is over, and a dead click would be judged

    async def the_rage_click() -> list[dict[str, Any]]:
        events = await interactions(deps, shop.tenant.site_id)
        return events if any(e["kind"] == "rage_click" for e in events) else []

    events = await eventually(the_rage_click, message="the rage click")
    kinds = [e["kind"] for e in events]
    assert kinds.count("click") == 5
    assert kinds.count("dead_click") == 0
    [rage] = [e for e in events if e["kind"] == "rage_click"]
    assert rage["count"] == 5 and rage["selector"] == "button#dead"


async def test_a_click_on_the_third_header_link_is_placed_on_the_third_link(
        browser: Browser, service: Service, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    page = await open_page(browser, shop, HEADER_OF_LINKS)
    await page.get_by_role("link", name="Contact").click()
    await page.get_by_role("link", name="Blog").click()

    async def both_clicks() -> list[dict[str, Any]]:
        events = [e for e in await interactions(deps, shop.tenant.site_id)
                  if e["kind"] == "click"]
        return events if len(events) == 2 else []

    contact, blog = sorted(await eventually(both_clicks, within=20, message="the two clicks"),
                           key=lambda e: e["at"])
    # The heatmap finds each click's element with querySelector, as here on the same page.
    found = await page.evaluate("""selectors => selectors.map(
        s => document.querySelector(s) && document.querySelector(s).textContent)""",
                                [contact["selector"], blog["selector"]])
    assert found == ["Contact", "Blog"], (contact["selector"], blog["selector"])
