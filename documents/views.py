"""What the dashboard shows, read through the collection families: lists with keyset
pagination, the visitor profile, errors over a date range, leads, recordings with their replay
and timeline, searches by what happened, the daily chart, the overview and the CSV exports.

This module shapes records for display and spans families; it never names a collection
itself (tests/documents/test_collection_owners.py): the reads of one collection are its
family's, and the generic list and export helpers here take a family's constant.

Lists page by keyset, never by skip: the cursor is the (sort value, `_id`) of the last item
handed out, encoded opaquely, so a page costs the same however deep it is and items inserted
meanwhile neither repeat nor vanish. Restricted visitors (GDPR Art. 18) are left out of every
dashboard read here; data-subject operations read them through privacy/ instead.

A recording holds its visitor's country and device and its marks (the errors, rage and dead
clicks and leads during it), stored as they arrive (documents/recordings.py), so the recordings
list is one query with every filter in it. The visitors list filtered by "met an error", which a
profile does not hold, reads visitors in (lastSeen, `_id`) order a batch at a time, looks the
errors up on the occurrences' index, and stops after SEARCH_SCAN of them: a page can then come
back short, with a cursor to search further (decision "Issue 21" in docs/decisions.md).
"""

from __future__ import annotations

import base64
import json
import logging
import re
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, TypeVar

from documents import (
    commerce,
    derivation,
    error_records,
    interactions,
    leads,
    recordings,
    rollups,
    visitors,
)
from documents.rollups import page_path
from documents.store import ASCENDING, DESCENDING, Store
from errors import InvalidInput, NotFound
from instants import format_instant

#: Largest page a caller may ask for; the default when it asks for none.
MAX_PAGE = 100
DEFAULT_PAGE = 50
#: How many of each kind of related item the visitor profile embeds.
PROFILE_ITEMS = 50
#: Longest chart range, so one request cannot unwind a site's whole history.
MAX_CHART_DAYS = 366
DEFAULT_CHART_DAYS = 30
#: The days a report or a filter may name. Nothing the service holds is older than 1970 (ingest
#: takes times at most 30 days old), and the last is a year short of the calendar's end, so a
#: range, the period of the same length before it and the instant after its last day all exist.
FIRST_DAY, LAST_DAY = date(1970, 1, 1), date(9998, 12, 31)

ERROR_STATUSES = ("open", "resolved", "ignored")

log = logging.getLogger(__name__)

T = TypeVar("T")

#: What shaping a stored document the code did not expect raises (a missing or mistyped field).
_UNREADABLE = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def readable(documents: Iterable[dict[str, Any]], shape: Callable[[dict[str, Any]], T],
             what: str) -> list[T]:
    """Each document shaped for the dashboard; one that cannot be shaped is left out, logged.

    A row from an older version, a hand edit or a restore must not break a list or an export
    for every other row. The log names the kind and the failure, never the row's content.
    """
    shaped = []
    for document in documents:
        try:
            shaped.append(shape(document))
        except _UNREADABLE as exc:
            log.warning("left out an unreadable %s row (%s)", what, type(exc).__name__)
    return shaped


@dataclass(frozen=True)
class Page:
    """One page of a list and the cursor of the next (None on the last page)."""

    items: list[dict[str, Any]]
    next_cursor: str | None

    def as_dict(self) -> dict[str, Any]:
        """The JSON answer `{items, nextCursor}`."""
        return {"items": self.items, "nextCursor": self.next_cursor}


# Cursors -------------------------------------------------------------------------------------


