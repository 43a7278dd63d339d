"""The orders page (issue 41 point 1): a site's orders, filtered by status, currency, net value,
traffic source and placing or payment day, sorted by placing, payment or value, paged by
cursor; each with its visitor, its session's journey and the recording that shows it.

The net value is the order's total less its refunds, whatever its status
(`commerce.NET_VALUE`); it is compared only within one currency, so a value filter or sort
needs `currency`. An order's source is its visit's (`visits.source_label`): the visit of its
browser session, or, for an order the shop's server sent without one, the visitor's visit it
belongs to by the journeys' rule (`visits.journey_visit`: the last that started before the
order, if the order came at most a day after its last pageview); "(unknown)" when there is
none. The source is not on the order, so a source filter reads the range's orders a batch at a
time and stops after SOURCE_SCAN, handing back a short page and a cursor to search on (as the
visitors list's "met an error" filter does).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date
from typing import Any
from urllib.parse import quote

from derived import visits
from derived.views.errors import recording_at
from derived.views.paging import encode_cursor, keyset_page, not_restricted, readable
from documents import commerce, sites, visitors
from documents.store import Store
from errors import InvalidInput
from instants import UTC_DAYS, days_condition, format_instant

SORTS = ("placed", "paid", "value")
STATUSES = ("placed", "paid", "refunded", "cancelled", "failed")
#: The source of an order whose visit is not known (no visitor, or no visit it belongs to).
UNKNOWN_SOURCE = "(unknown)"
#: Orders read per batch, and at most per request, when the list is filtered by source.
SOURCE_BATCH = 100
SOURCE_SCAN = 500
#: Pages of the session's journey an order shows, the earliest first.
JOURNEY_PAGES = 20


@dataclass(frozen=True)
class OrderFilters:
    """What the orders list is filtered and sorted by; None means any. `min_net` and
    `max_net` are decimal text in `currency` ("45", "45.50")."""

    first: date
    last: date
    status: str | None = None
    currency: str | None = None
    min_net: str | None = None
    max_net: str | None = None
    source: str | None = None
    sort: str = "placed"


@dataclass(frozen=True)
class OrderPage:
    """One page of orders; `partial` when a source filter stopped searching before the page
    was full (the cursor searches on)."""

    items: list[dict[str, Any]]
    next_cursor: str | None
    partial: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The JSON answer `{items, nextCursor, partial}`."""
        return {"items": self.items, "nextCursor": self.next_cursor, "partial": self.partial}


# The query ------------------------------------------------------------------------------------


def _minor(raw: str | None, currency: str | None, name: str) -> int | None:
    if raw is None:
        return None
    if currency is None:
        raise InvalidInput(f"{name} needs a currency: amounts of two currencies are not "
                           "compared", field=name)
    try:
        return commerce.minor_units(raw, currency)
    except commerce.InvalidMoney as exc:
        raise InvalidInput(f"{name}: {exc}", field=name) from None


def _date_field(sort: str) -> str:
    """The date the range is over: payment for the payment sort, else placing."""
    return "paidAt" if sort == "paid" else "placedAt"


async def _filter(store: Store, site_id: str, filters: OrderFilters) -> dict[str, Any]:
    if filters.sort not in SORTS:
        raise InvalidInput(f"sort must be one of {', '.join(SORTS)}", field="sort")
    if filters.status is not None and filters.status not in STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(STATUSES)}", field="status")
    currency = filters.currency.upper() if filters.currency else None
    if filters.sort == "value" and currency is None:
        raise InvalidInput("sort=value needs a currency: amounts of two currencies are not "
                           "compared", field="sort")
    low = _minor(filters.min_net, currency, "minNet")
    high = _minor(filters.max_net, currency, "maxNet")
    if low is not None and high is not None and low > high:
        raise InvalidInput("minNet is more than maxNet", field="minNet")
    filter_: dict[str, Any] = {"siteId": site_id, **commerce.KEPT,
                               **await not_restricted(store, site_id),
                               _date_field(filters.sort): days_condition(
                                   filters.first, filters.last,
                                   await sites.site_clock(store, site_id))}
    if filters.status is not None:
        filter_["status"] = filters.status
    if currency is not None:
        filter_["currency"] = currency
    within = [*([{"$gte": [commerce.NET_VALUE, low]}] if low is not None else []),
              *([{"$lte": [commerce.NET_VALUE, high]}] if high is not None else [])]
    if within:
        filter_["$expr"] = {"$and": within}
    return filter_


