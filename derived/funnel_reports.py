"""How the sessions of a date range go through a funnel (its definition: documents/funnels.py).

A report reads one document per session of the range, and of the previous period for its
conversion: the visits that started in it (derived/visits.py, one indexed query each), each
with the journey the fold joined to it (its commerce steps and paid orders,
derived/journeys.py), restricted visitors left out. Visits are the visitor's data, so erasure
and restriction are exact. What a report reads
(`read_sessions`) is read on the event loop; what it then works out (`paths_through`,
`report`) is CPU only and goes through the caller's offload, a report thread with a time
limit (decision "Issue 39: reports that never freeze the server"). A page step's matcher is
passed in (privacy/exclusion.py). The rules (decision "Issue 31" in docs/decisions.md):

* a session is a browser session; it is in the range when it started on one of its days;
* a session reaches step 1 at the first moment it matches it, and step k at the first moment
  at or after it reached step k-1 that it matches step k; steps are not skipped;
* the window is the session: its pages (the first `visits.MAX_PAGES`) and the commerce events
  the shop sent with its session id; an event sent without one (the plugin's) belongs to the
  visitor's visit that started last before it, if it came at most `journeys.LATE` after that
  visit's last pageview;
* the time between two steps is the time between the moments they were reached; the median
  is over the sessions that reached the later step;
* conversion over time counts each session on the site's day it started: per day for a range of
  up to `DAILY_UP_TO_DAYS` days, per ISO week (Monday to Sunday, the first and last cut to the
  range) for a longer one; the previous period is the one of the same length just before
  (derived/views/overview.py), its sessions gone through the funnel as it is defined now, and
  the change is the difference of the two conversions (in points, not relative);
* visits go with the pageviews' retention ("activity", documents/retention.py) while the daily
  figures keep their counts, so a report over a range the last purge reached says from when
  its sessions are gone (`purgedBefore`, `purged_before`).
"""

from __future__ import annotations

import asyncio
import statistics
from bisect import bisect_right
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from derived import journeys, visits
from documents import retention, sites
from documents.funnels import PRODUCT_VIEW, find_funnel, step_view, view
from documents.store import Store
from documents.visitors import restricted_visitor_ids
from errors import InvalidInput
from instants import day_bounds, previous_period

BREAKDOWN_ITEMS = 10
BREAKDOWNS = ("device", "country", "source")
#: Sessions a recordings filter by source or funnel step may name; beyond that, the first
#: found (the earliest started) are kept.
MAX_FILTER_SESSIONS = 10_000
#: A range of up to this many days has its conversion day by day; a longer one week by week,
#: which keeps the longest range (366 days) to 53 points a chart can still show.
DAILY_UP_TO_DAYS = 31

#: Whether a URL matches a pattern of the excluded-URL syntax: (url, pattern) -> bool.
PageMatch = Callable[[str, str], bool]
#: Called now and then by a computation over what a report read; raises when the report's time
#: is up (the caller's pool says how), so a computation past its limit stops.
Checkpoint = Callable[[], None]
#: Runs a computation, given its checkpoint, off the event loop, within the report's time
#: limit (tasks/report_pool.py): offload(lambda check: ...) -> its result.
Offload = Callable[[Callable[[Checkpoint], Any]], Awaitable[Any]]


@dataclass(frozen=True)
class SessionPath:
    """One session of the range and the moments it reached the funnel's steps."""

    visitor_id: str
    session_id: str | None
    device: str
    country: str
    source: str
    reached: tuple[datetime, ...]
    #: When the visit started, and its day (the site's), which conversion over time counts
    #: the session on.
    started: datetime
    day: date
    #: Every commerce step the session's shop sent, in time order (kind, at).
    commerce: tuple[tuple[str, datetime], ...] = ()


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _moments(step: dict[str, Any], visit: dict[str, Any],
             steps: list[tuple[str, datetime]], page_matches: PageMatch) -> list[datetime]:
    """When the session matched the step, oldest first."""
    if step["kind"] == "page":
        return [_aware(page["at"]) for page in visit.get("pages") or []
                if page.get("url") and page_matches(page["url"], step["pattern"])]
    if step["event"] == PRODUCT_VIEW:
        return [_aware(page["at"]) for page in visit.get("pages") or [] if page.get("product")]
    return [_aware(at) for kind, at in steps if kind == step["event"]]


def walk(moments: list[list[datetime]]) -> tuple[datetime, ...]:
    """The moments each step was reached: the first match of step 1, then of each next step
    the first match not before the step before it; stops at the first step not reached."""
    reached: list[datetime] = []
    for matches in moments:
        after = reached[-1] if reached else None
        found = next((at for at in sorted(matches) if after is None or at >= after), None)
        if found is None:
            break
        reached.append(found)
    return tuple(reached)