def encode_cursor(sort_value: datetime, document_id: str) -> str:
    """An opaque cursor for the position just after this item."""
    raw = json.dumps([format_instant(sort_value), document_id],
                     separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """The (sort value, `_id`) inside a cursor; InvalidInput for anything not made here."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        moment, document_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        at = datetime.fromisoformat(moment)
        # An offset that moves the instant out of the calendar: no store can hold it.
        at.astimezone(UTC)
    except (ValueError, TypeError, UnicodeDecodeError, OverflowError):
        raise InvalidInput("cursor is not one this API handed out", field="cursor") from None
    if not isinstance(document_id, str) or at.tzinfo is None:
        raise InvalidInput("cursor is not one this API handed out", field="cursor")
    return at, document_id


def page_limit(raw: str | None) -> int:
    """The `limit` query argument: 1 to MAX_PAGE, DEFAULT_PAGE when absent."""
    if raw is None or raw == "":
        return DEFAULT_PAGE
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_PAGE:
        raise InvalidInput(f"limit must be a whole number from 1 to {MAX_PAGE}", field="limit")
    return int(raw)


async def keyset_page(store: Store, collection: str, filter_: dict[str, Any], sort_field: str,
                      cursor: str | None, limit: int) -> tuple[list[dict[str, Any]], str | None]:
    """Documents after `cursor` in (sort_field, `_id`) descending order, and the next cursor."""
    query = dict(filter_)
    if cursor:
        after, after_id = decode_cursor(cursor)
        query["$and"] = [*query.get("$and", []), {"$or": [
            {sort_field: {"$lt": after}},
            {sort_field: after, "_id": {"$lt": after_id}},
        ]}]
    found = await store.collection(collection).find(query).sort(
        [(sort_field, DESCENDING), ("_id", DESCENDING)]).limit(limit + 1).to_list(None)
    # One item past the page tells whether a next page exists without a count.
    if len(found) <= limit:
        return found, None
    last = found[limit - 1]
    if not isinstance(last.get(sort_field), datetime):
        # Rows without a date sort after every dated one, and a cursor cannot point past them.
        return found[:limit], None
    return found[:limit], encode_cursor(last[sort_field], last["_id"])


# Restriction ---------------------------------------------------------------------------------


async def _not_restricted(store: Store, site_id: str) -> dict[str, Any]:
    restricted = await visitors.restricted_visitor_ids(store, site_id)
    return {"visitorId": {"$nin": restricted}} if restricted else {}


# Visitors ------------------------------------------------------------------------------------


def visitor_search(q: str) -> dict[str, Any]:
    """The filter of a visitors search: an id prefix, or part of a name or e-mail (any case)."""
    escaped = re.escape(q)
    return {"$or": [
        {"visitorId": {"$regex": "^" + escaped}},
        {"displayName": {"$regex": escaped, "$options": "i"}},
        {"emails": {"$regex": escaped, "$options": "i"}},
    ]}


def visitor_summary(profile: dict[str, Any]) -> dict[str, Any]:
    """A profile as a row of the visitors list."""
    return {
        "visitorId": profile["visitorId"],
        "displayName": profile.get("displayName"),
        "emails": profile.get("emails", []),
        "wpUserId": profile.get("wpUserId"),
        "country": (profile.get("location") or {}).get("country"),
        "device": profile.get("device") or {},
        "counts": profile.get("counts") or {},
        "objected": bool(profile.get("objected")),
        "firstSeen": profile.get("firstSeen"),
        "lastSeen": profile.get("lastSeen"),
    }


async def visitor_profile(store: Store, site_id: str, visitor_id: str) -> dict[str, Any]:
    """The profile page: identity, counts, recent activity, errors hit, recordings, leads and
    linked profiles (same `wpUserId`, listed separately). NotFound for restricted visitors."""
    profile = await visitors.find_profile(store, site_id, visitor_id)
    if profile is None or profile.get("restricted"):
        raise NotFound("visitor not found")
    occurrences = await error_records.latest_occurrences_of_visitor(store, site_id, visitor_id,
                                                                    limit=PROFILE_ITEMS)
    found_leads = await leads.latest_leads_of_visitor(store, site_id, visitor_id,
                                                      limit=PROFILE_ITEMS)
    found_recordings = await recordings.latest_recordings_of_visitor(
        store, site_id, visitor_id, limit=PROFILE_ITEMS)
    linked: list[dict[str, Any]] = []
    if profile.get("wpUserId"):
        linked = await visitors.linked_profiles(store, site_id, profile["wpUserId"], visitor_id,
                                                limit=PROFILE_ITEMS)
    return {
        **visitor_summary(profile),
        "location": {key: value for key, value in (profile.get("location") or {}).items()
                     if key != "ipAddress"},
        "recent": list(reversed(profile.get("recent") or [])),
        "errors": [{"errorId": o["errorId"], "what": f"{o['type']}: {o['message']}",
                    "when": o["occurredAt"]} for o in occurrences],
        "recordings": readable(found_recordings, recording_summary, "recording"),
        "leads": readable(found_leads, lead_view, "lead"),
        "linkedProfiles": readable(linked, visitor_summary, "visitor"),
    }


# Errors --------------------------------------------------------------------------------------


def error_summary(error: dict[str, Any]) -> dict[str, Any]:
    """An error aggregate as a row of the errors list."""
    return {
        "id": error["_id"],
        "type": error.get("type"),
        "message": error.get("message"),
        "source": error.get("source"),
        "status": error.get("status"),
        "occurrenceCount": error.get("occurrenceCount", 0),
        "firstSeen": error.get("firstSeen"),
        "lastSeen": error.get("lastSeen"),
    }


def error_detail(error: dict[str, Any]) -> dict[str, Any]:
    """An error aggregate in full, as the dashboard shows it (no job ids, no IP address)."""
    return {
        **error_summary(error),
        "lastOccurredAt": error.get("lastOccurredAt"),
        "lastStack": error.get("lastStack"),
        "context": error.get("context") or {},
        "reopenCount": error.get("reopenCount", 0),
        "statusChangedAt": error.get("statusChangedAt"),
    }


def _error_filter(site_id: str, status: str | None) -> dict[str, Any]:
    filter_: dict[str, Any] = {"siteId": site_id}
    if status is not None:
        if status not in ERROR_STATUSES:
            raise InvalidInput(f"status must be one of {', '.join(ERROR_STATUSES)}",
                               field="status")
        filter_["status"] = status
    return filter_


async def list_errors(store: Store, site_id: str, *, status: str | None, cursor: str | None,
                      limit: int) -> Page:
    """The site's error aggregates by last seen, newest first, optionally of one status."""
    found, next_cursor = await keyset_page(store, error_records.ERRORS,
                                           _error_filter(site_id, status), "lastSeen", cursor,
                                           limit)
    return Page(readable(found, error_summary, "error"), next_cursor)


async def find_error(store: Store, site_id: str, error_id: str) -> dict[str, Any]:
    """One of the site's error aggregates; NotFound otherwise."""
    error = await error_records.find_error(store, site_id, error_id)
    if error is None:
        raise NotFound("error not found")
    return error


# Errors over a date range --------------------------------------------------------------------

#: How the ranked errors list may be sorted, each biggest (or newest) first.
ERROR_SORTS = ("lastSeen", "occurrences", "visitors", "revenueAtRisk")
ERROR_SOURCES = ("javascript", "php")
#: Rows of the ranked errors list, and the entries of each breakdown of one error.
MAX_RANKED_ERRORS = 100
BREAKDOWN_ITEMS = 10
AFFECTED_VISITORS = 50
LATEST_OCCURRENCES = 10


def _day_bounds(first: date, last: date) -> tuple[datetime, datetime]:
    start = datetime(first.year, first.month, first.day, tzinfo=UTC)
    return start, datetime(last.year, last.month, last.day, tzinfo=UTC) + timedelta(days=1)


def _days(first: date, last: date) -> list[str]:
    return [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]


async def ranked_errors(store: Store, site_id: str, *, first: date, last: date,
                        status: str | None, source: str | None, page: str | None, sort: str,
                        limit: int, impacts: dict[str, dict[str, Any]] | None = None
                        ) -> dict[str, Any]:
    """The site's errors that occurred between `first` and `last` (UTC days), with their
    occurrences, visitors affected and a per-day trend in that range, sorted by `sort`.
    `impacts` (documents/conversion_impact.py) gives each error its revenue at risk; sorted
    by it, the significant figures come first, largest first, then the errors by sessions hit.

    Counted from the occurrences, which are kept for errors tied to a visitor or a session (as
    the daily chart counts them); status and source come from each error's aggregate.
    """
    if sort not in ERROR_SORTS:
        raise InvalidInput(f"sort must be one of {', '.join(ERROR_SORTS)}", field="sort")
    start, end = _day_bounds(first, last)
    match: dict[str, Any] = {"siteId": site_id, "occurredAt": {"$gte": start, "$lt": end},
                             **await _not_restricted(store, site_id)}
    if page:
        match["page"] = {"$regex": "^" + re.escape(page)}
    grouped = await error_records.occurrences_per_error(store, match)
    aggregate_filter: dict[str, Any] = {"_id": {"$in": [row["_id"] for row in grouped]},
                                        "siteId": site_id}
    if status:
        aggregate_filter.update(_error_filter(site_id, status))
    if source:
        aggregate_filter["source"] = source
    errors = {error["_id"]: error async for error in error_records.errors_matching(
        store, aggregate_filter, error_records.WITHOUT_JOB_IDS)}
    rows = [row for row in grouped if row["_id"] in errors]
    impacts = impacts or {}
    for row in rows:
        impact = impacts.get(row["_id"])
        row["revenueAtRisk"] = (impact or {}).get("revenueAtRisk")
        row["sessionsHit"] = (impact or {}).get("affectedSessions", 0)
    if sort == "revenueAtRisk":
        rows.sort(key=lambda row: (row["revenueAtRisk"] is not None, row["revenueAtRisk"] or 0,
                                   row["sessionsHit"], row["lastSeen"], row["_id"]),
                  reverse=True)
    else:
        rows.sort(key=lambda row: (row[sort], row["lastSeen"], row["_id"]), reverse=True)
    rows = rows[:limit]
    per_day = error_records.occurrences_per_error_and_day(
        store, {**match, "errorId": {"$in": [row["_id"] for row in rows]}},
        _day_key("$occurredAt"))
    trend = {(item["_id"]["error"], item["_id"]["day"]): item["count"] async for item in per_day}
    days = _days(first, last)
    return {"from": first.isoformat(), "to": last.isoformat(), "days": days, "items": [{
        **error_summary(errors[row["_id"]]),
        "occurrencesInRange": row["occurrences"], "visitorsAffected": row["visitors"],
        "firstSeenInRange": row["firstSeen"], "lastSeenInRange": row["lastSeen"],
        "trend": [trend.get((row["_id"], day), 0) for day in days],
        "impact": impacts.get(row["_id"]) or _NO_IMPACT,
    } for row in rows]}


#: The impact of an error that hit no session of the range.
_NO_IMPACT = {"affectedSessions": 0, "affectedConversion": None, "baselineConversion": None,
              "z": None, "status": "notEnoughData", "revenueAtRisk": None,
              "revenueAtRiskText": None, "currency": None}


async def error_breakdown(store: Store, site_id: str, error_id: str, *, first: date,
                          last: date) -> dict[str, Any]:
    """One error between `first` and `last`: occurrences per day, visitors affected (count and
    the most affected, named), pages, browsers, systems and devices with their shares, and the
    latest occurrences with their anonymised context."""
    await find_error(store, site_id, error_id)
    start, end = _day_bounds(first, last)
    match = {"siteId": site_id, "errorId": error_id, "occurredAt": {"$gte": start, "$lt": end},
             **await _not_restricted(store, site_id)}

    async def counted(key: Any, limit: int | None = BREAKDOWN_ITEMS) -> list[dict[str, Any]]:
        return await error_records.occurrences_counted_by(store, match, key, limit)

    per_day = {row["_id"]: row["count"] for row in await counted(_day_key("$occurredAt"), None)}
    total = sum(per_day.values())
    visitor_rows = [row for row in await counted("$visitorId", None) if row["_id"]]
    names = await visitors.display_names(
        store, [(site_id, row["_id"]) for row in visitor_rows[:AFFECTED_VISITORS]])

    def shares(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"name": row["_id"], "count": row["count"],
                 "share": round(row["count"] / total, 4) if total else 0} for row in rows]

    latest = await error_records.occurrences_matching(store, match, None).sort(
        "occurredAt", DESCENDING).limit(LATEST_OCCURRENCES).to_list(None)
    return {
        "from": first.isoformat(), "to": last.isoformat(), "occurrences": total,
        "days": [{"day": day, "count": per_day.get(day, 0)} for day in _days(first, last)],
        "visitorsAffected": len(visitor_rows),
        "visitors": [{"visitorId": row["_id"], "occurrences": row["count"],
                      "lastSeen": row["last"],
                      "displayName": names.get((site_id, row["_id"]))}
                     for row in visitor_rows[:AFFECTED_VISITORS]],
        "pages": shares(await counted("$page")),
        "browsers": shares(await counted("$browser")),
        "systems": shares(await counted("$os")),
        "devices": shares(await counted("$deviceType")),
        "latest": [{"id": o["_id"], "occurredAt": o["occurredAt"], "url": o.get("url"),
                    "page": o.get("page"), "visitorId": o.get("visitorId"),
                    "sessionId": o.get("sessionId"), "browser": o.get("browser"),
                    "os": o.get("os"), "deviceType": o.get("deviceType"),
                    "context": o.get("context") or {}} for o in latest],
    }


