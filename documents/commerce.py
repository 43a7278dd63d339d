"""Commerce events from a shop's server, and the orders they make up (issue 31).

* `commerce_events`: every event as received, stored once under `_id` = "<site>:<eventId>"
  (the sender's idempotency key): carts, checkouts and each step of an order's life.
* `orders`: one per (site, order id), `_id` = "<site>:<orderId>", a summary worked out again
  from all of the order's events whenever one arrives (`order_summary`), so events may come in
  any order and a retried one changes nothing. An order whose steps are dropped holds only
  its id and `dropped`, the reason: its placing was dropped by the privacy gate (GPC, no
  consent, a held visitor), or its visitor was erased. Each later step finds that on the
  order's own document, in the write that would have counted it, and is dropped for the same
  reason; reads of orders leave these out (`KEPT`).

Money is kept in integer minor units of its currency (cents; yen; fils), never as a float:
`minor_units` turns the decimal text a shop sends into them and refuses what the currency
cannot hold, a currency that is not an ISO 4217 code, and an amount above `MAX_ORDER_MINOR`.
Which codes exist and how many decimals each has is ISO 4217's own list (the iso4217
package), not a table of ours: the minor units amounts were always stored in, and the two
decimals a shop sends for the forint or the rupiah (decision "Issue 38: inputs").
Sums of one currency are exact integers; currencies are never summed together.

What an order adds to the figures is its `figure`: nothing until it is paid; once paid, one
order and its total less its refunds, on the UTC day it was paid; nothing again when it is
cancelled or failed after payment, or refunded in full. The ingest transaction stores the
event and the new summary and records the difference between the order's old and new figure
as an unfolded fact (derived/derivation.py, kind `daily_figures.ORDER`): the daily figures are
only touched by the fold, and a visitor's share is the sum of their orders' figures, so
erasure and restriction stay exact (decision "Issue 31" in docs/decisions.md).

The reads at the end (`paid_orders`, `visitor_orders`) are what the screens use; they leave
restricted visitors out, as every dashboard read does. A session's steps and paid orders reach
funnels and revenue at risk through its journey (derived/journeys.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from iso4217 import Currency

from documents import sites, visitors
from documents.retention import Expiry
from documents.store import ASCENDING, AlreadyStored, DuplicateKeyError, Index, Store

EVENTS = "commerce_events"
ORDERS = "orders"

ADD_TO_CART, CHECKOUT_STARTED = "add_to_cart", "checkout_started"
PLACED, PAID, REFUNDED = "order_placed", "order_paid", "order_refunded"
CANCELLED, FAILED = "order_cancelled", "order_failed"
EVENT_TYPES = (ADD_TO_CART, CHECKOUT_STARTED, PLACED, PAID, REFUNDED, CANCELLED, FAILED)
ORDER_EVENT_TYPES = frozenset({PLACED, PAID, REFUNDED, CANCELLED, FAILED})
#: The order status each life event sets; the latest of them (by when it happened) holds.
#: A refund sets none: its amount is taken off, and a refund of the whole total makes the
#: order "refunded".
STATUS_OF = {PLACED: "placed", PAID: "paid", CANCELLED: "cancelled", FAILED: "failed"}
#: Which of two steps stamped with the same time came later, in an order's usual life (a shop's
#: clock may give several steps one second; a failed payment can be retried and succeed).
_LIFE_ORDER = {PLACED: 0, FAILED: 1, PAID: 2, REFUNDED: 3, CANCELLED: 4}
#: Events one order may have; far more than any real order's life, a bound on the summary's read.
MAX_ORDER_EVENTS = 200
#: The drop reason of the steps of an erased visitor's orders.
ERASED = "erased"
#: The orders the service holds, without the marks of orders whose steps are dropped.
KEPT: dict[str, Any] = {"dropped": None}

#: The minor unit of an amount stored in a code ISO 4217 does not list or gives none (ingest
#: refuses these now; before it checked codes, it stored every amount in hundredths).
_STORED_UNLISTED_EXPONENT = 2
#: The most one amount (an order's total, a refund, a price) may be, in minor units of its
#: currency: 10,000,000,000.00 EUR, 1,000,000,000,000 JPY, beyond any real order. A day's
#: figures sum amounts in 64-bit integers; at this bound they would need over nine million
#: such orders on one day to overflow (2**63 / 10**12).
MAX_ORDER_MINOR = 10**12

INDEXES = [
    # An order's events, read whenever one of them arrives.
    Index(EVENTS, (("siteId", ASCENDING), ("orderId", ASCENDING), ("occurredAt", ASCENDING))),
    # A kind of event over a time range (carts, checkouts), and a visitor's events (export).
    Index(EVENTS, (("siteId", ASCENDING), ("type", ASCENDING), ("occurredAt", ASCENDING))),
    Index(EVENTS, (("siteId", ASCENDING), ("visitorId", ASCENDING))),
    # Paid orders over a time range; a visitor's orders (export, erasure, a visitor's share).
    Index(ORDERS, (("siteId", ASCENDING), ("paidAt", ASCENDING))),
    Index(ORDERS, (("siteId", ASCENDING), ("placedAt", ASCENDING))),
    Index(ORDERS, (("siteId", ASCENDING), ("visitorId", ASCENDING))),
    # The orders list (derived/views/orders.py) of one status or one currency, by placing;
    # its value sort and range read one currency's orders of the range.
    Index(ORDERS, (("siteId", ASCENDING), ("status", ASCENDING), ("placedAt", ASCENDING))),
    Index(ORDERS, (("siteId", ASCENDING), ("currency", ASCENDING), ("placedAt", ASCENDING))),
    # Each site's oldest orders and events, for retention (documents/retention.py).
    Index(ORDERS, (("siteId", ASCENDING), ("updatedAt", ASCENDING))),
    Index(EVENTS, (("siteId", ASCENDING), ("occurredAt", ASCENDING))),
]


class InvalidMoney(ValueError):
    """An amount or currency the service cannot keep exactly."""


class TooManyOrderEvents(ValueError):
    """An order already holds MAX_ORDER_EVENTS events."""


class OrderDropped(Exception):
    """The order's steps are dropped, for `reason` (a privacy gate reason, or "erased")."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotTheOrders(ValueError):
    """An event that does not fit its order: it names another visitor, or refunds in another
    currency. `field` names the event's field that is wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


# Money ----------------------------------------------------------------------------------------


def _listed(currency: Any) -> Currency | None:
    """The currency in ISO 4217's current list (codes in capitals, as the standard has them)."""
    try:
        return Currency(currency) if isinstance(currency, str) else None
    except ValueError:
        return None


