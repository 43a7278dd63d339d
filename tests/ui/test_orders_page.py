"""The orders page and the visitor's orders (issue 41 point 1) in real Chromium: the owner
filters orders in the URL, reads each one's value with its currency, source and journey, follows
it to the visitor, whose page lists the orders too; the list is a card per order on a 390 px
phone and a table at 1280 px, clean under axe-core at both widths."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from playwright.async_api import Page, expect

from tests.ui.accessibility import assert_accessible
from tests.ui.conftest import Dashboard, ingest, sign_in

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 860}
SHOP = "https://demo-shop.example"


async def _send(dashboard: Dashboard, path: str, body: dict) -> None:
    answer = await ingest(dashboard, path, body)
    assert answer.code == 200, answer


async def _orders(dashboard: Dashboard, deps) -> None:
    """Beside the demo's own order (demo-1001, 24.90 EUR, paid): ui-2, 45.50 EUR from a Google
    visit, paid and refunded 5.50; ui-3, 12.00 USD, placed only, of a visit with no referrer."""
    at = (datetime.now(UTC) - timedelta(hours=2)).replace(microsecond=0)
    for visitor, referrer in (("ui-buyer", "https://www.google.com/"), ("ui-buyer-2", None)):
        view = {"visitorId": visitor, "sessionId": f"{visitor}-s", "url": f"{SHOP}/cart",
                "occurredAt": at.isoformat()}
        if referrer:
            view["referrer"] = referrer
        await _send(dashboard, "/ingest/pageviews", view)
    await _send(dashboard, "/ingest/commerce", {
        "eventId": "ui-2-p", "type": "order_placed", "visitorId": "ui-buyer",
        "sessionId": "ui-buyer-s", "orderId": "ui-2", "total": "45.50", "currency": "EUR",
        "occurredAt": (at + timedelta(minutes=1)).isoformat()})
    await _send(dashboard, "/ingest/commerce", {
        "eventId": "ui-2-paid", "type": "order_paid", "orderId": "ui-2",
        "occurredAt": (at + timedelta(minutes=2)).isoformat()})
    await _send(dashboard, "/ingest/commerce", {
        "eventId": "ui-2-r", "type": "order_refunded", "orderId": "ui-2", "amount": "5.50",
        "currency": "EUR", "occurredAt": (at + timedelta(minutes=3)).isoformat()})
    await _send(dashboard, "/ingest/commerce", {
        "eventId": "ui-3-p", "type": "order_placed", "visitorId": "ui-buyer-2",
        "sessionId": "ui-buyer-2-s", "orderId": "ui-3", "total": "12", "currency": "USD",
        "occurredAt": (at + timedelta(minutes=4)).isoformat()})
    await deps.derivation.fold()


async def test_the_owner_filters_orders_and_follows_one_to_its_visitor_on_a_phone_and_a_desktop(
        page: Page, dashboard: Dashboard, deps):
    await _orders(dashboard, deps)
    await sign_in(page, dashboard)
    await page.get_by_role("link", name="Orders", exact=True).click()
    table = page.locator("#orders")
    await expect(table.locator("tbody tr")).to_have_count(3)
    # Newest placing first: ui-3, ui-2, then the demo's order of two days ago.
    await expect(table.locator("tbody tr td:first-child strong")).to_have_text(
        ["ui-3", "ui-2", "demo-1001"])
    # Amounts as this browser's Intl writes money in its language (issue 41 point 8).
    written = await page.evaluate(
        "() => [[40, 'EUR'], [45.5, 'EUR'], [12, 'USD']].map(([amount, currency]) => "
        "new Intl.NumberFormat(navigator.language, {style: 'currency', currency}).format(amount))")
    ui2 = table.locator('tr[data-order-id="ui-2"]')
    await expect(ui2).to_contain_text(written[0])
    await expect(ui2).to_contain_text(f"of {written[1]}")
    await expect(ui2).to_contain_text("google.com")
    await expect(ui2).to_contain_text("/cart · 1 page")
    await expect(table.locator('tr[data-order-id="ui-3"]')).to_contain_text(written[2])
    await assert_accessible(page, "the orders page at 1280 px")

    # A choice applies at once and is kept in the address.
    await page.get_by_label("Status").select_option("paid")
    await expect(page).to_have_url(f"{dashboard.page_url('/orders')}?status=paid")
    await expect(table.locator("tbody tr td:first-child strong")).to_have_text(
        ["ui-2", "demo-1001"])
    await page.get_by_label("Currency").fill("EUR")
    await page.get_by_label("Net value from").fill("30")
    await page.get_by_role("button", name="Apply").click()
    await expect(table.locator("tbody tr td:first-child strong")).to_have_text(["ui-2"])
    assert "minNet=30" in page.url and "currency=EUR" in page.url

    await page.set_viewport_size(PHONE)
    await page.goto(dashboard.page_url("/orders"))
    await expect(table.locator("tbody tr")).to_have_count(3)
    # A card of labelled lines that fits the screen: nothing scrolls sideways.
    assert await page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert await table.evaluate("t => t.getBoundingClientRect().right") <= PHONE["width"]
    await assert_accessible(page, "the orders page at 390 px")

    await page.get_by_role("link", name="Visitor of order ui-2").click()
    orders = page.locator("#visitor-orders")
    await expect(orders.locator("tbody tr")).to_have_count(1)
    await expect(orders).to_contain_text(written[0])
    await expect(page.locator("#orders-title")).to_have_text("Orders (1)")
