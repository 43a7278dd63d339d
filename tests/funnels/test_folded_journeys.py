"""Reports read folded journeys (issue 39 point 3): the fold joins each session's steps, orders,
errors and frustrated clicks to its visit whatever order their facts come in, the outcome
counts it keeps are what a rebuild from the stored data counts, revenue at risk reads only
those counts and the daily figures, and a funnel reads one document per session. (With 1,000
crafted sessions, 30 hit without an order are chance and 300 are a loss:
test_revenue_at_risk.py, through the same counts.)"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from derived import (
    conversion_impact,
    daily_figures,
    derivation,
    funnel_reports,
    journeys,
    visits,
)
from documents import commerce, funnels
from tests.support.app import Tenant
from tests.support.ingest import Ingest, send_errors

SHOP = "https://shop.example"
BASE = (datetime.now(UTC) - timedelta(hours=3)).replace(second=0, microsecond=0)
DAY = BASE.date()


def _at(minute: float) -> str:
    return (BASE + timedelta(minutes=minute)).isoformat()


def _error(visitor: str, message: str, minute: float) -> dict[str, Any]:
    return {"visitorId": visitor, "sessionId": f"{visitor}-s", "source": "javascript",
            "type": "TypeError", "message": message, "url": f"{SHOP}/checkout",
            "stack": f"TypeError: {message}\n    at pay (https://shop.example/pay.js:1:1)",
            "occurredAt": _at(minute)}


async def _outcome_counts(store: Any, site_id: str) -> dict[str, Counter[str]]:
    return await daily_figures.session_figures(
        store, site_id, DAY - timedelta(days=3), DAY + timedelta(days=1),
        dimensions=(journeys.STAGE, journeys.ERROR_HIT, journeys.PAGE_HIT))


async def _error_id(store: Any, message: str) -> str:
    error = await store.collection("errors").find_one({"message": message}, {"_id": 1})
    return error["_id"]


async def _three_sessions(ingest: Ingest, deps) -> None:
    """a: the error is processed before the session's first pageview is even sent, so its fact
    is folded first; then a product view at 0, the error at 1, an add to cart at 2 and the
    shop's server reports a paid order with no browser session at 10: joined to a's visit.
    b: a pageview and a dead click on /pay; no order. c: a pageview two days before, and an
    order paid now, with no browser session: beyond journeys.LATE after c's only visit, so it
    is no session's."""
    await send_errors(ingest, deps, [_error("a", "pay is undefined", 1)])
    await ingest("pageviews", {"visitorId": "a", "sessionId": "a-s", "productId": "p",
                               "url": f"{SHOP}/product/p", "occurredAt": _at(0)})
    await ingest("commerce", {"eventId": "a-cart", "type": "add_to_cart", "visitorId": "a",
                              "sessionId": "a-s", "productId": "p", "occurredAt": _at(2)})
    for kind, minute in (("order_placed", 9), ("order_paid", 10)):
        await ingest("commerce", {"eventId": f"a-{kind}", "type": kind, "visitorId": "a",
                                  "orderId": "o-a", "total": "20.00", "currency": "EUR",
                                  "occurredAt": _at(minute)})
    await ingest("pageviews", {"visitorId": "b", "sessionId": "b-s", "url": f"{SHOP}/pay",
                               "occurredAt": _at(5)})
    await ingest("recordings/interactions", {
        "visitorId": "b", "sessionId": "b-s", "url": f"{SHOP}/pay",
        "interactions": [{"kind": "dead_click", "selector": "#pay", "count": 1,
                          "at": _at(6)}]})
    await ingest("pageviews", {"visitorId": "c", "sessionId": "c-s", "url": f"{SHOP}/",
                               "occurredAt": _at(-2 * 24 * 60)})
    for kind, minute in (("order_placed", 7), ("order_paid", 8)):
        await ingest("commerce", {"eventId": f"c-{kind}", "type": kind, "visitorId": "c",
                                  "orderId": "o-c", "total": "20.00", "currency": "EUR",
                                  "occurredAt": _at(minute)})
    await deps.derivation.fold()