# Value cursors: the (net value, `_id`) of the last order handed out ----------------------------


def _value_cursor(order: dict[str, Any]) -> str:
    raw = json.dumps(["value", commerce.net_value(order), order["_id"]], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _after_value(cursor: str | None) -> tuple[int, str] | None:
    if cursor is None:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        kind, value, order_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, TypeError, UnicodeDecodeError):
        raise InvalidInput("cursor is not one this API handed out", field="cursor") from None
    if kind != "value" or isinstance(value, bool) or not isinstance(value, int) \
            or not isinstance(order_id, str):
        raise InvalidInput("cursor is not one this API handed out", field="cursor")
    return value, order_id


Batch = Callable[[str | None, int], Awaitable[tuple[list[dict[str, Any]], str | None]]]


def _reader(store: Store, filter_: dict[str, Any], sort: str) -> tuple[Batch, Callable[..., str]]:
    """How to read a batch of orders after a cursor in the sort's order, and the cursor just
    after one order."""
    if sort == "value":
        async def by_value(cursor: str | None, size: int
                           ) -> tuple[list[dict[str, Any]], str | None]:
            found = await commerce.orders_by_value(store, filter_, after=_after_value(cursor),
                                                   limit=size + 1)
            if len(found) <= size:
                return found, None
            return found[:size], _value_cursor(found[size - 1])
        return by_value, _value_cursor

    field = _date_field(sort)

    async def by_date(cursor: str | None, size: int) -> tuple[list[dict[str, Any]], str | None]:
        return await keyset_page(store, commerce.ORDERS, filter_, field, cursor, size)
    return by_date, lambda order: encode_cursor(order[field], order["_id"])


# Rows -----------------------------------------------------------------------------------------


@dataclass
class _Visits:
    """The visits of a request's orders, looked up once per browser session."""

    store: Store
    site_id: str
    known: dict[tuple[str, str], dict[str, Any] | None]

    async def of(self, order: dict[str, Any]) -> dict[str, Any] | None:
        """The order's visit (`visits.journey_visit`), or None when it has none folded."""
        visitor, session_id = order.get("visitorId"), order.get("sessionId") or None
        at = order.get("placedAt") or order.get("paidAt")
        if not isinstance(visitor, str) or at is None:
            return None
        key = (visitor, session_id)
        if session_id is not None and key in self.known:
            return self.known[key]
        # The clock names a stub visit's day; a stub is not an order's visit (no pageviews).
        visit = await visits.journey_visit(self.store, self.site_id, visitor, session_id, at,
                                           clock=UTC_DAYS, session=None)
        found = visit if visit is not None and visit.get("pageviews") else None
        if session_id is not None:
            self.known[key] = found
        return found


def source_of(visit: dict[str, Any] | None) -> str:
    """An order's source from its visit: the visit's `source_label`, or "(unknown)"."""
    return visits.source_label(visit.get("source")) if visit is not None else UNKNOWN_SOURCE


def journey_view(visit: dict[str, Any] | None) -> dict[str, Any] | None:
    """The session's journey as an order shows it: when, where it entered and left, its pages."""
    if visit is None:
        return None
    pages = [page for page in visit.get("pages") or [] if isinstance(page, dict)]
    return {"startedAt": visit.get("startedAt"), "endedAt": visit.get("endedAt"),
            "entry": visit.get("entry"), "exit": visit.get("exit"),
            "pageviews": int(visit.get("pageviews") or 0),
            "pages": [visits.page_path(page.get("url")) for page in pages[:JOURNEY_PAGES]]}


