"""The later steps of an order (issue 38 point 5): a refund is in its order's currency, a step
names no other visitor than its order's, and the steps of an order whose placing was dropped,
or whose visitor was erased, are dropped for the same reason and counted in /metrics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tests.support.app import Fetch, Tenant
from tests.support.commerce import orders_csv, send
from tests.support.ingest import Ingest

SHOP = "https://shop.example"


def _ago(hours: int) -> str:
    return (datetime.now(UTC) - timedelta(hours=hours)).isoformat()


def _placed(order: str, total: str, currency: str, **extra: Any) -> dict[str, Any]:
    return {"eventId": f"{order}-placed", "type": "order_placed", "orderId": order,
            "total": total, "currency": currency, "occurredAt": _ago(5), **extra}


def _step(order: str, kind: str, hours_ago: int, **extra: Any) -> dict[str, Any]:
    return {"eventId": f"{order}-{kind}-{hours_ago}", "type": kind, "orderId": order,
            "occurredAt": _ago(hours_ago), **extra}


def _shown(row: dict[str, str]) -> tuple[str, ...]:
    return row["status"], row["currency"], row["total"], row["refunded"], row["netRevenue"]


async def test_a_refund_in_another_currency_than_its_orders_is_refused(
        fetch: Fetch, tenant: Tenant, ingest: Ingest):
    await ingest("commerce", _placed("1001", "59.90", "EUR", visitorId="ada"))
    await ingest("commerce", _step("1001", "order_paid", 4))
    # 5,990 yen is not 59.90 euros: taken off unconverted it zeroed the order.
    answer = await send(fetch, tenant, _step("1001", "order_refunded", 3, amount="5990",
                                             currency="JPY"))
    assert answer.code == 422, answer
    assert answer.json()["error"]["field"] == "currency"
    assert "EUR" in answer.json()["error"]["message"]
    assert _shown((await orders_csv(fetch, tenant))["1001"]) == (
        "paid", "EUR", "59.90", "0.00", "59.90")
    await ingest("commerce", _step("1001", "order_refunded", 2, amount="10.00", currency="EUR"))
    # 59.90 - 10.00 = 49.90.
    assert _shown((await orders_csv(fetch, tenant))["1001"]) == (
        "paid", "EUR", "59.90", "10.00", "49.90")


async def test_a_refund_in_another_currency_that_came_before_its_order_is_not_taken_off(
        fetch: Fetch, tenant: Tenant, ingest: Ingest):
    # The shop's clock or its retries can bring the refund first; nothing says it is wrong yet.
    await ingest("commerce", _step("2002", "order_refunded", 3, amount="5990", currency="JPY"))
    await ingest("commerce", _placed("2002", "59.90", "EUR", visitorId="ada"))
    await ingest("commerce", _step("2002", "order_paid", 4))
    assert _shown((await orders_csv(fetch, tenant))["2002"]) == (
        "paid", "EUR", "59.90", "0.00", "59.90")


async def test_a_step_naming_another_visitor_than_its_orders_is_refused(
        fetch: Fetch, tenant: Tenant, ingest: Ingest):
    await ingest("pageviews", {"visitorId": "ada", "url": f"{SHOP}/"})
    await ingest("commerce", _placed("3003", "20.00", "EUR", visitorId="ada"))
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/ada/restriction", "PUT",
                         json_body={"on": True}, token=tenant.token)
    assert answer.code == 200, answer
    # Naming ben carried ada's order past her restriction and made it paid.
    answer = await send(fetch, tenant, _step("3003", "order_paid", 4, visitorId="ben"))
    assert answer.code == 422, answer
    assert answer.json()["error"]["field"] == "visitorId"
    assert "ben" not in answer.body.decode() and "ada" not in answer.body.decode()
    # Without a visitor the step is ada's, and held with her.
    assert (await ingest("commerce", _step("3003", "order_paid", 4)))["dropped"] == "restricted"
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/ada/restriction", "PUT",
                         json_body={"on": False}, token=tenant.token)
    assert answer.code == 200, answer
    assert _shown((await orders_csv(fetch, tenant))["3003"]) == (
        "placed", "EUR", "20.00", "0.00", "0.00")
    # Her own name is hers: the payment counts once the restriction is lifted.
    await ingest("commerce", _step("3003", "order_paid", 3, visitorId="ada"))
    assert _shown((await orders_csv(fetch, tenant))["3003"]) == (
        "paid", "EUR", "20.00", "0.00", "20.00")
