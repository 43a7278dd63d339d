"""A visit's replay as the shop owner sees it in the dashboard (issue 28 point 5), in Chromium.

A visitor walks through two pages of a test shop with recordings on, making a dead click on
each; the owner then opens the recording in the dashboard. Each page change must be marked where
the replay shows that page, before the clicks made on it, and the visit's last page must be
there.
"""

from __future__ import annotations

from playwright.async_api import Browser, Page

from tests.browser.conftest import Service, ShopFactory, stored_segments
from tests.support.app import TEST_PASSWORD
from tests.support.browser import eventually

#: The recorder takes a page's first snapshot when the main thread is idle, within 2 s; a
#: visitor looks at a page a moment before clicking.
LOOK_MS = 2500


async def _visit_a_page(page: Page) -> None:
    await page.wait_for_timeout(LOOK_MS)
    await page.click("#dead")
    await page.wait_for_timeout(1300)  # a dead click is one with no effect for 1 s


async def test_page_changes_are_marked_before_the_clicks_on_each_page_and_the_last_page_is_there(
        browser: Browser, service: Service, open_shop: ShopFactory, deps, artifacts):
    shop = await open_shop({"recordings": True})
    site_id = shop.tenant.site_id
    visitor = await browser.new_page()
    await visitor.goto(shop.page("/"))
    await _visit_a_page(visitor)
    await visitor.click("#next")
    await visitor.wait_for_url(shop.page("/page2"))
    await _visit_a_page(visitor)
    await visitor.goto("about:blank")  # the visit ends: what is unsent goes as the page is left

    async def both_pages_recorded() -> bool:
        urls = {doc["metadata"].get("pageUrl") for doc, _ in
                await stored_segments(deps.store, site_id)}
        return {shop.page("/"), shop.page("/page2")} <= urls

    await eventually(both_pages_recorded, message="segments of both pages")

    async def two_dead_clicks() -> bool:
        count = 0
        async for bucket in deps.store.collection("interaction_buckets").find(
                {"siteId": site_id}):
            count += sum(event["kind"] == "dead_click" for event in bucket["events"])
        return count == 2

    await eventually(two_dead_clicks, message="the dead click on each page")
    recording = await deps.store.collection("recordings").find_one({"siteId": site_id})
    await deps.segment_sweeper.sweep()  # segments are listed once checked for console output

    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    await page.goto(service.url + "/")
    await page.get_by_label("E-mail").fill(shop.tenant.email)
    await page.get_by_label("Password").fill(TEST_PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_selector("#site-switcher")
    await page.goto(f"{service.url}/app/sites/{site_id}/recordings/{recording['_id']}")
    await page.wait_for_selector("#replay-player[data-ready]")
    await page.screenshot(path=artifacts("replay.png"), full_page=True)
    marked = await page.locator("#replay-events li").evaluate_all("""items => items.map(
        item => item.dataset.kind === 'page'
            ? 'page ' + item.textContent.trim().split(' ').at(-1) : item.dataset.kind)""")
    assert marked == ["page /", "dead_click", "page /page2", "dead_click"]