def exponent(currency: str) -> int:
    """How many decimal places the currency's minor unit has: ISO 4217's minor unit (HUF 2,
    JPY 0, KWD 3), the unit amounts have always been stored in."""
    listed = _listed(currency)
    if listed is None or listed.exponent is None:
        return _STORED_UNLISTED_EXPONENT
    return listed.exponent


def known_currency(currency: Any) -> str:
    """The currency if it is an ISO 4217 code with a minor unit, else InvalidMoney.

    ISO lists some codes with no minor unit (gold, special drawing rights, the test code XTS):
    they are no shop's money, and no amount in them could be kept in minor units."""
    listed = _listed(currency)
    if listed is None:
        raise InvalidMoney(f"{str(currency)[:12]!r} is not an ISO 4217 currency code")
    if listed.exponent is None:
        raise InvalidMoney(f"{currency} has no minor unit in ISO 4217 (a metal, a fund or a "
                           "test code): no amount is kept in it")
    return currency


def minor_units(value: Any, currency: str) -> int:
    """A decimal amount ("19.99", 19.99, 20) as an integer of the currency's minor unit.

    Refuses an unknown currency, negatives, non-numbers, more decimals than the currency has
    (rounding money silently would make sums disagree with the shop's) and more than
    MAX_ORDER_MINOR."""
    known_currency(currency)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidMoney("an amount is a decimal number or a decimal string")
    try:
        # A JSON number arrives as a float; its shortest text is what the sender wrote.
        amount = Decimal(str(value).strip())
    except InvalidOperation as exc:
        raise InvalidMoney(f"{str(value)[:40]!r} is not a decimal amount") from exc
    if not amount.is_finite() or amount < 0:
        raise InvalidMoney("an amount is a finite number, zero or more")
    scaled = amount.scaleb(exponent(currency))
    if scaled != scaled.to_integral_value():
        raise InvalidMoney(f"{currency} has {exponent(currency)} decimal places")
    if scaled > MAX_ORDER_MINOR:
        raise InvalidMoney(f"an amount is at most {decimal_text(MAX_ORDER_MINOR, currency)} "
                           f"{currency}")
    return int(scaled)


