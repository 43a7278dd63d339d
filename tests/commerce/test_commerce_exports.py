"""A visitor's carts and orders in the access export and gone with erasure; order value and
currency in the CSV exports (issue 31 point 6)."""

from __future__ import annotations

import csv
import io

from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest


async def _shop(ingest: Ingest) -> None:
    await ingest("commerce", {"eventId": "c1", "type": "add_to_cart", "visitorId": "ada",
                              "sessionId": "s1", "productId": 42, "quantity": 2,
                              "price": "9.99", "currency": "EUR"})
    await ingest("commerce", {"eventId": "o1", "type": "order_placed", "visitorId": "ada",
                              "sessionId": "s1", "orderId": "1001", "total": "19.98",
                              "currency": "EUR"})
    await ingest("commerce", {"eventId": "o2", "type": "order_paid", "orderId": "1001"})
    await ingest("commerce", {"eventId": "o3", "type": "order_refunded", "orderId": "1001",
                              "amount": "4.99", "currency": "EUR"})
    await ingest("commerce", {"eventId": "k1", "type": "order_placed", "visitorId": "ken",
                              "orderId": "2001", "total": 1200, "currency": "JPY"})


async def test_the_access_export_holds_the_visitors_cart_and_orders(
        fetch: Fetch, tenant: Tenant, ingest: Ingest):
    await _shop(ingest)
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/ada/export.json",
                         token=tenant.token)
    assert answer.code == 200, answer
    export = answer.json()
    assert [(e["type"], e.get("price"), e.get("total"), e.get("amount"))
            for e in export["commerceEvents"]] == [
        ("add_to_cart", "9.99", None, None), ("order_placed", None, "19.98", None),
        ("order_paid", None, None, None), ("order_refunded", None, None, "4.99")]
    assert export["orders"] == [{
        "orderId": "1001", "status": "paid", "placedAt": export["orders"][0]["placedAt"],
        "paidAt": export["orders"][0]["paidAt"], "currency": "EUR", "total": "19.98",
        "refunded": "4.99", "sessionId": "s1"}]
    assert "2001" not in answer.body.decode()  # ken's order is ken's


async def test_the_orders_csv_has_value_and_currency_and_leads_their_cart(
        fetch: Fetch, tenant: Tenant, ingest: Ingest):
    await _shop(ingest)
    await ingest("leads", {"visitorId": "ada", "leadId": "l1", "email": "ada@example.com",
                           "kind": "checkout", "orderCompleted": True,
                           "cart": {"total": 19.98, "currency": "EUR", "items": []}})
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/orders.csv", token=tenant.token)
    assert answer.code == 200, answer
    rows = list(csv.DictReader(io.StringIO(answer.body.decode())))
    by_id = {row["orderId"]: row for row in rows}
    assert {key: by_id["1001"][key] for key in (
        "status", "currency", "total", "refunded", "netRevenue")} == {
        "status": "paid", "currency": "EUR", "total": "19.98", "refunded": "4.99",
        "netRevenue": "14.99"}
    # Placed, not paid: no revenue; yen have no decimals.
    assert {key: by_id["2001"][key] for key in ("status", "currency", "total", "netRevenue")} \
        == {"status": "placed", "currency": "JPY", "total": "1200", "netRevenue": "0"}
    leads = list(csv.DictReader(io.StringIO((await fetch(
        f"/api/v1/sites/{tenant.site_id}/leads.csv", token=tenant.token)).body.decode())))
    assert (leads[0]["cartTotal"], leads[0]["cartCurrency"]) == ("19.98", "EUR")
