"""Commerce events from the shop's server (`POST /ingest/commerce`, documents/commerce.py):
stored once, refused whole when wrong, summed up into orders whatever order they arrive in,
and only paid orders count, on the day they were paid, less refunds."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from derived import daily_figures, derivation
from documents import commerce
from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest


def _today() -> date:
    return datetime.now(UTC).date()


def _at(day: date, hour: int = 10) -> str:
    return datetime(day.year, day.month, day.day, hour, tzinfo=UTC).isoformat()


async def _money(store, site_id: str) -> dict[str, dict[str, dict[str, int]]]:
    """The daily money figures, slots summed: {day: {"orders"|"revenue": {currency: n}}}."""
    days: dict[str, dict[str, dict[str, int]]] = {}
    async for doc in store.collection(daily_figures.SITE_DAYS).find({"siteId": site_id}):
        for name in ("orders", "revenue"):
            for currency, amount in (doc.get(name) or {}).items():
                figures = days.setdefault(doc["day"], {}).setdefault(name, {})
                figures[currency] = figures.get(currency, 0) + amount
    return {day: {name: {c: n for c, n in amounts.items() if n}
                  for name, amounts in figures.items() if any(amounts.values())}
            for day, figures in sorted(days.items()) if any(
                any(amounts.values()) for amounts in figures.values())}


async def test_a_paid_order_counts_on_its_day_and_a_refund_takes_its_amount_back(
        tenant: Tenant, deps, ingest: Ingest):
    day = _today() - timedelta(days=1)
    await ingest("commerce", {"eventId": "e1", "type": "add_to_cart", "visitorId": "ada",
                              "sessionId": "s1", "productId": "42", "quantity": 2,
                              "price": "9.99", "currency": "EUR", "occurredAt": _at(day, 9)})
    await ingest("commerce", {"eventId": "e2", "type": "checkout_started", "visitorId": "ada",
                              "sessionId": "s1", "occurredAt": _at(day, 9)})
    await ingest("commerce", {"eventId": "e3", "type": "order_placed", "visitorId": "ada",
                              "sessionId": "s1", "orderId": "1001", "total": "19.98",
                              "currency": "EUR", "occurredAt": _at(day, 10)})
    await deps.derivation.fold()
    assert await _money(deps.store, tenant.site_id) == {}  # placed, not paid: nothing yet
    # Paid later, without the visitor at hand (a payment provider's callback).
    await ingest("commerce", {"eventId": "e4", "type": "order_paid", "orderId": "1001",
                              "occurredAt": _at(day, 11)})
    await ingest("commerce", {"eventId": "e5", "type": "order_refunded", "orderId": "1001",
                              "amount": 5, "currency": "EUR", "occurredAt": _at(_today(), 8)})
    await deps.derivation.fold()
    # 19.98 - 5.00 = 14.98, on the day of payment.
    assert await _money(deps.store, tenant.site_id) == {
        day.isoformat(): {"orders": {"EUR": 1}, "revenue": {"EUR": 1498}}}
    order = await deps.store.collection(commerce.ORDERS).find_one({"orderId": "1001"})
    assert (order["visitorId"], order["status"], order["total"], order["refunded"]) == (
        "ada", "paid", 1998, 500)
    events = deps.store.collection(commerce.EVENTS).find({"siteId": tenant.site_id})
    assert {event["visitorId"] async for event in events} == {"ada"}


async def test_an_event_sent_twice_is_stored_and_counted_once(
        tenant: Tenant, deps, ingest: Ingest):
    placed = {"eventId": "p", "type": "order_placed", "visitorId": "ben", "orderId": "7",
              "total": 30, "currency": "EUR"}
    paid = {"eventId": "q", "type": "order_paid", "orderId": "7"}
    for body in (placed, paid, paid, placed):
        assert (await ingest("commerce", body))["id"] == body["eventId"]
    await deps.derivation.fold()
    money = await _money(deps.store, tenant.site_id)
    assert list(money.values()) == [{"orders": {"EUR": 1}, "revenue": {"EUR": 3000}}]
    assert await deps.store.collection(commerce.EVENTS).count_documents({}) == 2


@pytest.mark.parametrize("body, field", [
    ({"type": "order_placed", "orderId": "1", "total": "10.00"}, "currency"),
    ({"type": "order_placed", "orderId": "1", "total": "10.001", "currency": "EUR"}, "total"),
    ({"type": "order_placed", "orderId": "1", "total": "10.5", "currency": "JPY"}, "total"),
    ({"type": "order_placed", "orderId": "1", "total": "-1", "currency": "EUR"}, None),
    ({"type": "order_placed", "orderId": "1", "total": "1e3", "currency": "EUR"}, None),
    ({"type": "order_placed", "total": "10", "currency": "EUR"}, "orderId"),
    ({"type": "order_refunded", "orderId": "1", "currency": "EUR"}, "amount"),
    ({"type": "add_to_cart", "productId": "3"}, "visitorId"),
    ({"type": "add_to_cart", "visitorId": "v", "productId": "3", "orderId": "1"}, "orderId"),
    ({"type": "order_shipped", "orderId": "1"}, None),
    ({"type": "order_paid", "orderId": "1", "total": 12.5, "currency": "eur"}, None),
])
async def test_a_wrong_event_is_refused_whole_and_nothing_is_stored(
        fetch: Fetch, tenant: Tenant, deps, body: dict[str, Any], field: str | None):
    answer = await fetch("/ingest/commerce", "POST", json_body={"eventId": "x", **body},
                         headers={"X-Service-Key": tenant.api_key})
    assert answer.code in (400, 422), answer
    if field is not None:
        assert answer.json()["error"]["field"] == field, answer.json()
    for collection in (commerce.EVENTS, commerce.ORDERS, derivation.COLLECTION):
        assert await deps.store.collection(collection).count_documents({}) == 0


async def test_the_browser_has_no_way_to_send_money(fetch: Fetch, tenant: Tenant):
    answer = await fetch("/ingest/commerce", "POST", json_body={
        "eventId": "x", "type": "order_placed", "orderId": "1", "total": 1, "currency": "EUR"},
        headers={"X-Public-Key": tenant.public_key})
    assert answer.code == 401, answer


async def test_steps_sent_in_any_order_or_in_one_second_make_the_same_order(
        tenant: Tenant, deps, ingest: Ingest):
    day = _today() - timedelta(days=1)
    same = _at(day, 12)
    steps = [{"eventId": "f", "type": "order_failed", "orderId": "9", "occurredAt": same},
             {"eventId": "p", "type": "order_placed", "visitorId": "cy", "orderId": "9",
              "total": "8.00", "currency": "EUR", "occurredAt": same},
             # The payment is retried and goes through a minute later.
             {"eventId": "q", "type": "order_paid", "orderId": "9",
              "occurredAt": same.replace("12:00:00", "12:01:00")}]
    for body in steps[:2]:
        await ingest("commerce", body)
    order = await deps.store.collection(commerce.ORDERS).find_one({"orderId": "9"})
    assert (order["status"], order["figure"]) == ("failed", [])
    await ingest("commerce", steps[2])
    await deps.derivation.fold()
    order = await deps.store.collection(commerce.ORDERS).find_one({"orderId": "9"})
    assert (order["status"], order["visitorId"]) == ("paid", "cy")
    assert list((await _money(deps.store, tenant.site_id)).values()) == [
        {"orders": {"EUR": 1}, "revenue": {"EUR": 800}}]
