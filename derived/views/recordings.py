"""The recordings pages: the recordings list and its filters, a recording's replay (its
servable segments) and its timeline of what happened during it.

A recording holds its visitor's country and device and its marks (the errors, rage and dead
clicks and leads during it), stored as they arrive (documents/recordings.py), so the recordings
list is one query with every filter in it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from derived.daily_figures import page_path
from derived.funnel_reports import MAX_FILTER_SESSIONS
from derived.views.paging import Page, readable, windowed_page
from documents import error_records, interactions, leads, recordings, sites, visitors
from documents.store import ASCENDING, Store
from errors import InvalidInput, NotFound
from instants import day_bounds, days_condition


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



async def search_recordings(store: Store, site_id: str, filters: RecordingFilters, *,
                            cursor: str | None, limit: int) -> Page:
    """The site's recordings, newest first, read newest window first on (siteId, startedAt);
    each row with the country and device it started with and how many errors, rage clicks,
    dead clicks and leads happened during it."""
    for mark in filters.marks:
        if mark not in recordings.MARKS:
            raise InvalidInput(f"has must name some of {', '.join(recordings.MARKS)}",
                               field="has")
    # The site (and the visitor) bound the read on an index ending in startedAt; the rest is
    # matched after (`paging.windowed_page`), a session filter's thousands of ids here.
    bounded: dict[str, Any] = {"siteId": site_id}
    rest: dict[str, Any] = {}
    restricted = await visitors.restricted_visitor_ids(store, site_id)
    if filters.visitor_id is not None:
        if filters.visitor_id in restricted:
            return Page([], None)
        bounded["visitorId"] = filters.visitor_id
    elif restricted:
        rest["visitorId"] = {"$nin": restricted}
    between = days_condition(filters.first, filters.last, await sites.site_clock(store, site_id))
    if filters.page:
        rest["pages.url"] = {"$regex": re.escape(filters.page), "$options": "i"}
    if filters.country:
        rest["country"] = filters.country.upper()
    if filters.device:
        rest["device"] = filters.device
    for mark in filters.marks:
        rest[f"marks.{mark}"] = {"$gt": 0}
    durations = []
    if filters.min_seconds is not None:
        durations.append({"$expr": {"$gte": [recordings.DURATION_MS, filters.min_seconds * 1000]}})
    if filters.max_seconds is not None:
        durations.append({"$expr": {"$lte": [recordings.DURATION_MS, filters.max_seconds * 1000]}})
    if durations:
        rest["$and"] = durations
    sessions = set(filters.sessions) if filters.sessions is not None else None
    found, next_cursor = await windowed_page(
        store, recordings.COLLECTION, bounded, rest, "startedAt", between.get("$gte"),
        between.get("$lt"), cursor, limit,
        keep=None if sessions is None else lambda recording: recording.get("sessionId") in sessions)
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
                     "visitorLabel": visitors.listed_label(site_id, recording.get("visitorId"),
                                                           names),
                     "marks": {mark: marks.get(mark) if isinstance(marks.get(mark), int) else 0
                               for mark in recordings.MARKS}})
    return rows


# A recording's timeline ----------------------------------------------------------------------

#: Events of one kind a timeline lists at most.
TIMELINE_ITEMS = 500
CLICK_KINDS = ("rage_click", "dead_click")


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


async def sessions_hit_by(store: Store, site_id: str, error_id: str, first: date, last: date
                          ) -> tuple[str, ...]:
    """The browser sessions the error hit between `first` and `last` (the recordings list's
    `error` filter: the sessions behind its revenue at risk), restricted visitors left out;
    at most MAX_FILTER_SESSIONS, the earliest hit first."""
    start, end = day_bounds(first, last, await sites.site_clock(store, site_id))
    return tuple(await error_records.sessions_hit(
        store, site_id, error_id, start, end,
        hidden=await visitors.restricted_visitor_ids(store, site_id), limit=MAX_FILTER_SESSIONS))