# Leads ---------------------------------------------------------------------------------------


def lead_view(lead: dict[str, Any]) -> dict[str, Any]:
    """A lead as the dashboard shows it."""
    return {
        "id": lead["_id"],
        "visitorId": lead.get("visitorId"),
        "createdAt": lead.get("createdAt"),
        "kind": lead.get("kind"),
        "formId": lead.get("formId"),
        "url": lead.get("url"),
        "name": lead.get("name"),
        "email": lead.get("email"),
        "phone": lead.get("phone"),
        "fields": lead.get("fields") or {},
        "orderCompleted": bool(lead.get("orderCompleted")),
        "rectifiedAt": lead.get("rectifiedAt"),
    }


async def list_leads(store: Store, site_id: str, *, cursor: str | None, limit: int) -> Page:
    """The site's leads, newest first, without those of restricted visitors."""
    filter_ = {"siteId": site_id, **await _not_restricted(store, site_id)}
    found, next_cursor = await keyset_page(store, leads.COLLECTION, filter_, "createdAt",
                                           cursor, limit)
    return Page(readable(found, lead_view, "lead"), next_cursor)


# Recordings ----------------------------------------------------------------------------------


def recording_summary(recording: dict[str, Any]) -> dict[str, Any]:
    """A recording as a row of a recordings list: what was recorded, when, for how long."""
    pages = recording.get("pages") or []
    return {
        "id": recording["_id"],
        "visitorId": recording.get("visitorId"),
        "sessionId": recording.get("sessionId"),
        "status": recording.get("status"),
        "startedAt": recording["startedAt"],
        "endedAt": recording.get("endedAt"),
        "duration": recordings.duration_seconds(recording),
        "pageUrl": pages[0]["url"] if pages else None,
        "pageCount": len(pages),
        "legacy": "legacyFootage" in recording,
    }


