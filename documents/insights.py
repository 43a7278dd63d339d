"""Dashboard reads of issue 21: a recording's timeline, the recording of an error's moment,
recordings and visitors searched by what happened, and the overview over a date range.

A recording holds its visitor's country and device and its marks (the errors, rage and dead
clicks and leads during it), stored as they arrive (documents/recordings.py), so the recordings
list is one query with every filter in it. The visitors list filtered by "met an error", which a
profile does not hold, reads visitors in (lastSeen, `_id`) order a batch at a time, looks the
errors up on the occurrences' index, and stops after SEARCH_SCAN of them: a page can then come
back short, with a cursor to search further (decision "Issue 21" in docs/decisions.md).
Restricted visitors are left out everywhere.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from documents import (
    commerce,
    derivation,
    error_records,
    interactions,
    leads,
    queries,
    recordings,
    rollups,
    visitors,
)
from documents.rollups import page_path
from documents.store import ASCENDING, DESCENDING, Store
from errors import InvalidInput

# The indexes these reads need are declared in documents/queries.py, with the dashboard API's.

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
    recording = await queries.replayable_recording(store, site_id, recording_id)
    low, high = recordings.window(recording)
    visitor_id = recording.get("visitorId")
    events: list[dict[str, Any]] = [
        {"kind": "page", "at": page["at"], "label": page_path(page.get("url")) or "a page",
         "url": page.get("url")} for page in recording.get("pages") or []
        if isinstance(page, dict) and isinstance(page.get("at"), datetime)]
    if visitor_id:
        occurrences = store.collection(error_records.OCCURRENCES).find(
            {"siteId": site_id, "visitorId": visitor_id,
             "occurredAt": {"$gte": low, "$lte": high}},
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
    return {"recording": queries.recording_summary(recording), "events": events}


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
    await queries.find_error(store, site_id, error_id)
    start, end = queries._day_bounds(first, last)
    restricted = await visitors.restricted_visitor_ids(store, site_id)
    match: dict[str, Any] = {"siteId": site_id, "errorId": error_id,
                             "occurredAt": {"$gte": start, "$lt": end}}
    if restricted:
        match["visitorId"] = {"$nin": restricted}
    latest = store.collection(error_records.OCCURRENCES).find(
        match, {"occurredAt": 1, "visitorId": 1, "sessionId": 1, "url": 1},
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
        batch, after = await queries.keyset_page(store, collection, filter_, sort_field,
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
                                  queries.encode_cursor(last[sort_field], last["_id"]))
        if after is None:
            return SearchPage(kept, None)
        position = after
    # Searched as far as one request may: hand back what was found and where to go on.
    return SearchPage(kept, position, queries.decode_cursor(position)[0])


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
                            cursor: str | None, limit: int) -> queries.Page:
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
            return queries.Page([], None)
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
    found, next_cursor = await queries.keyset_page(store, recordings.COLLECTION, filter_,
                                                   "startedAt", cursor, limit)
    return queries.Page(await recording_rows(store, site_id, found), next_cursor)


async def recording_rows(store: Store, site_id: str, batch: list[dict[str, Any]]
                         ) -> list[dict[str, Any]]:
    """The recordings as list rows with the country, device and marks each holds and the
    visitor's display name (one lookup by profile `_id` for them all); a recording that cannot
    be read is left out (logged by `queries.readable`)."""
    readable = queries.readable(batch, lambda r: (r, queries.recording_summary(r)), "recording")
    names = await visitors.display_names(store, [
        (site_id, r["visitorId"]) for r, _ in readable if isinstance(r.get("visitorId"), str)])
    rows = []
    for recording, summary in readable:
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
        filter_.update(queries.visitor_search(filters.q))
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
        shaped = queries.readable(batch, lambda p: {**p, "row": queries.visitor_summary(p)},
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
    return set(await store.collection(error_records.OCCURRENCES).distinct(
        "visitorId", {"siteId": site_id, "visitorId": {"$in": visitor_ids}}))


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
    start, end = queries._day_bounds(first, last)
    top_errors = await store.collection(error_records.OCCURRENCES).aggregate([
        {"$match": {"siteId": site_id, "occurredAt": {"$gte": start, "$lt": end}, **hidden}},
        {"$group": {"_id": "$errorId", "count": {"$sum": 1}, "last": {"$max": "$occurredAt"}}},
        {"$sort": {"count": DESCENDING, "last": DESCENDING, "_id": ASCENDING}},
        {"$limit": TOP_ITEMS},
    ]).to_list(None)
    aggregates = {e["_id"]: e async for e in store.collection(error_records.ERRORS).find(
        {"_id": {"$in": [row["_id"] for row in top_errors]}, "siteId": site_id},
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
