"""The errors pages (issue 21, point 1) in Chromium: filters and sorts in the URL, trend
sparklines, and an error's detail with visitors, pages, devices, context and frames.

The errors are sent through /ingest/errors with the demo site's API key, as a shop would.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from playwright.async_api import Page, expect

from tests.ui.accessibility import assert_accessible
from tests.ui.conftest import JONAS, MIA, Dashboard, ingest, sign_in

SHOP = "https://demo-shop.example"
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
IPHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
          "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1")
COUPON = "TypeError: coupon.rules is undefined"


async def _report(dashboard: Dashboard, deps, **fields) -> None:
    answer = await ingest(dashboard, "/ingest/errors", {
        "source": "javascript", "type": "TypeError", "message": "coupon.rules is undefined",
        "stack": "TypeError: coupon.rules is undefined\n"
                 "    at applyCoupon (https://demo-shop.example/js/cart.js:88:13)\n"
                 "    at HTMLFormElement.onsubmit (https://demo-shop.example/cart:1:1)",
        "context": {"release": "4.2.0", "cart": {"items": 2, "coupon": "SPRING"}}, **fields})
    assert answer.code == 200, answer


async def _seed(dashboard: Dashboard, deps) -> None:
    now = datetime.now(UTC)
    for visitor, agent, days_ago in ((MIA, IPHONE, 0), (MIA, IPHONE, 2), (JONAS, FIREFOX, 5)):
        await _report(dashboard, deps, visitorId=visitor, sessionId=f"{visitor}-s",
                      url=f"{SHOP}/cart?step=coupon", userAgent=agent,
                      occurredAt=(now - timedelta(days=days_ago)).isoformat())
    await _report(dashboard, deps, visitorId=JONAS, sessionId=f"{JONAS}-s", source="php",
                  type="E_WARNING", message="Undefined index: shipping",
                  url=f"{SHOP}/checkout", userAgent=FIREFOX)
    await deps.queue.join()
    await deps.derivation.fold()


async def test_the_errors_list_filters_and_sorts_from_the_url_with_a_trend_per_error(
        page: Page, dashboard: Dashboard, deps, artifacts):
    await _seed(dashboard, deps)
    await sign_in(page, dashboard)
    await page.get_by_role("link", name="Errors").click()
    row = page.locator("#errors tbody tr", has_text=COUPON)
    await expect(row.locator("td").nth(1)).to_have_text("3")
    await expect(row.locator("td").nth(2)).to_have_text("2")
    trend = row.locator("svg.sparkline")
    assert (await trend.get_attribute("aria-label")).startswith("3 occurrences from")
    await assert_accessible(page, "the errors list")

    await page.get_by_label("Sort by").select_option("visitors")
    await page.wait_for_url("**/errors?sort=visitors")
    await expect(page.locator("#errors tbody tr").first).to_contain_text(COUPON)
    await page.get_by_label("Source").select_option("php")
    await page.wait_for_url("**/errors?source=php&sort=visitors")
    await expect(page.locator("#errors tbody tr")).to_have_count(1)
    await expect(page.locator("#errors")).to_contain_text("Undefined index: shipping")

    # A bookmarked view opens with its filters: a page path and a date range.
    week_ago = (datetime.now(UTC) - timedelta(days=3)).date().isoformat()
    await page.goto(dashboard.page_url(f"/errors?page=/cart&from={week_ago}"))
    await expect(page.get_by_label("Page path starts with")).to_have_value("/cart")
    await expect(page.get_by_label("From", exact=True)).to_have_value(week_ago)
    coupon = page.locator("#errors tbody tr", has_text=COUPON)
    await expect(coupon.locator("td").nth(1)).to_have_text("2")  # Jonas's is 5 days old
    await expect(coupon.locator("td").nth(2)).to_have_text("1")
    await expect(page.locator("#errors")).not_to_contain_text("shipping")
    await page.screenshot(path=artifacts("filtered.png"), full_page=True)
    await page.set_viewport_size({"width": 390, "height": 844})
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    await page.screenshot(path=artifacts("filtered-390px.png"), full_page=True)
    await page.get_by_label("Page path starts with").fill("/nowhere")
    await page.get_by_role("button", name="Apply").click()
    await expect(page.get_by_text("No errors match")).to_be_visible()
    assert "page=%2Fnowhere" in page.url


async def test_an_error_shows_who_was_hit_where_on_what_with_context_and_frames(
        page: Page, dashboard: Dashboard, deps, artifacts):
    await _seed(dashboard, deps)
    await sign_in(page, dashboard)
    await page.get_by_role("link", name="Errors").click()
    await page.get_by_role("link", name=COUPON).click()
    await expect(page.get_by_role("heading", name=re.compile(
        "3 occurrences, 2 visitors affected"))).to_be_visible()
    await expect(page.locator("figure.chart rect.bar-err")).to_have_count(30)
    visitors = page.locator("#affected-visitors li")
    await expect(visitors).to_have_count(2)
    await expect(visitors.first).to_contain_text("Demo visitor Mia Jensen")
    await expect(visitors.first).to_contain_text("2×")
    await expect(page.locator("#error-pages")).to_contain_text("/cart")
    await expect(page.locator("#error-pages")).to_contain_text("100% (3)")
    await expect(page.locator("#error-devices")).to_contain_text("mobile")
    await expect(page.locator("#error-devices")).to_contain_text("67% (2)")
    await expect(page.locator("#error-browsers")).to_contain_text("Firefox")
    await expect(page.locator("#error-systems")).to_contain_text("iOS")
    frames = page.locator("#stack-frames li")
    await expect(frames).to_have_count(2)
    await expect(frames.first).to_contain_text("applyCoupon")
    await expect(frames.first).to_contain_text("cart.js:88:13")
    latest = page.locator("#latest-occurrences li").first
    await expect(latest).to_contain_text("/cart?step=coupon")
    await latest.locator("summary").click()
    await expect(latest.locator("dl.facts")).to_contain_text("cart › coupon")
    await expect(latest.locator("dl.facts")).to_contain_text("SPRING")
    assert "{" not in await page.locator("main").inner_text()
    await assert_accessible(page, "an error's page")
    await page.screenshot(path=artifacts("detail.png"), full_page=True)
    await page.set_viewport_size({"width": 390, "height": 844})
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    await page.screenshot(path=artifacts("detail-390px.png"), full_page=True)
    await page.set_viewport_size({"width": 1280, "height": 860})

    await page.get_by_role("link", name="7 days").click()
    await expect(page.get_by_role("heading", name=re.compile(
        "3 occurrences, 2 visitors affected"))).to_be_visible()
    assert re.search(r"\?from=\d{4}-\d\d-\d\d&to=", page.url)
    await expect(page.locator("figure.chart rect.bar-err")).to_have_count(7)
    await visitors.get_by_role("link", name="Demo visitor Mia Jensen").click()
    await expect(page.locator("#visitor-name")).to_have_text("Demo visitor Mia Jensen")
