"""Which money the service accepts (issue 38 points 1 and 5): ISO 4217 codes only, each with
the decimals of its ISO 4217 minor unit, and no amount above the documented per-order maximum
(`commerce.MAX_ORDER_MINOR`); anything else is a 422 naming the field, and nothing is stored."""

from __future__ import annotations

from typing import Any

import pytest

from documents import commerce
from tests.support.app import Fetch, Tenant
from tests.support.commerce import orders_csv, send


@pytest.mark.parametrize("body", [
    {"type": "order_placed", "orderId": "1", "total": "59.90", "currency": "QQQ"},
    {"type": "order_placed", "orderId": "1", "total": "59.90", "currency": "XYZ"},
    {"type": "order_refunded", "orderId": "1", "amount": "5", "currency": "QQQ"},
    {"type": "order_paid", "orderId": "1", "currency": "QQQ"},
    {"type": "add_to_cart", "visitorId": "ada", "productId": "7", "price": "1",
     "currency": "QQQ"},
    # ISO lists gold and the special drawing right with no minor unit: no amount is kept in them.
    {"type": "order_placed", "orderId": "1", "total": "1", "currency": "XAU"},
    {"type": "order_placed", "orderId": "1", "total": "1", "currency": "XDR"},
], ids=["placed", "placed-xyz", "refund", "paid-without-amount", "cart", "gold", "sdr"])
async def test_a_code_that_is_no_iso_4217_currency_with_a_minor_unit_is_refused_naming_it(
        fetch: Fetch, tenant: Tenant, body: dict[str, Any]):
    answer = await send(fetch, tenant, {"eventId": "e1", **body})
    assert answer.code == 422, answer
    assert answer.json()["error"]["field"] == "currency"
    assert body["currency"] in answer.json()["error"]["message"]
    assert await orders_csv(fetch, tenant) == {}


async def test_each_currency_keeps_the_decimals_of_its_iso_4217_minor_unit(
        fetch: Fetch, tenant: Tenant, deps):
    # The forint has two decimals in ISO 4217, as WooCommerce sends it (CLDR shows none, as no
    # fillér coin circulates): "1499.50" is 149950 minor units, as the service always stored it.
    for order, total, currency in (("b1", "12.345", "BHD"), ("j1", "5990", "JPY"),
                                   ("e1", "59.90", "EUR"), ("h1", "1499.50", "HUF"),
                                   ("k1", "7.125", "KWD")):
        answer = await send(fetch, tenant, {"eventId": order, "type": "order_placed",
                                            "visitorId": "ada", "orderId": order,
                                            "total": total, "currency": currency})
        assert answer.code == 200, answer
    shown = {order: (row["currency"], row["total"])
             for order, row in (await orders_csv(fetch, tenant)).items()}
    assert shown == {"b1": ("BHD", "12.345"), "j1": ("JPY", "5990"), "e1": ("EUR", "59.90"),
                     "h1": ("HUF", "1499.50"), "k1": ("KWD", "7.125")}
    # Stored in ISO minor units, as orders were before: those stored then read the same.
    stored = {order["orderId"]: order["total"] async for order in
              deps.store.collection(commerce.ORDERS).find({"siteId": tenant.site_id})}
    assert stored == {"b1": 12345, "j1": 5990, "e1": 5990, "h1": 149950, "k1": 7125}
    # One decimal more than the currency has is refused, not rounded.
    for total, currency in (("12.3456", "BHD"), ("5990.5", "JPY"), ("59.901", "EUR"),
                            ("1499.505", "HUF"), ("7.1255", "KWD")):
        answer = await send(fetch, tenant, {"eventId": "x", "type": "order_placed",
                                            "orderId": "x", "total": total,
                                            "currency": currency})
        assert answer.code == 422, answer
        assert answer.json()["error"]["field"] == "total"
    assert set(await orders_csv(fetch, tenant)) == {"b1", "j1", "e1", "h1", "k1"}


async def test_an_order_holds_at_most_ten_billion_euros_or_a_trillion_yen(
        fetch: Fetch, tenant: Tenant):
    # 10**12 minor units: 10,000,000,000.00 EUR and 1,000,000,000,000 JPY are the most.
    for order, total, currency in (("big-eur", "10000000000.00", "EUR"),
                                   ("big-jpy", 1000000000000, "JPY")):
        answer = await send(fetch, tenant, {"eventId": order, "type": "order_placed",
                                            "visitorId": "ada", "orderId": order,
                                            "total": total, "currency": currency})
        assert answer.code == 200, answer
    for body, field, most in (
            ({"type": "order_placed", "orderId": "o1", "total": "10000000000.01",
              "currency": "EUR"}, "total", "10000000000.00 EUR"),
            ({"type": "order_placed", "orderId": "o2", "total": 1000000000001,
              "currency": "JPY"}, "total", "1000000000000 JPY"),
            ({"type": "order_placed", "orderId": "o3", "total": 1e300,
              "currency": "EUR"}, "total", "10000000000.00 EUR"),
            ({"type": "order_refunded", "orderId": "big-eur", "amount": "99999999999",
              "currency": "EUR"}, "amount", "10000000000.00 EUR"),
            ({"type": "add_to_cart", "visitorId": "ada", "productId": "7",
              "price": "10000000000.5", "currency": "EUR"}, "price", "10000000000.00 EUR")):
        answer = await send(fetch, tenant, {"eventId": "too-much", **body})
        assert answer.code == 422, (body, answer)
        assert answer.json()["error"]["field"] == field
        assert most in answer.json()["error"]["message"]
    rows = await orders_csv(fetch, tenant)
    assert {order: (row["total"], row["refunded"]) for order, row in rows.items()} == {
        "big-eur": ("10000000000.00", "0.00"), "big-jpy": ("1000000000000", "0")}


async def test_the_reporting_currency_is_an_iso_4217_code_too(fetch: Fetch, tenant: Tenant):
    for refused in ("QQQ", "XAU"):
        answer = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH",
                             json_body={"settings": {"reportingCurrency": refused}},
                             token=tenant.token)
        assert answer.code == 422, answer
        assert answer.json()["error"]["field"] == "settings.reportingCurrency"
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH",
                         json_body={"settings": {"reportingCurrency": "JPY"}},
                         token=tenant.token)
    assert answer.code == 200, answer
    assert answer.json()["settings"]["reportingCurrency"] == "JPY"