async def replayable_recording(store: Store, site_id: str, recording_id: str
                               ) -> dict[str, Any]:
    """The recording, when the dashboard may replay it; NotFound otherwise."""
    recording = await recordings.find_recording(store, site_id, recording_id)
    if recording is None or (await visitors.privacy_flags(
            store, site_id, recording.get("visitorId"))).restricted:
        raise NotFound("recording not found")
    return recording


def segment_view(segment: dict[str, Any]) -> dict[str, Any]:
    """A servable segment's files document as the replay list shows it."""
    metadata = segment.get("metadata") or {}
    return {
        "fileId": segment["_id"],
        "seq": metadata.get("seq"),
        "startedAt": metadata.get("startedAt"),
        "endedAt": metadata.get("endedAt"),
        "pageUrl": metadata.get("pageUrl"),
        "length": segment.get("length"),
    }


async def recording_segments(store: Store, site_id: str, recording_id: str
                             ) -> list[dict[str, Any]]:
    """The recording's servable segments, in replay order."""
    return [segment_view(s) for s in await recordings.list_segments(store, site_id,
                                                                    recording_id)]


async def replayable_segment(store: Store, site_id: str, file_id: str) -> dict[str, Any]:
    """A checked, unrejected segment of a visitor who is not restricted; NotFound otherwise."""
    found = await recordings.find_segment_file(store, site_id, file_id)
    if found is None or not found["metadata"].get("consoleChecked") \
            or found["metadata"].get("rejected"):
        raise NotFound("no such segment")
    if (await visitors.privacy_flags(store, site_id, found["metadata"].get("visitorId"))
            ).restricted:
        raise NotFound("no such segment")
    return found


# Daily charts --------------------------------------------------------------------------------


def parse_day(raw: str, field: str) -> date:
    """A day like 2026-01-31 from FIRST_DAY to LAST_DAY, or InvalidInput naming `field`."""
    try:
        day = date.fromisoformat(raw)
    except ValueError:
        raise InvalidInput(f"{field} is a day like 2026-01-31", field=field) from None
    if not FIRST_DAY <= day <= LAST_DAY:
        raise InvalidInput(f"{field} is a day from {FIRST_DAY} to {LAST_DAY}", field=field)
    return day


def chart_range(start: str | None, end: str | None, today: date) -> tuple[date, date]:
    """The inclusive (from, to) days of a chart; the last DEFAULT_CHART_DAYS by default."""
    named_first = parse_day(start, "from") if start else None
    last = parse_day(end, "to") if end else today
    first = named_first or max(last - timedelta(days=DEFAULT_CHART_DAYS - 1), FIRST_DAY)
    if first > last:
        raise InvalidInput("from is after to", field="from")
    if (last - first).days >= MAX_CHART_DAYS:
        raise InvalidInput(f"a chart covers at most {MAX_CHART_DAYS} days", field="from")
    return first, last


def _day_key(field: str) -> dict[str, Any]:
    return {"$dateToString": {"format": "%Y-%m-%d", "date": field}}


