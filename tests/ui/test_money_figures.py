"""The overview's money figures as the owner sees them (issue 31 point 2): orders, conversion
rate, revenue, average order value and revenue per visitor from the shop's paid orders in the
reporting currency, another currency said apart with its own orders, nothing else added;
amounts and percentages written the browser's way (issue 41 point 8); clean under axe-core."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime, timedelta

from playwright.async_api import Page, expect

from tests.ui.accessibility import assert_accessible
from tests.ui.conftest import Dashboard, downloaded_text, ingest, sign_in


async def _send(dashboard: Dashboard, body: dict) -> None:
    answer = await ingest(dashboard, "/ingest/commerce", body)
    assert answer.code == 200, answer


async def test_the_overview_shows_revenue_from_paid_orders_and_other_currencies_apart(
        page: Page, dashboard: Dashboard, deps, artifacts):
    yesterday = (datetime.now(UTC) - timedelta(days=1)).replace(hour=9).isoformat()
    for visitor, order, total, currency in (("buyer-1", "m1", "25.50", "EUR"),
                                           ("buyer-2", "m2", "10.00", "EUR"),
                                           ("buyer-3", "m3", "7", "USD")):
        await _send(dashboard, {"eventId": f"{order}-p", "type": "order_placed",
                                "visitorId": visitor, "orderId": order,
                                "total": total,
                                "currency": currency, "occurredAt": yesterday})
    await _send(dashboard, {"eventId": "m1-paid", "type": "order_paid", "orderId": "m1",
                            "occurredAt": yesterday})
    await _send(dashboard, {"eventId": "m3-paid", "type": "order_paid", "orderId": "m3",
                            "occurredAt": yesterday})
    # m2's payment fails: never counted.
    await _send(dashboard, {"eventId": "m2-failed", "type": "order_failed", "orderId": "m2",
                            "occurredAt": yesterday})
    # 30 more visitors who buy nothing: the conversion falls under 10 %.
    for n in range(30):
        answer = await ingest(dashboard, "/ingest/pageviews", {
            "visitorId": f"browser-{n}", "url": "https://shop.example/", "occurredAt": yesterday})
        assert answer.code == 200, answer
    await deps.derivation.fold()
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url())
    figures = page.locator("#money-figures")
    await expect(figures).to_be_visible()

    async def written(amount: float, currency: str) -> str:
        """The amount as this browser's Intl writes it in its own language."""
        return await page.evaluate(
            "([amount, currency]) => new Intl.NumberFormat(navigator.language, "
            "{style: 'currency', currency}).format(amount)", [amount, currency])

    # The demo shop's own order (24.90 EUR, paid two days ago) and m1 (25.50 EUR) in the
    # reporting currency, the demo's: 50.40 EUR over 2 EUR orders, 25.20 each; m3 (USD) is
    # counted apart, with its own order count, neither in the orders nor in the revenue.
    await expect(figures.locator('[data-figure="revenue"] .figure-value')).to_have_text(
        await written(50.40, "EUR"))
    await expect(figures.locator('[data-figure="averageOrderValue"] .figure-value')
                 ).to_have_text(await written(25.20, "EUR"))
    await expect(figures.locator('[data-figure="orders"] .figure-value')).to_have_text("2")
    await expect(page.locator("#other-currencies")).to_contain_text(
        f"1 order in USD, {await written(7, 'USD')}")
    # 2 orders over 30-odd visitors: under 10 %, so one decimal, rounded once by Intl.
    visitors = int(re.sub(r"\D", "", await page.locator(
        '[data-figure="visitors"] .figure-value').inner_text()))
    assert 2 / visitors < 0.095
    conversion = await page.evaluate(
        "(ratio) => new Intl.NumberFormat(navigator.language, {style: 'percent', "
        "minimumFractionDigits: 1, maximumFractionDigits: 1}).format(ratio)", 2 / visitors)
    await expect(figures.locator('[data-figure="conversionRate"] .figure-value')
                 ).to_have_text(conversion)
    assert re.fullmatch(r"\d[.,]\d\s?%", conversion), conversion
    await page.screenshot(path=artifacts("money-figures.png"), full_page=True)
    await assert_accessible(page, "the overview with money figures")


async def test_the_orders_csv_is_downloaded_from_privacy_and_exports_with_value_and_currency(
        page: Page, dashboard: Dashboard):
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url("/privacy"))
    async with page.expect_download() as started:
        await page.get_by_role("button", name="Download orders.csv").click()
    download = await started.value
    rows = list(csv.DictReader(io.StringIO(await downloaded_text(download))))
    # The demo shop's order: 2 x 12.45 EUR, paid.
    assert [(row["orderId"], row["status"], row["total"], row["currency"], row["netRevenue"])
            for row in rows] == [("demo-1001", "paid", "24.90", "EUR", "24.90")]
    await assert_accessible(page, "privacy and exports")


async def test_the_reporting_currency_is_chosen_in_settings(page: Page, dashboard: Dashboard,
                                                            deps):
    yesterday = (datetime.now(UTC) - timedelta(days=1)).replace(hour=9).isoformat()
    await _send(dashboard, {"eventId": "u-p", "type": "order_placed", "visitorId": "buyer-u",
                            "orderId": "u1", "total": "9.5", "currency": "USD",
                            "occurredAt": yesterday})
    await _send(dashboard, {"eventId": "u-paid", "type": "order_paid", "orderId": "u1",
                            "occurredAt": yesterday})
    await deps.derivation.fold()
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url("/settings"))
    await page.get_by_label("Reporting currency").fill("usd")
    await page.get_by_role("button", name="Save settings").click()
    await expect(page.get_by_text("Settings saved.")).to_be_visible()
    await page.goto(dashboard.page_url())
    written = await page.evaluate(
        "() => [[9.5, 'USD'], [24.9, 'EUR']].map(([amount, currency]) => new Intl.NumberFormat("
        "navigator.language, {style: 'currency', currency}).format(amount))")
    await expect(page.locator('#money-figures [data-figure="revenue"] .figure-value')
                 ).to_have_text(written[0])
    await expect(page.locator("#other-currencies")).to_contain_text(
        f"1 order in EUR, {written[1]}")
    await assert_accessible(page, "the overview in the chosen currency")