async def test_a_journey_is_joined_whatever_the_order_of_its_facts_and_a_rebuild_agrees(
        tenant: Tenant, deps, ingest: Ingest):
    await _three_sessions(ingest, deps)
    pay = await _error_id(deps.store, "pay is undefined")
    # a reached 2 stages (product view, cart) and paid; hit at stage 1, before paying.
    # b and c reached none and did not pay; b dead-clicked on /pay at stage 0.
    expected = {journeys.STAGE: Counter({"21": 1, "00": 2}),
                journeys.ERROR_HIT: Counter({f"1210:{pay}": 1}),
                journeys.PAGE_HIT: Counter({"0000:/pay": 1})}
    assert await _outcome_counts(deps.store, tenant.site_id) == expected

    # A rebuild counts the folded journeys again from the visits, and one from the stored
    # records for visits that carry none (folded before journeys were kept): the same.
    await derivation.rebuild_site(deps.store, tenant.site_id)
    assert await _outcome_counts(deps.store, tenant.site_id) == expected
    await deps.store.collection(visits.COLLECTION).update_many(
        {"siteId": tenant.site_id}, {"$unset": {"journey": ""}})
    await derivation.rebuild_site(deps.store, tenant.site_id)
    assert await _outcome_counts(deps.store, tenant.site_id) == expected
    # And for visits never folded (stored before visits were kept), worked out from the stored
    # pageviews, and visits such a rebuild left with an empty journey: each joined to its
    # stored records.
    await deps.store.collection(visits.COLLECTION).delete_many({"siteId": tenant.site_id})
    await derivation.rebuild_site(deps.store, tenant.site_id)
    assert await _outcome_counts(deps.store, tenant.site_id) == expected
    await deps.store.collection(visits.COLLECTION).update_many(
        {"siteId": tenant.site_id}, {"$set": {"journey": journeys.empty()}})
    await derivation.rebuild_site(deps.store, tenant.site_id)
    assert await _outcome_counts(deps.store, tenant.site_id) == expected


async def test_a_hit_is_one_document_per_error_and_day_holding_only_its_sessions_outcomes(
        tenant: Tenant, deps, ingest: Ingest):
    # Folded twice: hit at a product view, then the cart and the payment move the session's
    # outcome on, so its first outcome is taken out of the error's document and none is left
    # at nothing.
    await ingest("pageviews", {"visitorId": "a", "sessionId": "a-s", "productId": "p",
                               "url": f"{SHOP}/product/p", "occurredAt": _at(0)})
    await send_errors(ingest, deps, [_error("a", "pay is undefined", 1)])
    pay = await _error_id(deps.store, "pay is undefined")
    await ingest("commerce", {"eventId": "a-cart", "type": "add_to_cart", "visitorId": "a",
                              "sessionId": "a-s", "productId": "p", "occurredAt": _at(2)})
    await ingest("commerce", {"eventId": "a-paid", "type": "order_paid", "visitorId": "a",
                              "sessionId": "a-s", "orderId": "o-a", "total": "20.00",
                              "currency": "EUR", "occurredAt": _at(3)})
    await deps.derivation.fold()
    hits = [doc async for doc in deps.store.collection(daily_figures.SESSION_DAYS).find(
        {"siteId": tenant.site_id, "dimension": journeys.ERROR_HIT})]
    assert [(doc["value"], doc["sessions"], doc[journeys.HITS]) for doc in hits] == [
        (pay, 1, {"o1210": 1})]
    assert await _outcome_counts(deps.store, tenant.site_id) == {
        journeys.STAGE: Counter({"21": 1}), journeys.ERROR_HIT: Counter({f"1210:{pay}": 1}),
        journeys.PAGE_HIT: Counter()}


class _Reading:
    """The store, noting which collections a computation reads."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.read: set[str] = set()

    def collection(self, name: str) -> Any:
        self.read.add(name)
        return self.store.collection(name)


async def _offload(work: Any) -> Any:
    return work(lambda: None)


async def test_revenue_at_risk_reads_the_folded_counts_and_a_funnel_one_visit_per_session(
        tenant: Tenant, deps, ingest: Ingest):
    await _three_sessions(ingest, deps)
    site = await deps.store.collection("sites").find_one({"_id": tenant.site_id})
    first, last = DAY - timedelta(days=3), datetime.now(UTC).date()
    # What the figures are read from: the folded counts and the daily figures, never a
    # session, an occurrence, a click or an order (the reporting currency is on the site).
    reading = _Reading(deps.store)
    impacts = await conversion_impact.error_impacts(reading, site, first, last, _offload)
    # a was hit at the product view, a stage no session without the hit reached: no table.
    assert impacts[await _error_id(deps.store, "pay is undefined")]["affectedSessions"] == 0
    assert reading.read <= {daily_figures.SESSION_DAYS, daily_figures.SITE_DAYS}, reading.read
    # A funnel reads one visit document per session and nothing of the shop's events (and
    # the site, for where its days begin); the steps and the order joined to a's visit are
    # there.
    reading = _Reading(deps.store)
    sessions = await funnel_reports.read_sessions(reading, tenant.site_id, first, last)
    assert len(sessions.visits) == 3
    assert reading.read <= {visits.COLLECTION, "visitors", "sites"}, reading.read
    paths = funnel_reports.paths_through(funnels.shop_funnel(), sessions,
                                         page_matches=lambda *_: False)
    # a viewed the product and added it to the cart, then paid without a checkout step: the
    # funnel's steps are not skipped, so a reached 2; b and c viewed no product.
    assert {path.session_id: len(path.reached) for path in paths} == {
        "a-s": 2, "b-s": 0, "c-s": 0}
    assert [kind for kind, _ in next(p for p in paths if p.session_id == "a-s").commerce] == [
        commerce.ADD_TO_CART, commerce.PAID]