async def daily_counts(store: Store, site_id: str, first: date, last: date
                       ) -> list[dict[str, Any]]:
    """Pageviews and error occurrences per UTC day, every day of the range, from the daily
    figures kept at ingest (documents/rollups.py; restricted visitors are not in them)."""
    days = await rollups.site_days(store, site_id, first, last)
    return [{"day": day, "pageviews": figures["pageviews"], "errors": figures["errors"]}
            for day, figures in rollups.period(days, first, last).per_day.items()]


# CSV exports ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CsvExport:
    """What one CSV export lists: its columns, query, order and how a document becomes a row."""

    kind: str
    collection: str
    columns: tuple[str, ...]
    sort_field: str

    def row(self, document: dict[str, Any]) -> list[Any]:
        """The document's cells, in column order."""
        return _ROW_MAKERS[self.kind](document)


def _error_row(error: dict[str, Any]) -> list[Any]:
    view = error_summary(error)
    return [view["id"], view["type"], view["message"], view["source"], view["status"],
            view["occurrenceCount"], view["firstSeen"], view["lastSeen"]]


def _lead_row(lead: dict[str, Any]) -> list[Any]:
    view = lead_view(lead)
    return [view["id"], view["createdAt"], view["visitorId"], view["kind"], view["name"],
            view["email"], view["phone"], view["url"], view["formId"],
            json.dumps(view["fields"], ensure_ascii=False, sort_keys=True, default=str),
            view["orderCompleted"], *_cart_cells(lead.get("cart"))]


def _cart_cells(cart: Any) -> list[Any]:
    """The checkout's cart value and currency as the lead carries them (sent by the shop)."""
    if not isinstance(cart, dict):
        return ["", ""]
    return [cart.get("total", ""), cart.get("currency", "")]


def _order_row(order: dict[str, Any]) -> list[Any]:
    view = commerce.order_view(order)
    currency = view["currency"]
    refunded = commerce.decimal_text(view["refunded"], currency) if currency else ""
    return [view["orderId"], view["placedAt"], view["paidAt"], view["visitorId"],
            view["sessionId"], view["status"], currency, view["totalText"], refunded,
            view["netText"]]


def _recording_row(recording: dict[str, Any]) -> list[Any]:
    view = recording_summary(recording)
    return [view["id"], view["visitorId"], view["sessionId"], view["status"],
            view["startedAt"], view["endedAt"], view["duration"], view["pageUrl"],
            view["pageCount"]]


_ROW_MAKERS = {"errors": _error_row, "leads": _lead_row, "recordings": _recording_row,
               "orders": _order_row}

CSV_EXPORTS = {
    "errors": CsvExport("errors", error_records.ERRORS,
                        ("id", "type", "message", "source", "status", "occurrenceCount",
                         "firstSeen", "lastSeen"), "lastSeen"),
    "leads": CsvExport("leads", leads.COLLECTION,
                       ("id", "createdAt", "visitorId", "kind", "name", "email", "phone", "url",
                        "formId", "fields", "orderCompleted", "cartTotal", "cartCurrency"),
                       "createdAt"),
    "recordings": CsvExport("recordings", recordings.COLLECTION,
                            ("id", "visitorId", "sessionId", "status", "startedAt", "endedAt",
                             "durationSeconds", "firstPageUrl", "pageCount"), "startedAt"),
    # Orders the shop's server reported (documents/commerce.py): value and currency as
    # decimal text, never converted.
    "orders": CsvExport("orders", commerce.ORDERS,
                        ("orderId", "placedAt", "paidAt", "visitorId", "sessionId", "status",
                         "currency", "total", "refunded", "netRevenue"), "placedAt"),
}


async def _export_filter(store: Store, export: CsvExport, site_id: str) -> dict[str, Any]:
    if export.kind == "errors":
        return {"siteId": site_id}
    kept = commerce.KEPT if export.collection == commerce.ORDERS else {}
    return {"siteId": site_id, **kept, **await _not_restricted(store, site_id)}


async def count_export_rows(store: Store, export: CsvExport, site_id: str, *, up_to: int) -> int:
    """How many rows the export has, counting no further than `up_to`."""
    return await store.collection(export.collection).count_documents(
        await _export_filter(store, export, site_id), limit=up_to)


async def export_rows(store: Store, export: CsvExport, site_id: str, *, limit: int
                      ) -> AsyncIterator[list[Any]]:
    """The export's rows, newest first, one cursor batch in memory at a time."""
    cursor = store.collection(export.collection).find(
        await _export_filter(store, export, site_id)).sort(
        [(export.sort_field, DESCENDING), ("_id", DESCENDING)]).limit(limit)
    async for document in cursor:
        for row in readable([document], export.row, export.kind):
            yield row


# Timelines, searches by what happened, the overview -----------------------------------------

#: Events of one kind a timeline lists at most.
TIMELINE_ITEMS = 500
#: Items read per batch, and at most per request, when a list is filtered by what its documents
#: do not hold.
SEARCH_BATCH = 200
SEARCH_SCAN = 2000
#: How many of an error's latest occurrences are looked at for a recording of their moment.
REPLAY_CANDIDATES = 50
#: Rows of each overview ranking.
TOP_ITEMS = 10
CLICK_KINDS = ("rage_click", "dead_click")


# A recording's timeline ----------------------------------------------------------------------