def decimal_text(minor: int, currency: str) -> str:
    """Minor units as the decimal text an API answer or a CSV cell shows ("19.99")."""
    places = exponent(currency)
    return str(Decimal(minor).scaleb(-places).quantize(Decimal(1).scaleb(-places)))


# Orders ---------------------------------------------------------------------------------------


def event_id(site_id: str, sender_id: str) -> str:
    return f"{site_id}:{sender_id}"


def order_id(site_id: str, shop_order_id: str) -> str:
    return f"{site_id}:{shop_order_id}"


def order_summary(events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """What an order's events, in any order of arrival, say about it.

    The first event that names them gives the visitor, session and total, and the total's
    currency is the order's (else the first currency named); `placedAt` and `paidAt` are the
    earliest placing and payment; refunds in the order's currency add up; the status is that
    of the latest life event, or "refunded" once refunds reach a paid order's total.
    """
    summary: dict[str, Any] = {"visitorId": None, "sessionId": None, "total": None,
                               "currency": None, "placedAt": None, "paidAt": None,
                               "refunded": 0, "status": None}
    latest: datetime | None = None
    named: str | None = None
    refunds: list[tuple[int, str | None]] = []
    for event in sorted(events, key=lambda e: (e["occurredAt"], _LIFE_ORDER[e["type"]],
                                               e["recordedAt"], e["_id"])):
        for name in ("visitorId", "sessionId"):
            if summary[name] is None and event.get(name) is not None:
                summary[name] = event[name]
        if summary["total"] is None and event.get("total") is not None:
            summary["total"], summary["currency"] = event["total"], event.get("currency")
        named = named or event.get("currency")
        kind, at = event["type"], event["occurredAt"]
        if kind == PLACED and summary["placedAt"] is None:
            summary["placedAt"] = at
        if kind == PAID and summary["paidAt"] is None:
            summary["paidAt"] = at
        if kind == REFUNDED:
            refunds.append((int(event.get("amount") or 0), event.get("currency")))
        if kind in STATUS_OF and (latest is None or at >= latest):
            summary["status"], latest = STATUS_OF[kind], at
    summary["currency"] = summary["currency"] or named
    # Ingest refuses a refund in another currency than its order's; one that came before the
    # order's total said which currency that is stays stored but is never taken off unconverted.
    summary["refunded"] = sum(amount for amount, currency in refunds
                              if currency in (None, summary["currency"]))
    if summary["paidAt"] is not None and summary["status"] in (None, "placed"):
        # A payment recorded before the placing (events from a shop's clock) still stands.
        summary["status"] = "paid"
    if summary["status"] == "paid" and summary["total"] is not None \
            and summary["refunded"] >= summary["total"] > 0:
        summary["status"] = "refunded"
    return summary


def order_figure(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """What the order adds to the daily figures: one paid order and its net revenue on the day
    it was paid, or nothing (not paid, no total, cancelled, failed, refunded in full)."""
    if summary["paidAt"] is None or summary["total"] is None or summary["currency"] is None \
            or summary["status"] != "paid":
        return []
    return [{"at": summary["paidAt"], "currency": summary["currency"], "orders": 1,
             "revenue": max(summary["total"] - summary["refunded"], 0)}]


def figure_change(before: list[dict[str, Any]], after: list[dict[str, Any]]
                  ) -> list[dict[str, Any]]:
    """The records an unfolded fact carries to move the figures from `before` to `after`."""
    if before == after:
        return []
    taken_out = [{**record, "orders": -record["orders"], "revenue": -record["revenue"]}
                 for record in before]
    return taken_out + list(after)


@dataclass(frozen=True)
class Recorded:
    """What storing one event did: whether it was new, and the figure records it changes."""

    stored: bool
    figure_change: list[dict[str, Any]]
    order: dict[str, Any] | None


async def record_event(store: Store, site_id: str, event: dict[str, Any], *, session: Any
                       ) -> Recorded:
    """Store one event (its `_id` made with `event_id`) and, for an order's event, the order's
    new summary, in the caller's transaction. Raises `AlreadyStored` for an event stored before.

    The order is written first: on a replica set that makes two events of one order conflict,
    so the second is summed up again with the first in view.
    """
    order: dict[str, Any] | None = None
    before: dict[str, Any] | None = None
    if event["type"] in ORDER_EVENT_TYPES:
        key = order_id(site_id, event["orderId"])
        before = await store.collection(ORDERS).find_one_and_update(
            {"_id": key}, {"$inc": {"events": 1},
                           "$setOnInsert": {"siteId": site_id, "orderId": event["orderId"]}},
            upsert=True, session=session)
        if before is not None and before.get("dropped"):
            raise OrderDropped(before["dropped"])
        if before is not None and int(before.get("events") or 0) >= MAX_ORDER_EVENTS:
            raise TooManyOrderEvents(event["orderId"])
        if before is not None:
            _check_fits(before, event)
    try:
        await store.collection(EVENTS).insert_one(event, session=session)
    except DuplicateKeyError as exc:
        raise AlreadyStored(event["_id"]) from exc
    if event["type"] not in ORDER_EVENT_TYPES:
        return Recorded(True, [], None)
    events = await store.collection(EVENTS).find(
        {"siteId": site_id, "orderId": event["orderId"]}, session=session,
    ).to_list(MAX_ORDER_EVENTS + 1)
    summary = order_summary(events)
    figure = order_figure(summary)
    order = {**summary, "figure": figure, "updatedAt": event["recordedAt"]}
    await store.collection(ORDERS).update_one(
        {"_id": order_id(site_id, event["orderId"])}, {"$set": order}, session=session)
    if summary["visitorId"] is not None:
        # Events that came without the visitor are theirs too: export and erasure find them so.
        await store.collection(EVENTS).update_many(
            {"siteId": site_id, "orderId": event["orderId"], "visitorId": None},
            {"$set": {"visitorId": summary["visitorId"]}}, session=session)
    return Recorded(True, figure_change((before or {}).get("figure") or [], figure),
                    {**order, "orderId": event["orderId"]})


def _check_fits(order: dict[str, Any], event: dict[str, Any]) -> None:
    """NotTheOrders when the event names another visitor than its order's, or refunds in
    another currency: it would move a held visitor's order, or take yen off euros."""
    visitor = order.get("visitorId")
    if visitor is not None and event.get("visitorId") not in (None, visitor):
        raise NotTheOrders("visitorId", "the order was placed by another visitor")
    currency = order.get("currency")
    if event["type"] == REFUNDED and currency is not None and event.get("currency") != currency:
        raise NotTheOrders("currency", f"the order is in {currency}; refund it in {currency}")


@dataclass(frozen=True)
class KnownOrder:
    """What the service knows of an order before one of its steps is admitted."""

    visitor_id: str | None = None
    #: Why the order's steps are dropped, if they are.
    dropped: str | None = None


async def known_order(store: Store, site_id: str, shop_order_id: str) -> KnownOrder:
    """The visitor an order was placed by and why its steps are dropped, if the service knows
    either."""
    order = await store.collection(ORDERS).find_one(
        {"_id": order_id(site_id, shop_order_id)}, {"visitorId": 1, "dropped": 1})
    return KnownOrder((order or {}).get("visitorId"), (order or {}).get("dropped"))


def _dropped_mark(site_id: str, shop_order_id: str, reason: str, at: datetime
                  ) -> dict[str, Any]:
    """An order whose steps are dropped: its id and the reason, nothing of visitor or money;
    `updatedAt` lets it expire with the orders."""
    return {"siteId": site_id, "orderId": shop_order_id, "dropped": reason, "updatedAt": at}


async def drop_unplaced_order(store: Store, site_id: str, shop_order_id: str, reason: str, *,
                              at: datetime, session: Any) -> Recorded | None:
    """After the privacy gate dropped an order's placing: unless a placing of it is stored,
    mark the order's steps dropped for `reason` and remove the steps that came before the
    placing, in the caller's transaction. Returns what was removed (`figure_change` takes out
    what it had added), or None when the order stands or was marked already."""
    key = order_id(site_id, shop_order_id)
    before = await store.collection(ORDERS).find_one({"_id": key}, session=session)
    if before is not None and (before.get("placedAt") is not None or before.get("dropped")):
        return None
    await store.collection(ORDERS).replace_one(
        {"_id": key}, _dropped_mark(site_id, shop_order_id, reason, at), upsert=True,
        session=session)
    await store.collection(EVENTS).delete_many(
        {"siteId": site_id, "orderId": shop_order_id}, session=session)
    return Recorded(False, figure_change((before or {}).get("figure") or [], []), before)


async def mark_erased(store: Store, site_id: str, shop_order_ids: Iterable[str], *,
                      at: datetime, session: Any) -> None:
    """Mark an erased visitor's orders, deleted already, so that their late steps are dropped
    rather than bring the orders back; in the caller's transaction."""
    for shop_order_id in shop_order_ids:
        await store.collection(ORDERS).replace_one(
            {"_id": order_id(site_id, shop_order_id)},
            _dropped_mark(site_id, shop_order_id, ERASED, at), upsert=True, session=session)


async def first_currency(store: Store, site_id: str) -> str | None:
    """The currency of the site's stored paid order paid first (a rebuild keeps it on a site
    folded before `firstCurrency` was kept)."""
    first = await store.collection(ORDERS).find_one(
        {"siteId": site_id, "paidAt": {"$ne": None}}, {"currency": 1},
        sort=[("paidAt", ASCENDING)])
    return (first or {}).get("currency")


# Reads for funnels and other screens ----------------------------------------------------------


def _range(site_id: str, field: str, start: datetime, end: datetime,
           restricted: list[str]) -> dict[str, Any]:
    query: dict[str, Any] = {"siteId": site_id, field: {"$gte": start, "$lt": end}}
    if restricted:
        query["visitorId"] = {"$nin": restricted}
    return query


async def _restricted(store: Store, site_id: str) -> list[str]:
    ids = await visitors.restricted_visitor_ids(store, site_id)
    return [visitor for visitor in ids if isinstance(visitor, str)]


def order_view(order: dict[str, Any]) -> dict[str, Any]:
    """An order as reads return it: money in minor units and as decimal text."""
    currency = order.get("currency")
    total, refunded = order.get("total"), int(order.get("refunded") or 0)
    net = sum(record["revenue"] for record in order.get("figure") or [])
    return {
        "orderId": order["orderId"], "visitorId": order.get("visitorId"),
        "sessionId": order.get("sessionId"), "status": order.get("status"),
        "placedAt": order.get("placedAt"), "paidAt": order.get("paidAt"),
        "currency": currency, "total": total, "refunded": refunded, "net": net,
        "counted": bool(order.get("figure")),
        "totalText": decimal_text(total, currency) if total is not None and currency else None,
        "netText": decimal_text(net, currency) if currency else None,
    }


async def paid_orders(store: Store, site_id: str, start: datetime, end: datetime
                      ) -> list[dict[str, Any]]:
    """The orders paid in [start, end), oldest payment first, as `order_view` shows them; those
    cancelled, failed or refunded in full since are included with `counted` False and net 0."""
    cursor = store.collection(ORDERS).find(
        _range(site_id, "paidAt", start, end, await _restricted(store, site_id)),
    ).sort([("paidAt", ASCENDING), ("_id", ASCENDING)])
    return [order_view(order) async for order in cursor]


#: An order's net value in minor units, as a query expression: its total less its refunds,
#: never below 0, whatever its status (the orders list filters and sorts by it; `net_value`).
NET_VALUE: dict[str, Any] = {"$max": [0, {"$subtract": [{"$ifNull": ["$total", 0]},
                                                        {"$ifNull": ["$refunded", 0]}]}]}


def net_value(order: dict[str, Any]) -> int:
    """`NET_VALUE` of a stored order, worked out here."""
    return max(0, int(order.get("total") or 0) - int(order.get("refunded") or 0))


async def orders_by_value(store: Store, filter_: dict[str, Any], *,
                          after: tuple[int, str] | None, limit: int) -> list[dict[str, Any]]:
    """Up to `limit` orders of `filter_` (which names the site) by `NET_VALUE`, largest first
    and then by `_id` descending, from just after the (value, `_id`) `after`."""
    pipeline: list[dict[str, Any]] = [{"$match": filter_},
                                      {"$addFields": {"netValue": NET_VALUE}}]
    if after is not None:
        value, after_id = after
        pipeline.append({"$match": {"$or": [{"netValue": {"$lt": value}},
                                            {"netValue": value, "_id": {"$lt": after_id}}]}})
    pipeline += [{"$sort": {"netValue": -1, "_id": -1}}, {"$limit": limit}]
    return [order async for order in store.collection(ORDERS).aggregate(pipeline)]


async def visitor_orders(store: Store, site_id: str, visitor_id: str) -> list[dict[str, Any]]:
    """The visitor's orders, newest placing first (the visitor page)."""
    cursor = store.collection(ORDERS).find({"siteId": site_id, "visitorId": visitor_id}).sort(
        [("placedAt", -1), ("_id", ASCENDING)])
    return [order_view(order) async for order in cursor]


async def latest_orders_of_visitor(store: Store, site_id: str, visitor_id: str, *, limit: int
                                  ) -> list[dict[str, Any]]:
    """The visitor's newest `limit` orders as stored, newest placing first (the profile)."""
    return await store.collection(ORDERS).find(
        {"siteId": site_id, "visitorId": visitor_id, **KEPT}).sort(
        [("placedAt", -1), ("_id", -1)]).limit(limit).to_list(None)


# The overview's money figures -----------------------------------------------------------------


def _ratio_text(minor: int, count: int, currency: str) -> str | None:
    """minor / count as decimal text, rounded half up to the currency's places; None for 0/0."""
    if not count:
        return None
    return decimal_text(int((Decimal(minor) / count).quantize(Decimal(1), ROUND_HALF_UP)),
                        currency)


def _change(now: Decimal | int, before: Decimal | int) -> float | None:
    if not before:
        return None
    change = (Decimal(now) - Decimal(before)) / Decimal(before)
    return float(change.quantize(Decimal("0.0001"), ROUND_HALF_UP))


def _figure(now: Any, before: Any, change_now: Any, change_before: Any) -> dict[str, Any]:
    return {"value": now, "previous": before, "change": _change(change_now, change_before)}


def money_overview(now: Any, before: Any, currency: str | None,
                   source: str | None) -> dict[str, Any]:
    """The overview's commerce figures from two periods of daily figures (daily_figures.Period):
    orders, conversion rate (those orders per visitor), revenue, average order value and
    revenue per visitor, each against the previous period, all of them of the orders in the
    reporting `currency` only, so that orders x average order value = revenue and orders /
    visitors = conversion; each other currency is listed apart with its own orders and revenue,
    never summed. Money as decimal text; the conversion as the exact ratio (the dashboard
    rounds it once)."""
    def per(period: Any) -> dict[str, Any]:
        # No reporting currency yet means no paid order was folded yet: nothing to split.
        orders = period.orders.get(currency, 0) if currency else sum(period.orders.values())
        revenue = period.revenue.get(currency, 0) if currency else 0
        return {"orders": orders, "revenue": revenue, "visitors": period.visitors,
                "conversion": Decimal(orders) / period.visitors if period.visitors else Decimal(0)}

    a, b = per(now), per(before)
    figures: dict[str, Any] = {
        "orders": _figure(a["orders"], b["orders"], a["orders"], b["orders"]),
        "conversionRate": _figure(float(a["conversion"]), float(b["conversion"]),
                                  a["conversion"], b["conversion"]),
    }
    if currency:
        aov_a = Decimal(a["revenue"]) / a["orders"] if a["orders"] else Decimal(0)
        aov_b = Decimal(b["revenue"]) / b["orders"] if b["orders"] else Decimal(0)
        rpv_a = Decimal(a["revenue"]) / a["visitors"] if a["visitors"] else Decimal(0)
        rpv_b = Decimal(b["revenue"]) / b["visitors"] if b["visitors"] else Decimal(0)
        figures.update({
            "revenue": _figure(decimal_text(a["revenue"], currency),
                               decimal_text(b["revenue"], currency), a["revenue"], b["revenue"]),
            "averageOrderValue": _figure(_ratio_text(a["revenue"], a["orders"], currency),
                                         _ratio_text(b["revenue"], b["orders"], currency),
                                         aov_a, aov_b),
            "revenuePerVisitor": _figure(_ratio_text(a["revenue"], a["visitors"], currency),
                                         _ratio_text(b["revenue"], b["visitors"], currency),
                                         rpv_a, rpv_b),
        })
    others = sorted((set(now.orders) | set(now.revenue)) - {currency}) if currency else []
    return {
        "currency": currency, "currencySource": source, "figures": figures,
        "otherCurrencies": [{"currency": other, "orders": now.orders.get(other, 0),
                             "revenue": decimal_text(now.revenue.get(other, 0), other)}
                            for other in others],
        "days": [{"day": day,
                  "orders": money["orders"].get(currency, 0) if currency
                  else sum(money["orders"].values()),
                  "revenue": decimal_text(money["revenue"].get(currency, 0), currency)
                  if currency else None}
                 for day, money in sorted(now.money_per_day.items())],
    }


def reporting_currency(site: dict[str, Any]) -> tuple[str | None, str | None]:
    """The site's reporting currency and where it comes from: its setting ("setting"), else
    the currency of its first paid order, kept on the site once folded (`firstCurrency`,
    documents/sites.py `keep_first_currency`; "firstOrder"), else none yet. Kept, not looked
    up: the retention purge may have removed that order since."""
    chosen = (site.get("settings") or {}).get("reportingCurrency")
    if chosen:
        return chosen, "setting"
    first = site.get(sites.FIRST_CURRENCY)
    return (first, "firstOrder") if first else (None, None)


#: An order expires with its last event (`updatedAt`) and its events go with it; an event of no
#: order (a cart, a checkout) expires by when it happened.
ORDER_EXPIRY = Expiry(ORDERS, "updatedAt")
EVENT_EXPIRY = Expiry(EVENTS, "occurredAt")
EVENTS_OF_NO_ORDER: dict[str, Any] = {"type": {"$nin": sorted(ORDER_EVENT_TYPES)}}


async def purge_expired_orders(store: Store, site_id: str, before: datetime, *, limit: int,
                               session: Any) -> tuple[int, int]:
    """Delete up to `limit` orders whose last event is before `before`, with all their events,
    in the caller's transaction; returns (orders found, orders deleted). The figures keep what
    the orders added (decision "Issue 32: retention")."""
    found = await store.collection(ORDERS).find(
        ORDER_EXPIRY.query(site_id, before), {"orderId": 1}, session=session,
    ).sort(ORDER_EXPIRY.time_field, ASCENDING).limit(limit).to_list(None)
    if not found:
        return 0, 0
    await store.collection(EVENTS).delete_many(
        {"siteId": site_id, "orderId": {"$in": [order["orderId"] for order in found]}},
        session=session)
    orders = await store.collection(ORDERS).delete_many(
        {"_id": {"$in": [order["_id"] for order in found]}}, session=session)
    return len(found), orders.deleted_count