@dataclass(frozen=True)
class RangeSessions:
    """What a report over a range reads: the visits that started in it, each with its
    journey (its commerce steps), restricted visitors left out."""

    visits: list[dict[str, Any]]


async def read_sessions(store: Store, site_id: str, first: date, last: date, *,
                        source: str | None = None, within: dict[str, Any] | None = None
                        ) -> RangeSessions:
    """Every session that started between `first` and `last` (of `source`, and of a segment's
    condition `within`, when given), one visit document each; restricted visitors left out."""
    hidden = await restricted_visitor_ids(store, site_id)
    clock = await sites.site_clock(store, site_id)
    found = [visit async for visit in visits.visits_between(store, site_id, first, last,
                                                            clock=clock, hidden=hidden,
                                                            source=source, within=within)]
    return RangeSessions(found)


def _no_limit() -> None:
    return None


def paths_through(funnel: dict[str, Any], sessions: RangeSessions, *, page_matches: PageMatch,
                  check: Checkpoint = _no_limit) -> list[SessionPath]:
    """How far each session went through the funnel: CPU only, over what was read, calling
    `check` between sessions."""
    paths = []
    for visit in sessions.visits:
        check()
        steps = journeys.step_moments(visit)
        reached = walk([_moments(step, visit, steps, page_matches) for step in funnel["steps"]])
        paths.append(SessionPath(visit["visitorId"], visit.get("sessionId"),
                                 visit.get("device") or "unknown",
                                 visit.get("country") or "unknown",
                                 visits.source_label(visit.get("source")), reached,
                                 _aware(visit["startedAt"]), date.fromisoformat(visit["day"]),
                                 tuple(steps)))
    return paths


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _median_seconds(paths: list[SessionPath], step: int) -> float | None:
    gaps = [(path.reached[step] - path.reached[step - 1]).total_seconds() for path in paths
            if len(path.reached) > step]
    return round(statistics.median(gaps), 1) if gaps else None


async def purged_before(store: Store, site_id: str, first: date) -> datetime | None:
    """The instant before which the last purge removed the site's visits, when the days from
    `first` on start before it; else None. It is the last purge's cutoff: when an earlier purge
    ran under a shorter retention, what it removed beyond that is not recorded (retention
    status keeps the last run only)."""
    status = (await retention.site_status(store, site_id)).get("activity") or {}
    if not status.get("lastPurgeAt") or not status.get("removedTotal"):
        return None
    cutoff = retention.cutoff(_aware(status["lastPurgeAt"]), int(status["retentionDays"]))
    clock = await sites.site_clock(store, site_id)
    return cutoff if day_bounds(first, first, clock)[0] < cutoff else None


async def funnel_report(store: Store, site_id: str, funnel: dict[str, Any], first: date,
                        last: date, *, source: str | None, page_matches: PageMatch,
                        offload: Offload, within: dict[str, Any] | None = None
                        ) -> dict[str, Any]:
    """The funnel's report over the range and its conversion in the previous period: both
    read here, worked out through `offload`; `purgedBefore` when the purge reached either
    period. With `within` (a saved segment's condition, `visits.matching`), only the sessions
    of the segment are counted, in both periods."""
    before_first, before_last = previous_period(first, last)
    sessions, before, purged = await asyncio.gather(
        read_sessions(store, site_id, first, last, source=source, within=within),
        read_sessions(store, site_id, before_first, before_last, source=source,
                      within=within),
        purged_before(store, site_id, before_first))

    def work_out(check: Checkpoint) -> dict[str, Any]:
        paths = paths_through(funnel, sessions, page_matches=page_matches, check=check)
        previous = paths_through(funnel, before, page_matches=page_matches, check=check)
        return report(funnel, paths, first, last, source, previous=previous)

    return {**await offload(work_out), "purgedBefore": purged}


def _periods(first: date, last: date) -> tuple[str, list[tuple[date, date]]]:
    """The unit and the (first, last) days of each point of conversion over time."""
    if (last - first).days < DAILY_UP_TO_DAYS:
        return "day", [(first + timedelta(days=n),) * 2 for n in range((last - first).days + 1)]
    periods = []
    start = first
    while start <= last:
        end = min(start + timedelta(days=6 - start.weekday()), last)
        periods.append((start, end))
        start = end + timedelta(days=1)
    return "week", periods