async def recording_timeline(store: Store, site_id: str, recording_id: str) -> dict[str, Any]:
    """The recording and what happened during it, oldest first: errors, rage and dead clicks,
    page changes and leads, each with its time. NotFound as for replay."""
    recording = await replayable_recording(store, site_id, recording_id)
    low, high = recordings.window(recording)
    visitor_id = recording.get("visitorId")
    events: list[dict[str, Any]] = [
        {"kind": "page", "at": page["at"], "label": page_path(page.get("url")) or "a page",
         "url": page.get("url")} for page in recording.get("pages") or []
        if isinstance(page, dict) and isinstance(page.get("at"), datetime)]
    if visitor_id:
        occurrences = error_records.occurrences_between(
            store, site_id, [visitor_id], low, high,
            {"errorId": 1, "type": 1, "message": 1, "occurredAt": 1, "url": 1, "sessionId": 1},
        ).sort("occurredAt", ASCENDING).limit(TIMELINE_ITEMS)
        events.extend([{"kind": "error", "at": o["occurredAt"], "errorId": o["errorId"],
                        "label": f"{o.get('type') or 'Error'}: {o.get('message') or ''}",
                        "url": o.get("url")}
                       async for o in occurrences
                       if recordings.same_session(recording, o.get("sessionId"))])
        clicks = 0
        async for bucket in interactions.buckets_overlapping(store, site_id, [visitor_id],
                                                             low, high):
            for event in bucket["events"]:
                if clicks >= TIMELINE_ITEMS * 2:
                    break
                if event.get("kind") in CLICK_KINDS and low <= event["at"] <= high \
                        and recordings.same_session(recording, event.get("sessionId")):
                    clicks += 1
                    events.append({
                        "kind": event["kind"], "at": event["at"], "url": event.get("url"),
                        "label": _click_label(event)})
        found_leads = leads.visitor_leads_between(
            store, site_id, visitor_id, low, high,
            {"createdAt": 1, "kind": 1, "url": 1, "formId": 1}, limit=TIMELINE_ITEMS)
        events.extend([{"kind": "lead", "at": lead["createdAt"], "leadId": lead["_id"],
                        "label": f"Lead ({lead.get('kind') or 'form'})",
                        "url": lead.get("url")} async for lead in found_leads])
    events.sort(key=lambda event: event["at"])
    return {"recording": recording_summary(recording), "events": events}


def _click_label(event: dict[str, Any]) -> str:
    what = "Rage click" if event["kind"] == "rage_click" else "Dead click"
    if event.get("count") and event["kind"] == "rage_click":
        what += f" ({event['count']}×)"
    return f"{what} on {event['selector']}" if event.get("selector") else what


# The recording of an error's moment ----------------------------------------------------------


async def recording_at(store: Store, site_id: str, visitor_id: str | None,
                       session_id: str | None, at: datetime) -> dict[str, Any] | None:
    """The visitor's replayable recording running at `at`, or None."""
    for recording in await recordings.recordings_at(store, site_id, visitor_id, session_id, at):
        if "legacyFootage" not in recording:
            return recording
    return None


async def error_replays(store: Store, site_id: str, error_id: str, *, first: date,
                        last: date) -> dict[str, Any]:
    """The error's latest occurrences in the range that a recording shows, newest first, each
    with the recording and the moment to open it at."""
    await find_error(store, site_id, error_id)
    start, end = _day_bounds(first, last)
    restricted = await visitors.restricted_visitor_ids(store, site_id)
    match: dict[str, Any] = {"siteId": site_id, "errorId": error_id,
                             "occurredAt": {"$gte": start, "$lt": end}}
    if restricted:
        match["visitorId"] = {"$nin": restricted}
    latest = error_records.occurrences_matching(
        store, match, {"occurredAt": 1, "visitorId": 1, "sessionId": 1, "url": 1},
    ).sort("occurredAt", DESCENDING).limit(REPLAY_CANDIDATES)
    items = []
    async for occurrence in latest:
        recording = await recording_at(store, site_id, occurrence.get("visitorId"),
                                       occurrence.get("sessionId"), occurrence["occurredAt"])
        if recording is not None:
            items.append({"occurrenceId": occurrence["_id"], "at": occurrence["occurredAt"],
                          "visitorId": occurrence.get("visitorId"), "url": occurrence.get("url"),
                          "recordingId": recording["_id"]})
    return {"from": first.isoformat(), "to": last.isoformat(), "items": items}


# Searching by facts --------------------------------------------------------------------------

Keep = Callable[[list[dict[str, Any]]], Awaitable[list[dict[str, Any]]]]


