"""The errors pages: the errors list and one error in full, the errors that occurred over a
range of days ranked with their trend and revenue at risk, one error's breakdown over the
range, and the recordings that show its latest occurrences.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

from derived import conversion_impact, daily_figures, journeys
from derived.views.paging import Page, keyset_page, not_restricted, readable
from documents import error_records, recordings, sites, visitors
from documents.store import DESCENDING, Store
from errors import InvalidInput, NotFound
from instants import day_bounds

ERROR_STATUSES = ("open", "resolved", "ignored")


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


def _days(first: date, last: date) -> list[str]:
    return [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]


def _day_key(field: str) -> dict[str, Any]:
    return {"$dateToString": {"format": "%Y-%m-%d", "date": field}}


async def ranked_errors(store: Store, site_id: str, *, first: date, last: date,
                        status: str | None, source: str | None, page: str | None, sort: str,
                        limit: int, impacts: dict[str, dict[str, Any]] | None = None
                        ) -> dict[str, Any]:
    """The site's errors that occurred between `first` and `last` (UTC days), with their
    occurrences, visitors affected and a per-day trend in that range, sorted by `sort`.
    `impacts` (derived/conversion_impact.py) gives each error its revenue at risk; sorted
    by it, the significant figures come first, largest first, then the errors by sessions hit.

    Counted from the errors' folded day figures (`daily_figures.error_figures`: errors × days
    documents, whatever the traffic), or, on pages starting with `page`, from the occurrences
    there; status and source come from each error's aggregate.
    """
    if sort not in ERROR_SORTS:
        raise InvalidInput(f"sort must be one of {', '.join(ERROR_SORTS)}", field="sort")
    if page:
        figures = await _figures_on_pages(store, site_id, first, last, page)
    else:
        figures = await daily_figures.error_figures(store, site_id, first, last)
    aggregate_filter: dict[str, Any] = {"_id": {"$in": sorted(figures)}, "siteId": site_id}
    if status:
        aggregate_filter.update(_error_filter(site_id, status))
    if source:
        aggregate_filter["source"] = source
    errors = {error["_id"]: error async for error in error_records.errors_matching(
        store, aggregate_filter, error_records.WITHOUT_JOB_IDS)}
    impacts = impacts or {}
    rows = [{"_id": error_id, "occurrences": counted.occurrences,
             "visitors": counted.visitors, "firstSeen": counted.first_seen,
             "lastSeen": counted.last_seen, "trend": counted.per_day,
             "revenueAtRisk": (impacts.get(error_id) or {}).get("revenueAtRisk"),
             "sessionsHit": (impacts.get(error_id) or {}).get("affectedSessions", 0)}
            for error_id, counted in figures.items() if error_id in errors]
    if sort == "revenueAtRisk":
        rows.sort(key=lambda row: (row["revenueAtRisk"] is not None, row["revenueAtRisk"] or 0,
                                   row["sessionsHit"], _moment(row["lastSeen"]), row["_id"]),
                  reverse=True)
    else:
        rows.sort(key=lambda row: (_moment(row[sort]) if sort == "lastSeen" else row[sort],
                                   _moment(row["lastSeen"]), row["_id"]), reverse=True)
    days = _days(first, last)
    return {"from": first.isoformat(), "to": last.isoformat(), "days": days, "items": [{
        **error_summary(errors[row["_id"]]),
        "occurrencesInRange": row["occurrences"], "visitorsAffected": row["visitors"],
        "firstSeenInRange": row["firstSeen"], "lastSeenInRange": row["lastSeen"],
        "trend": [row["trend"].get(day, 0) for day in days],
        "impact": impacts.get(row["_id"]) or conversion_impact.no_impact(None),
    } for row in rows[:limit]]}


def _moment(moment: datetime | None) -> datetime:
    """A moment to sort by, an unknown one first (a day folded before moments were kept)."""
    return journeys.aware(moment) if moment is not None else datetime.min.replace(tzinfo=UTC)


async def _figures_on_pages(store: Store, site_id: str, first: date, last: date, page: str
                            ) -> dict[str, daily_figures.ErrorFigures]:
    """Each error's figures over the range counted from its occurrences on pages starting with
    `page` (the folded figures are not kept per page), restricted visitors left out."""
    start, end = day_bounds(first, last, await sites.site_clock(store, site_id))
    match: dict[str, Any] = {"siteId": site_id, "occurredAt": {"$gte": start, "$lt": end},
                             "page": {"$regex": "^" + re.escape(page)},
                             **await not_restricted(store, site_id)}
    figures = {row["_id"]: daily_figures.ErrorFigures(
        row["occurrences"], row["visitors"], row["firstSeen"], row["lastSeen"])
        for row in await error_records.occurrences_per_error(store, match)}
    per_day = error_records.occurrences_per_error_and_day(store, match, _day_key("$occurredAt"))
    async for item in per_day:
        figures[item["_id"]["error"]].per_day[item["_id"]["day"]] = item["count"]
    return figures


async def error_breakdown(store: Store, site_id: str, error_id: str, *, first: date,
                          last: date, impacts: dict[str, dict[str, Any]] | None = None
                          ) -> dict[str, Any]:
    """One error between `first` and `last`: occurrences per day, visitors affected (count and
    the most affected, named), pages, browsers, systems and devices with their shares, the
    latest occurrences with their anonymised context, and its revenue at risk from `impacts`
    (derived/conversion_impact.py) with the method in one sentence."""
    await find_error(store, site_id, error_id)
    start, end = day_bounds(first, last, await sites.site_clock(store, site_id))
    match = {"siteId": site_id, "errorId": error_id, "occurredAt": {"$gte": start, "$lt": end},
             **await not_restricted(store, site_id)}

    async def counted(key: Any, limit: int | None = BREAKDOWN_ITEMS) -> list[dict[str, Any]]:
        return await error_records.occurrences_counted_by(store, match, key, limit)

    per_day = {row["_id"]: row["count"] for row in await counted(_day_key("$occurredAt"), None)}
    total = sum(per_day.values())
    visitor_rows = [row for row in await counted("$visitorId", None) if row["_id"]]
    latest = await error_records.occurrences_matching(store, match, None).sort(
        "occurredAt", DESCENDING).limit(LATEST_OCCURRENCES).to_list(None)
    named = [row["_id"] for row in visitor_rows[:AFFECTED_VISITORS]]
    named += [o["visitorId"] for o in latest if isinstance(o.get("visitorId"), str)]
    names = await visitors.display_names(store, [(site_id, visitor) for visitor in named])

    def shares(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"name": row["_id"], "count": row["count"],
                 "share": round(row["count"] / total, 4) if total else 0} for row in rows]

    return {
        "from": first.isoformat(), "to": last.isoformat(), "occurrences": total,
        "impact": (impacts or {}).get(error_id) or conversion_impact.no_impact(None),
        "method": conversion_impact.METHOD,
        "days": [{"day": day, "count": per_day.get(day, 0)} for day in _days(first, last)],
        "visitorsAffected": len(visitor_rows),
        "visitors": [{"visitorId": row["_id"], "occurrences": row["count"],
                      "lastSeen": row["last"],
                      "displayName": names.get((site_id, row["_id"])),
                      "visitorLabel": visitors.listed_label(site_id, row["_id"], names)}
                     for row in visitor_rows[:AFFECTED_VISITORS]],
        "pages": shares(await counted("$page")),
        "browsers": shares(await counted("$browser")),
        "systems": shares(await counted("$os")),
        "devices": shares(await counted("$deviceType")),
        "latest": [{"id": o["_id"], "occurredAt": o["occurredAt"], "url": o.get("url"),
                    "page": o.get("page"), "visitorId": o.get("visitorId"),
                    "visitorLabel": visitors.listed_label(site_id, o.get("visitorId"), names),
                    "sessionId": o.get("sessionId"), "browser": o.get("browser"),
                    "os": o.get("os"), "deviceType": o.get("deviceType"),
                    "context": o.get("context") or {}} for o in latest],
    }


# The recording of an error's moment ----------------------------------------------------------

#: How many of an error's latest occurrences are looked at for a recording of their moment.
REPLAY_CANDIDATES = 50


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
    start, end = day_bounds(first, last, await sites.site_clock(store, site_id))
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