def order_row(site_id: str, order: dict[str, Any], visit: dict[str, Any] | None,
              recording: dict[str, Any] | None) -> dict[str, Any]:
    """An order as a row of the orders list and the visitor profile: `order_view`, its net
    value, source and journey, and the dashboard's paths to its visitor, journey and replay."""
    view = commerce.order_view(order)
    currency = view["currency"]
    value = commerce.net_value(order)
    app = f"/app/sites/{site_id}"
    visitor = view["visitorId"]
    visitor_path = f"{app}/visitors/{quote(visitor, safe='')}" if visitor else None
    at = view["placedAt"] or view["paidAt"]
    return {
        **view,
        "value": value,
        "valueText": commerce.decimal_text(value, currency) if currency else None,
        "source": source_of(visit),
        "journey": journey_view(visit),
        "recordingId": recording["_id"] if recording is not None else None,
        "links": {
            "visitor": visitor_path,
            "journey": f"{visitor_path}#sessions-title" if visitor_path and visit else None,
            "replay": (f"{app}/recordings/{recording['_id']}?at={quote(format_instant(at))}"
                       if recording is not None and at is not None else None),
        },
    }


async def order_rows(store: Store, site_id: str, orders: list[dict[str, Any]],
                     found_visits: _Visits | None = None) -> list[dict[str, Any]]:
    """The orders as rows, each with its visit, the recording running when it was placed and
    its visitor's label; an order that cannot be read is left out (logged by `readable`)."""
    found_visits = found_visits or _Visits(store, site_id, {})
    rows = []
    for order in orders:
        visit = await found_visits.of(order)
        at = order.get("placedAt") or order.get("paidAt")
        recording = (await recording_at(store, site_id, order.get("visitorId"),
                                        order.get("sessionId"), at)
                     if at is not None else None)
        rows.extend(readable([order], lambda o, v=visit, r=recording: order_row(site_id, o, v, r),
                             "order"))
    names = await visitors.display_names(store, [
        (site_id, row["visitorId"]) for row in rows if isinstance(row.get("visitorId"), str)])
    return [{**row, "visitorLabel": visitors.listed_label(site_id, row.get("visitorId"), names)}
            for row in rows]


# The list -------------------------------------------------------------------------------------


async def list_orders(store: Store, site_id: str, filters: OrderFilters, *,
                      cursor: str | None, limit: int) -> OrderPage:
    """The site's orders in the sort's order (newest placing, newest payment or largest net
    value first, then by id), filtered, restricted visitors and dropped orders left out."""
    filter_ = await _filter(store, site_id, filters)
    read, cursor_of = _reader(store, filter_, filters.sort)
    if filters.source is None:
        found, next_cursor = await read(cursor, limit)
        return OrderPage(await order_rows(store, site_id, found), next_cursor)
    found_visits = _Visits(store, site_id, {})
    kept: list[dict[str, Any]] = []
    scanned = 0
    position = cursor
    while scanned < SOURCE_SCAN:
        batch, after = await read(position, SOURCE_BATCH)
        scanned += len(batch)
        for order in batch:
            if source_of(await found_visits.of(order)) != filters.source:
                continue
            if len(kept) == limit:
                # One more than the page: the page ends at its last order.
                return OrderPage(await order_rows(store, site_id, kept, found_visits),
                                 cursor_of(kept[-1]))
            kept.append(order)
        if after is None:
            return OrderPage(await order_rows(store, site_id, kept, found_visits), None)
        position = after
    # Searched as far as one request may: what was found, and where to search on.
    return OrderPage(await order_rows(store, site_id, kept, found_visits), position,
                     partial=True)


async def visitor_orders(store: Store, site_id: str, visitor_id: str, *, limit: int
                         ) -> list[dict[str, Any]]:
    """The visitor's newest orders as rows (the visitor profile; its caller has checked the
    visitor is not restricted)."""
    found = await commerce.latest_orders_of_visitor(store, site_id, visitor_id, limit=limit)
    return await order_rows(store, site_id, found)