@dataclass(frozen=True)
class SearchPage:
    """One page of a filtered list; `searchedTo` is where a short page stopped searching."""

    items: list[dict[str, Any]]
    next_cursor: str | None
    searched_to: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON answer."""
        return {"items": self.items, "nextCursor": self.next_cursor,
                "searchedTo": self.searched_to}


async def _search(store: Store, collection: str, filter_: dict[str, Any], sort_field: str,
                  cursor: str | None, limit: int, keep: Keep) -> SearchPage:
    """Items of `filter_` after `cursor`, newest first, that `keep` keeps, read a batch at a
    time; at most SEARCH_SCAN are read, then the page ends early with a cursor."""
    kept: list[dict[str, Any]] = []
    scanned = 0
    position = cursor
    while scanned < SEARCH_SCAN:
        batch, after = await keyset_page(store, collection, filter_, sort_field,
                                                 position, SEARCH_BATCH)
        scanned += len(batch)
        for item in await keep(batch):
            kept.append(item)
            if len(kept) > limit:
                last = kept[limit - 1]
                if not isinstance(last.get(sort_field), datetime):
                    # Rows without a date sort after every dated one; no cursor points past.
                    return SearchPage(kept[:limit], None)
                return SearchPage(kept[:limit],
                                  encode_cursor(last[sort_field], last["_id"]))
        if after is None:
            return SearchPage(kept, None)
        position = after
    # Searched as far as one request may: hand back what was found and where to go on.
    return SearchPage(kept, position, decode_cursor(position)[0])


@dataclass(frozen=True)
class RecordingFilters:
    """What the recordings list is filtered by; None or empty means any."""

    first: date | None = None
    last: date | None = None
    min_seconds: float | None = None
    max_seconds: float | None = None
    page: str | None = None
    country: str | None = None
    device: str | None = None
    marks: tuple[str, ...] = ()
    visitor_id: str | None = None
    #: Only these browser sessions (a source or a funnel step), when given.
    sessions: tuple[str, ...] | None = None


def _bounds(first: date | None, last: date | None) -> dict[str, Any]:
    bound: dict[str, Any] = {}
    if first is not None:
        bound["$gte"] = datetime(first.year, first.month, first.day, tzinfo=UTC)
    if last is not None:
        bound["$lt"] = datetime(last.year, last.month, last.day, tzinfo=UTC) + timedelta(days=1)
    return bound


async def search_recordings(store: Store, site_id: str, filters: RecordingFilters, *,
                            cursor: str | None, limit: int) -> Page:
    """The site's recordings, newest first, filtered in one query on (siteId, startedAt); each
    row with the country and device it started with and how many errors, rage clicks, dead
    clicks and leads happened during it."""
    for mark in filters.marks:
        if mark not in recordings.MARKS:
            raise InvalidInput(f"has must name some of {', '.join(recordings.MARKS)}",
                               field="has")
    filter_: dict[str, Any] = {"siteId": site_id}
    restricted = await visitors.restricted_visitor_ids(store, site_id)
    if filters.visitor_id is not None:
        if filters.visitor_id in restricted:
            return Page([], None)
        filter_["visitorId"] = filters.visitor_id
    elif restricted:
        filter_["visitorId"] = {"$nin": restricted}
    if bound := _bounds(filters.first, filters.last):
        filter_["startedAt"] = bound
    if filters.page:
        filter_["pages.url"] = {"$regex": re.escape(filters.page), "$options": "i"}
    if filters.country:
        filter_["country"] = filters.country.upper()
    if filters.device:
        filter_["device"] = filters.device
    for mark in filters.marks:
        filter_[f"marks.{mark}"] = {"$gt": 0}
    if filters.sessions is not None:
        filter_["sessionId"] = {"$in": list(filters.sessions)}
    durations = []
    if filters.min_seconds is not None:
        durations.append({"$expr": {"$gte": [recordings.DURATION_MS, filters.min_seconds * 1000]}})
    if filters.max_seconds is not None:
        durations.append({"$expr": {"$lte": [recordings.DURATION_MS, filters.max_seconds * 1000]}})
    if durations:
        filter_["$and"] = durations
    found, next_cursor = await keyset_page(store, recordings.COLLECTION, filter_,
                                                   "startedAt", cursor, limit)
    return Page(await recording_rows(store, site_id, found), next_cursor)


async def recording_rows(store: Store, site_id: str, batch: list[dict[str, Any]]
                         ) -> list[dict[str, Any]]:
    """The recordings as list rows with the country, device and marks each holds and the
    visitor's display name (one lookup by profile `_id` for them all); a recording that cannot
    be read is left out (logged by `readable`)."""
    shaped = readable(batch, lambda r: (r, recording_summary(r)), "recording")
    names = await visitors.display_names(store, [
        (site_id, r["visitorId"]) for r, _ in shaped if isinstance(r.get("visitorId"), str)])
    rows = []
    for recording, summary in shaped:
        marks = recording.get("marks") if isinstance(recording.get("marks"), dict) else {}
        rows.append({**summary, "country": recording.get("country"),
                     "device": recording.get("device"),
                     "visitorName": names.get((site_id, recording.get("visitorId") or "")),
                     "marks": {mark: marks.get(mark) if isinstance(marks.get(mark), int) else 0
                               for mark in recordings.MARKS}})
    return rows


# Visitors ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VisitorFilters:
    """What the visitors list is searched and filtered by; None means any."""

    q: str | None = None
    country: str | None = None
    device: str | None = None
    logged_in: bool | None = None
    has_lead: bool | None = None
    has_error: bool | None = None
    first_seen_from: date | None = None
    first_seen_to: date | None = None
    last_seen_from: date | None = None
    last_seen_to: date | None = None


async def search_visitors(store: Store, site_id: str, filters: VisitorFilters, *,
                          cursor: str | None, limit: int) -> SearchPage:
    """Visitors by last seen, newest first, searched and filtered. Whether a visitor met an
    error is looked up per batch in the occurrences; everything else is on the profile."""
    filter_: dict[str, Any] = {"siteId": site_id, "restricted": {"$ne": True}}
    if filters.q:
        filter_.update(visitor_search(filters.q))
    if filters.country:
        filter_["location.country"] = filters.country.upper()
    if filters.device:
        filter_["device.type"] = filters.device
    if filters.logged_in is not None:
        filter_["wpUserId"] = {"$nin": [None, ""]} if filters.logged_in else {"$in": [None, ""]}
    if filters.has_lead is not None:
        filter_["counts.leads"] = {"$gt": 0} if filters.has_lead else {"$not": {"$gt": 0}}
    if bound := _bounds(filters.first_seen_from, filters.first_seen_to):
        filter_["firstSeen"] = bound
    if bound := _bounds(filters.last_seen_from, filters.last_seen_to):
        filter_["lastSeen"] = bound

    async def keep(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        shaped = readable(batch, lambda p: {**p, "row": visitor_summary(p)},
                                  "visitor")
        hit = await _visitors_with_errors(store, site_id, [p["visitorId"] for p in shaped])
        if filters.has_error is not None:
            shaped = [p for p in shaped if (p["visitorId"] in hit) == filters.has_error]
        return [{**p, "hadError": p["visitorId"] in hit} for p in shaped]

    found = await _search(store, visitors.COLLECTION, filter_, "lastSeen", cursor, limit, keep)
    return SearchPage([{**p["row"], "hasError": p["hadError"]} for p in found.items],
                      found.next_cursor, found.searched_to)


async def _visitors_with_errors(store: Store, site_id: str, visitor_ids: list[str]) -> set[str]:
    if not visitor_ids:
        return set()
    return await error_records.visitors_with_errors(store, site_id, visitor_ids)


# The overview --------------------------------------------------------------------------------


def previous_period(first: date, last: date) -> tuple[date, date]:
    """The period of the same length that ends the day before `first`."""
    length = (last - first).days + 1
    return first - timedelta(days=length), first - timedelta(days=1)


def _change(now: float, before: float) -> float | None:
    """The relative change against the previous period; None when there was nothing before."""
    return round((now - before) / before, 4) if before else None


def _ranked(counts: Counter[Any], total: int | None = None) -> list[dict[str, Any]]:
    whole = total if total is not None else sum(counts.values())
    return [{"name": name, "count": count, "share": round(count / whole, 4) if whole else 0}
            for name, count in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))
            [:TOP_ITEMS]]


async def overview(store: Store, site_id: str, first: date, last: date, *,
                   settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """Visitors, pageviews, errors, leads and leads per visitor between `first` and `last`, each
    with the previous period's figure and the change; top pages, top errors, the pages with
    the most rage and dead clicks, and the visitors' countries and devices; the money figures
    in the site's reporting currency (`settings`; documents/commerce.py).

    Everything but the top errors comes from the daily figures (documents/rollups.py), which
    leave restricted visitors out as every other read does."""
    restricted = await visitors.restricted_visitor_ids(store, site_id)
    hidden: dict[str, Any] = {"visitorId": {"$nin": restricted}} if restricted else {}
    before_first, before_last = previous_period(first, last)
    days = await rollups.site_days(store, site_id, before_first, last)
    now, before = rollups.period(days, first, last), rollups.period(days, before_first,
                                                                   before_last)
    pages = await rollups.page_figures(store, site_id, first, last)
    sessions = await rollups.session_figures(store, site_id, first, last)
    start, end = _day_bounds(first, last)
    top_errors = await error_records.occurrences_counted_by(
        store, {"siteId": site_id, "occurredAt": {"$gte": start, "$lt": end}, **hidden},
        "$errorId", TOP_ITEMS)
    aggregates = {e["_id"]: e async for e in error_records.errors_matching(
        store, {"_id": {"$in": [row["_id"] for row in top_errors]}, "siteId": site_id},
        {"type": 1, "message": 1, "status": 1, "source": 1})}
    frustrated = sorted((row for row in pages if row["rageClicks"] or row["deadClicks"]),
                        key=lambda row: (-(row["rageClicks"] + row["deadClicks"]), row["_id"]))
    previously = _figures(before)
    currency = await commerce.reporting_currency(store, site_id, settings)
    return {
        "from": first.isoformat(), "to": last.isoformat(),
        "figuresAsOf": await derivation.oldest_unfolded(store, site_id),
        "previous": {"from": before_first.isoformat(), "to": before_last.isoformat()},
        "figures": {name: {"value": value, "previous": previously[name],
                           "change": _change(value, previously[name])}
                    for name, value in _figures(now).items()},
        "topPages": _ranked(Counter({row["_id"]: row["pageviews"] for row in pages
                                     if row["pageviews"]}), now.pageviews),
        "topErrors": [{"id": row["_id"], "count": row["count"], "lastSeen": row["last"],
                       "type": aggregates.get(row["_id"], {}).get("type"),
                       "message": aggregates.get(row["_id"], {}).get("message"),
                       "status": aggregates.get(row["_id"], {}).get("status")}
                      for row in top_errors],
        "frustration": [{"page": row["_id"], "rageClicks": row["rageClicks"],
                         "deadClicks": row["deadClicks"]} for row in frustrated[:TOP_ITEMS]],
        "countries": _ranked(now.countries, now.visitors),
        "devices": _ranked(now.devices, now.visitors),
        "commerce": commerce.money_overview(now, before, *currency),
        "traffic": _traffic(sessions),
    }


def _traffic(sessions: dict[str, Counter[str]]) -> dict[str, Any]:
    """Where the period's sessions came from and where they entered and left, each ranked
    with its share of all sessions (documents/visits.py says how a source is named)."""
    total = sessions["all"]["sessions"]
    return {"sessions": total,
            **{name: _ranked(sessions[dimension], total) for name, dimension in (
                ("sources", "source"), ("referrers", "referrer"),
                ("utmSources", "utmSource"), ("utmMediums", "utmMedium"),
                ("utmCampaigns", "utmCampaign"), ("entryPages", "entry"),
                ("exitPages", "exit"))}}


def _figures(period: rollups.Period) -> dict[str, float]:
    return {"visitors": period.visitors, "pageviews": period.pageviews,
            "errors": period.errors, "leads": period.leads,
            "leadsPerVisitor": round(period.leads / period.visitors, 4) if period.visitors
            else 0}
