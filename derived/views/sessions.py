"""The sessions page (issue 41 point 5): a site's sessions (its visits, derived/visits.py) found
by outcome, newest start first, paged by cursor; and what a saved segment (documents/segments.py)
leaves of the recordings and visitors lists and of a funnel's sessions.

Every filter is matched in the read of the visits (`visits.matching`), newest window of the
range first (`paging.windowed_page`): on the index of (siteId, filterKeys, startedAt) seeking
one filter key when one is key-matched, else (`converted=false`, a prefix) on (siteId,
startedAt), so every page is full but the last. A segment's filters and the page's own must
all hold.
Restricted visitors' sessions are left out; erased visitors' visits are gone.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import quote

from derived import journeys, visits
from derived.funnel_reports import MAX_FILTER_SESSIONS
from derived.views.errors import recording_at
from derived.views.paging import Page, not_restricted, readable, windowed_page
from documents import commerce, segments, sites, visitors
from documents.segments import SessionFilters
from documents.store import Store
from errors import InvalidInput, NotFound
from instants import day_bounds


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# Segments -------------------------------------------------------------------------------------


async def segment_filters(store: Store, site_id: str, segment_id: str | None
                          ) -> SessionFilters | None:
    """The filters of the site's segment a list names by `segment`; None when it names none."""
    if segment_id is None:
        return None
    try:
        segment = await segments.find_segment(store, site_id, segment_id)
    except NotFound:
        raise InvalidInput("segment names none of the site's segments", field="segment") from None
    return segments.filters_of(segment)


async def segment_condition(store: Store, site: dict[str, Any], segment_id: str | None
                            ) -> dict[str, Any] | None:
    """The visits condition of the site's segment (`visits.matching`), for a funnel report;
    None when no segment is named."""
    filters = await segment_filters(store, site["_id"], segment_id)
    if filters is None:
        return None
    return visits.matching(filters, commerce.reporting_currency(site)[0])


async def segment_sessions(store: Store, site: dict[str, Any], segment_id: str | None,
                           first: date, last: date) -> tuple[str, ...] | None:
    """The browser sessions of the segment that started between `first` and `last` (the
    recordings list's `segment` filter), the newest MAX_FILTER_SESSIONS; None without one."""
    within = await segment_condition(store, site, segment_id)
    if within is None:
        return None
    start, end = day_bounds(first, last, sites.day_clock(site))
    hidden = await visitors.restricted_visitor_ids(store, site["_id"])
    return tuple(await visits.session_ids_matching(store, site["_id"], within, start, end,
                                                   hidden=hidden, limit=MAX_FILTER_SESSIONS))


async def segment_visitors(store: Store, site: dict[str, Any], segment_id: str | None
                           ) -> tuple[str, ...] | None:
    """The visitors with a kept session of the segment (the visitors list's `segment`
    filter), those of the newest sessions first, at most MAX_FILTER_SESSIONS; None without
    one."""
    within = await segment_condition(store, site, segment_id)
    if within is None:
        return None
    hidden = await visitors.restricted_visitor_ids(store, site["_id"])
    return tuple(await visits.visitor_ids_matching(store, site["_id"], within, hidden=hidden,
                                                   limit=MAX_FILTER_SESSIONS))


# Rows -----------------------------------------------------------------------------------------


def session_row(site_id: str, visit: dict[str, Any], currency: str | None,
                recording: dict[str, Any] | None) -> dict[str, Any]:
    """A visit as a row of the sessions list: who, when, for how long, where it entered and
    left, where it came from, its outcome in the reporting `currency` (paid orders in other
    currencies apart), the errors and frustrated pages it met, and the dashboard's paths to
    its visitor and replay."""
    journey = journeys.of(visit)
    paid = visits.paid_values(visit)
    started, ended = _aware(visit["startedAt"]), _aware(visit["endedAt"])
    source = visit.get("source") or {}
    app = f"/app/sites/{site_id}"
    visitor = visit["visitorId"]
    return {
        "id": visit["_id"],
        "sessionId": visit.get("sessionId"),
        "visitorId": visitor,
        "startedAt": started,
        "endedAt": ended,
        "duration": round((ended - started).total_seconds(), 1),
        "pageviews": int(visit.get("pageviews") or 0),
        "entry": visit.get("entry"),
        "exit": visit.get("exit"),
        "source": visits.source_label(source),
        "utmCampaign": source.get("utmCampaign"),
        "country": visit.get("country"),
        "device": visit.get("device"),
        "outcome": {
            "converted": bool(paid),
            "orders": sum(1 for entry in journey["orders"] if entry[3] > 0),
            "currency": currency,
            "value": commerce.decimal_text(paid[currency], currency)
            if currency in paid else None,
            "otherCurrencies": [{"currency": other, "value": commerce.decimal_text(value, other)}
                                for other, value in sorted(paid.items()) if other != currency],
        },
        "errors": len(journey["errors"]),
        "frustrated": len(journey["frustrated"]),
        "recordingId": recording["_id"] if recording is not None else None,
        "links": {
            "visitor": f"{app}/visitors/{quote(visitor, safe='')}",
            "replay": f"{app}/recordings/{recording['_id']}" if recording is not None else None,
        },
    }


async def _recording_of(store: Store, site_id: str, visit: dict[str, Any]
                        ) -> dict[str, Any] | None:
    """The replayable recording running when the session started, else when it ended."""
    for at in (visit.get("startedAt"), visit.get("endedAt")):
        if isinstance(at, datetime):
            found = await recording_at(store, site_id, visit.get("visitorId"),
                                       visit.get("sessionId"), _aware(at))
            if found is not None:
                return found
    return None


async def session_rows(store: Store, site_id: str, found: list[dict[str, Any]],
                       currency: str | None) -> list[dict[str, Any]]:
    """The visits as rows with their recordings and visitors' labels; a visit that cannot be
    read is left out (logged by `readable`)."""
    rows = []
    for visit in found:
        recording = await _recording_of(store, site_id, visit)
        rows.extend(readable([visit], lambda v, r=recording: session_row(site_id, v, currency, r),
                             "session"))
    names = await visitors.display_names(store, [(site_id, row["visitorId"]) for row in rows])
    return [{**row, "visitorLabel": visitors.listed_label(site_id, row["visitorId"], names)}
            for row in rows]


# The list -------------------------------------------------------------------------------------


async def list_sessions(store: Store, site: dict[str, Any], first: date, last: date,
                        filters: SessionFilters, *, segment_id: str | None, cursor: str | None,
                        limit: int) -> Page:
    """The site's sessions that started between `first` and `last` and meet the filters and
    the named segment's, newest start first (then by id), restricted visitors left out."""
    site_id = site["_id"]
    currency = commerce.reporting_currency(site)[0]
    clauses = list(visits.matching(filters, currency).get("$and", []))
    saved = await segment_filters(store, site_id, segment_id)
    if saved is not None:
        clauses += visits.matching(saved, currency).get("$and", [])
    start, end = day_bounds(first, last, sites.day_clock(site))
    bounded, rest = visits.bounded_and_rest(site_id, {"$and": clauses} if clauses else None,
                                            await not_restricted(store, site_id))
    found, next_cursor = await windowed_page(store, visits.COLLECTION, bounded, rest,
                                             "startedAt", start, end, cursor, limit)
    return Page(await session_rows(store, site_id, found, currency), next_cursor)
