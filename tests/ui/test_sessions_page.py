"""The sessions page and saved segments (issue 41 point 5) in real Chromium: the owner finds the
sessions that ordered from a campaign, the filters kept in the address, saves them as a segment
and applies it on the recordings, visitors and funnels pages through their segment picker; the
list is a card per session on a 390 px phone and a table at 1280 px, clean under axe-core at both
widths."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from playwright.async_api import Page, expect

from tests.ui.accessibility import assert_accessible
from tests.ui.conftest import Dashboard, ingest, sign_in

PHONE = {"width": 390, "height": 844}
SHOP = "https://demo-shop.example"


async def _send(dashboard: Dashboard, path: str, body: dict) -> None:
    answer = await ingest(dashboard, path, body)
    assert answer.code == 200, answer


async def _sessions(dashboard: Dashboard, deps) -> None:
    """Beside the demo's own sessions: ui-spring landed from the spring campaign and paid 45.50
    EUR; ui-browser came from the same campaign and left from the cart without ordering."""
    at = (datetime.now(UTC) - timedelta(hours=2)).replace(microsecond=0)
    for visitor in ("ui-spring", "ui-browser"):
        await _send(dashboard, "/ingest/pageviews", {
            "visitorId": visitor, "sessionId": f"{visitor}-s", "occurredAt": at.isoformat(),
            "url": f"{SHOP}/?utm_source=newsletter&utm_campaign=spring"})
        await _send(dashboard, "/ingest/pageviews", {
            "visitorId": visitor, "sessionId": f"{visitor}-s", "url": f"{SHOP}/cart",
            "occurredAt": (at + timedelta(minutes=1)).isoformat()})
    await _send(dashboard, "/ingest/commerce", {
        "eventId": "ui-s-p", "type": "order_placed", "visitorId": "ui-spring",
        "sessionId": "ui-spring-s", "orderId": "ui-s", "total": "45.50", "currency": "EUR",
        "occurredAt": (at + timedelta(minutes=2)).isoformat()})
    await _send(dashboard, "/ingest/commerce", {
        "eventId": "ui-s-paid", "type": "order_paid", "orderId": "ui-s",
        "occurredAt": (at + timedelta(minutes=3)).isoformat()})
    await deps.derivation.fold()


async def test_the_owner_finds_sessions_by_outcome_saves_a_segment_and_reuses_it(
        page: Page, dashboard: Dashboard, deps, artifacts):
    await _sessions(dashboard, deps)
    await sign_in(page, dashboard)
    await page.get_by_role("link", name="Sessions", exact=True).click()
    table = page.locator("#sessions")
    await expect(table.locator('tr[data-session-id="ui-spring-s"]')).to_be_visible()
    await assert_accessible(page, "the sessions page at 1280 px")

    # A choice applies at once; typed values with the button; all of them kept in the address.
    await page.get_by_label("Ordered").select_option("true")
    await expect(page).to_have_url(f"{dashboard.page_url('/sessions')}?converted=true")
    await page.get_by_label("UTM campaign").fill("spring")
    await page.get_by_role("button", name="Apply").click()
    await expect(table.locator("tbody tr")).to_have_count(1)
    spring = table.locator('tr[data-session-id="ui-spring-s"]')
    written = await page.evaluate(
        "() => new Intl.NumberFormat(navigator.language, {style: 'currency', currency: 'EUR'})"
        ".format(45.5)")
    await expect(spring).to_contain_text(written)
    await expect(spring).to_contain_text("/ → /cart")
    assert "utmCampaign=spring" in page.url and "converted=true" in page.url

    await page.get_by_label("Segment name").fill("Spring buyers")
    await page.get_by_role("button", name="Save as segment").click()
    await expect(page.locator("#segment-panel")).to_contain_text("Spring buyers")
    assert "segment=" in page.url and "utmCampaign" not in page.url
    await expect(table.locator("tbody tr")).to_have_count(1)
    await expect(page.get_by_label("Segment")).to_have_value(page.url.split("segment=")[1])
    await page.screenshot(path=artifacts("sessions-segment-1280.png"), full_page=True)

    # The same segment on the visitors, recordings and funnels pages.
    await page.get_by_role("link", name="Its visitors").click()
    visitors = page.locator("#visitors tbody tr")
    await expect(visitors).to_have_count(1)
    await expect(page.locator('tr[data-visitor-id="ui-spring"]')).to_be_visible()
    await page.get_by_role("link", name="Recordings", exact=True).click()
    await page.get_by_label("Segment").select_option(label="Spring buyers")
    await expect(page).to_have_url(re.compile(r"segment="))
    await page.get_by_role("link", name="Funnels", exact=True).click()
    await page.get_by_label("Segment").select_option(label="Spring buyers")
    await expect(page.locator("main")).to_contain_text("Funnel: Shop")
    assert "segment=" in page.url

    await page.set_viewport_size(PHONE)
    await page.goto(dashboard.page_url("/sessions"))
    await expect(table.locator('tr[data-session-id="ui-browser-s"]')).to_be_visible()
    # A card of labelled lines that fits the screen: nothing scrolls sideways.
    assert await page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert await table.evaluate("t => t.getBoundingClientRect().right") <= PHONE["width"]
    await assert_accessible(page, "the sessions page at 390 px")
    await page.get_by_label("Segment").select_option(label="Spring buyers")
    await expect(table.locator("tbody tr")).to_have_count(1)
    await assert_accessible(page, "a segment on the sessions page at 390 px")
    await page.screenshot(path=artifacts("sessions-segment-390.png"), full_page=True)
