"""The later steps of an order (issue 38 point 5): a refund is in its order's currency, a step
names no other visitor than its order's, and the steps of an order whose placing was dropped,
or whose visitor was erased, are dropped for the same reason and counted in /metrics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support.app import Fetch, Tenant
from tests.support.commerce import commerce_drops, orders_csv, send
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


async def _hold(fetch: Fetch, tenant: Tenant, visitor: str, switch: str, on: bool) -> None:
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/{visitor}/{switch}", "PUT",
                         json_body={"on": on}, token=tenant.token)
    assert answer.code == 200, answer


async def _paid_orders_this_week(fetch: Fetch, tenant: Tenant) -> int:
    today = datetime.now(UTC).date()
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/overview?from="
                         f"{(today - timedelta(days=6)).isoformat()}&to={today.isoformat()}",
                         token=tenant.token)
    assert answer.code == 200, answer
    return answer.json()["commerce"]["figures"]["orders"]["value"]


@pytest.mark.parametrize("reason", ["gpc", "restricted", "objected"])
async def test_the_later_steps_of_an_order_whose_placing_was_dropped_are_dropped_alike(
        fetch: Fetch, tenant: Tenant, ingest: Ingest, reason: str):
    await ingest("pageviews", {"visitorId": "ada", "url": f"{SHOP}/"})
    if reason != "gpc":
        await _hold(fetch, tenant, "ada", "restriction" if reason == "restricted"
                    else "objection", True)
    placed = _placed("4004", "59.90", "EUR", visitorId="ada", gpc=reason == "gpc")
    assert (await ingest("commerce", placed))["dropped"] == reason
    # The payment provider and the back office do not know the visitor; they were stored as
    # a paid order of nobody, with no amount.
    for step in (_step("4004", "order_paid", 4),
                 _step("4004", "order_refunded", 3, amount="5.00", currency="EUR")):
        assert (await ingest("commerce", step))["dropped"] == reason
    if reason != "gpc":
        # Lifting the hold later does not bring back an order placed while it held.
        await _hold(fetch, tenant, "ada", "restriction" if reason == "restricted"
                    else "objection", False)
        assert (await ingest("commerce", _step("4004", "order_paid", 2)))["dropped"] == reason
    assert "4004" not in await orders_csv(fetch, tenant)
    # The placing and each later step: 1 + 2, and 1 more once the hold was lifted.
    assert await commerce_drops(fetch, reason) == (3 if reason == "gpc" else 4)


async def test_steps_that_came_before_a_dropped_placing_go_with_it(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest):
    # The payment, with the total, arrives before the placing that the visitor's GPC drops.
    await ingest("commerce", _step("5005", "order_paid", 4, total="30.00", currency="EUR"))
    await deps.derivation.fold()
    assert await _paid_orders_this_week(fetch, tenant) == 1
    assert (await orders_csv(fetch, tenant))["5005"]["status"] == "paid"
    placed = _placed("5005", "30.00", "EUR", visitorId="ada", gpc=True)
    assert (await ingest("commerce", placed))["dropped"] == "gpc"
    await deps.derivation.fold()
    assert await _paid_orders_this_week(fetch, tenant) == 0
    assert "5005" not in await orders_csv(fetch, tenant)
    assert (await ingest("commerce", _step("5005", "order_refunded", 2, amount="30.00",
                                           currency="EUR")))["dropped"] == "gpc"
    # The placing and the refund; the payment was stored when it came.
    assert await commerce_drops(fetch, "gpc") == 2


async def test_a_dropped_placing_of_an_order_already_placed_leaves_it_as_it_is(
        fetch: Fetch, tenant: Tenant, ingest: Ingest):
    await ingest("commerce", _placed("6006", "12.00", "EUR", visitorId="ada"))
    again = {**_placed("6006", "12.00", "EUR", visitorId="ada", gpc=True), "eventId": "again"}
    assert (await ingest("commerce", again))["dropped"] == "gpc"
    await ingest("commerce", _step("6006", "order_paid", 4))
    assert _shown((await orders_csv(fetch, tenant))["6006"]) == (
        "paid", "EUR", "12.00", "0.00", "12.00")


async def test_erasure_removes_every_event_of_the_visitors_orders_and_drops_late_steps(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest):
    await ingest("pageviews", {"visitorId": "ada", "url": f"{SHOP}/"})
    await ingest("commerce", _placed("7007", "59.90", "EUR", visitorId="ada"))
    # An event that named another visitor, as the service took before issue 38.
    await deps.store.collection("commerce_events").insert_one({
        "_id": f"{tenant.site_id}:old-paid", "siteId": tenant.site_id, "eventId": "old-paid",
        "type": "order_paid", "orderId": "7007", "visitorId": "ben",
        "occurredAt": datetime.now(UTC), "recordedAt": datetime.now(UTC)})
    await ingest("commerce", _placed("8008", "10.00", "EUR", visitorId="ben"))
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/ada/data", "DELETE",
                         token=tenant.token)
    assert answer.code == 200, answer
    # ada's placing and the event naming ben: 2 events of her order.
    assert answer.json()["counts"]["commerceEvents"] == 2
    assert answer.json()["counts"]["orders"] == 1
    # A late payment used to bring the order back, as paid by nobody.
    assert (await ingest("commerce", _step("7007", "order_paid", 2)))["dropped"] == "erased"
    assert (await ingest("commerce", _step("7007", "order_refunded", 1, amount="1.00",
                                           currency="EUR")))["dropped"] == "erased"
    assert set(await orders_csv(fetch, tenant)) == {"8008"}
    assert await commerce_drops(fetch, "erased") == 2
    export = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/ben/export.json",
                         token=tenant.token)
    assert [event["type"] for event in export.json()["commerceEvents"]] == ["order_placed"]