def _conversion(paths: list[SessionPath], count: int) -> dict[str, Any]:
    """Sessions that entered the funnel (reached step 1), completed it, and the ratio."""
    entered = sum(1 for path in paths if path.reached)
    completed = sum(1 for path in paths if len(path.reached) == count)
    return {"entered": entered, "completed": completed, "conversion": _ratio(completed, entered)}


def _over_time(paths: list[SessionPath], count: int, first: date, last: date
               ) -> dict[str, Any]:
    """Conversion per day or week of the range, each session on the site's day it started."""
    unit, periods = _periods(first, last)
    starts = [start for start, _ in periods]
    grouped: list[list[SessionPath]] = [[] for _ in periods]
    for path in paths:
        at = bisect_right(starts, path.day) - 1
        if at >= 0:
            grouped[at].append(path)
    return {"unit": unit, "periods": [
        {"from": start.isoformat(), "to": end.isoformat(), **_conversion(group, count)}
        for (start, end), group in zip(periods, grouped, strict=True)]}


def report(funnel: dict[str, Any], paths: list[SessionPath], first: date, last: date,
           source: str | None, *, previous: list[SessionPath]) -> dict[str, Any]:
    """Per step: sessions that reached it, conversion from step 1 and from the step before,
    the sessions that stopped there (drop-off) and the median time from the step before; the
    same counts by device, country and source; conversion per day or week; and the previous
    period's conversion (`previous`: its sessions' paths) with the change."""
    count = len(funnel["steps"])
    reached = [sum(1 for path in paths if len(path.reached) > k) for k in range(count)]
    steps = []
    for k, step in enumerate(funnel["steps"]):
        steps.append({
            "index": k + 1, **step_view(step), "sessions": reached[k],
            "conversion": _ratio(reached[k], reached[0]),
            "fromPrevious": _ratio(reached[k], reached[k - 1]) if k else None,
            "dropOff": reached[k] - reached[k + 1] if k + 1 < count else 0,
            "medianSecondsFromPrevious": _median_seconds(paths, k) if k else None,
        })
    breakdown = {}
    for name in BREAKDOWNS:
        entered = Counter(getattr(path, name) for path in paths if path.reached)
        rows = []
        for value, _ in sorted(entered.items(), key=lambda kv: (-kv[1], kv[0]))[
                :BREAKDOWN_ITEMS]:
            mine = [path for path in paths if getattr(path, name) == value]
            counts = [sum(1 for path in mine if len(path.reached) > k) for k in range(count)]
            rows.append({"name": value, "sessions": counts,
                         "conversion": _ratio(counts[-1], counts[0])})
        breakdown[name] = rows
    now = _conversion(paths, count)
    before_first, before_last = previous_period(first, last)
    before = _conversion(previous, count)
    change = (round(now["conversion"] - before["conversion"], 4)
              if now["conversion"] is not None and before["conversion"] is not None else None)
    return {"funnel": view(funnel), "from": first.isoformat(), "to": last.isoformat(),
            "source": source, "sessions": len(paths), "steps": steps, "breakdown": breakdown,
            **now, "overTime": _over_time(paths, count, first, last),
            "previous": {"from": before_first.isoformat(), "to": before_last.isoformat(),
                         "sessions": len(previous), **before},
            "conversionChange": change}


def stopped_at(paths: list[SessionPath], step: int) -> list[str]:
    """Session ids of the sessions that reached step `step` (1-based) and not the next."""
    return sorted({path.session_id for path in paths
                   if len(path.reached) == step and path.session_id})


async def recording_sessions(store: Store, site_id: str, first: date, last: date, *,
                             source: str | None, funnel_id: str | None, step: int | None,
                             page_matches: PageMatch, offload: Offload) -> tuple[str, ...]:
    """The session ids a recordings filter leaves: the range's sessions from `source` and,
    with `funnel_id`, those that reached its step `step` and not the next."""
    if funnel_id is None:
        start, end = day_bounds(first, last, await sites.site_clock(store, site_id))
        return tuple(await visits.session_ids_from(store, site_id, source or visits.DIRECT,
                                                   start, end, limit=MAX_FILTER_SESSIONS))
    funnel = await find_funnel(store, site_id, funnel_id)
    if step is None or not 1 <= step <= len(funnel["steps"]):
        raise InvalidInput("stoppedAt names a step of the funnel", field="stoppedAt")
    sessions = await read_sessions(store, site_id, first, last, source=source)

    def work_out(check: Checkpoint) -> list[str]:
        return stopped_at(paths_through(funnel, sessions, page_matches=page_matches, check=check),
                          step)

    stopped = await offload(work_out)
    return tuple(stopped[:MAX_FILTER_SESSIONS])
