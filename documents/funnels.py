"""Funnels: the shop funnel built in, the ones a site's owner defines, and how the sessions of
a date range go through them.

Definitions (`funnels`, one document per owner-defined funnel) have 2 to MAX_STEPS steps; a
step is a page pattern in the excluded-URL syntax (privacy/exclusion.py; the pattern check and
the matcher are passed in, as documents/ imports nothing of privacy/) or an event: a product
view (a pageview attributed to a product), an add to cart, a checkout started or a paid order
(documents/commerce.py).

A report reads one document per session of the range: the visits that started in it
(documents/visits.py, one indexed query), each with the journey the fold joined to it (its
commerce steps and paid orders, documents/journeys.py), restricted visitors left out. Visits
are the visitor's data, so erasure and restriction are exact. What a report reads
(`read_sessions`) is read on the event loop; what it then works out (`paths_through`,
`report`) is CPU only and goes through the caller's offload, a report thread with a time
limit (decision "Issue 39: reports that never freeze the server"). The rules (decision
"Issue 31" in docs/decisions.md):

* a session is a browser session; it is in the range when it started on one of its days;
* a session reaches step 1 at the first moment it matches it, and step k at the first moment
  at or after it reached step k-1 that it matches step k; steps are not skipped;
* the window is the session: its pages (the first `visits.MAX_PAGES`) and the commerce events
  the shop sent with its session id; an event sent without one (the plugin's) belongs to the
  visitor's visit that started last before it, if it came at most `journeys.LATE` after that
  visit's last pageview;
* the time between two steps is the time between the moments they were reached; the median
  is over the sessions that reached the later step.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from documents import commerce, journeys, visits
from documents.accounts import new_id
from documents.store import ASCENDING, Index, Store
from documents.visitors import restricted_visitor_ids
from errors import InvalidInput, NotFound

COLLECTION = "funnels"
MIN_STEPS, MAX_STEPS = 2, 8
#: A site's own funnels: each report reads the range's visits, so the list stays short.
MAX_FUNNELS_PER_SITE = 50
PRODUCT_VIEW = journeys.PRODUCT_VIEW
#: The events a step can be, in the shop funnel's order.
STEP_EVENTS = (PRODUCT_VIEW, commerce.ADD_TO_CART, commerce.CHECKOUT_STARTED, commerce.PAID)
EVENT_LABELS = {PRODUCT_VIEW: "Product view", commerce.ADD_TO_CART: "Add to cart",
                commerce.CHECKOUT_STARTED: "Checkout", commerce.PAID: "Order"}
SHOP_FUNNEL_ID = "shop"
BREAKDOWN_ITEMS = 10
BREAKDOWNS = ("device", "country", "source")
#: Sessions a recordings filter by source or funnel step may name; beyond that, the first
#: found (the earliest started) are kept.
MAX_FILTER_SESSIONS = 10_000

INDEXES = [
    Index(COLLECTION, (("siteId", ASCENDING), ("createdAt", ASCENDING))),
]

PatternCheck = Callable[[str], str]
#: Whether a URL matches a pattern of the excluded-URL syntax: (url, pattern) -> bool.
PageMatch = Callable[[str, str], bool]
#: Called now and then by a computation over what a report read; raises when the report's time
#: is up (the caller's pool says how), so a computation past its limit stops.
Checkpoint = Callable[[], None]
#: Runs a computation, given its checkpoint, off the event loop, within the report's time
#: limit (tasks/report_pool.py): offload(lambda check: ...) -> its result.
Offload = Callable[[Callable[[Checkpoint], Any]], Awaitable[Any]]


def shop_funnel() -> dict[str, Any]:
    """The built-in funnel: product view, add to cart, checkout, order."""
    return {"_id": SHOP_FUNNEL_ID, "name": "Shop", "builtIn": True, "createdAt": None,
            "updatedAt": None,
            "steps": [{"kind": "event", "event": event, "label": EVENT_LABELS[event]}
                      for event in STEP_EVENTS]}


def view(funnel: dict[str, Any]) -> dict[str, Any]:
    """A definition as the API shows it."""
    return {"id": funnel["_id"], "name": funnel["name"], "builtIn": bool(funnel.get("builtIn")),
            "steps": [_step_view(step) for step in funnel["steps"]],
            "createdAt": funnel.get("createdAt"), "updatedAt": funnel.get("updatedAt")}


def _step_view(step: dict[str, Any]) -> dict[str, Any]:
    shown = {"kind": step["kind"], "label": step_label(step)}
    if step["kind"] == "page":
        shown["pattern"] = step["pattern"]
    else:
        shown["event"] = step["event"]
    return shown


def step_label(step: dict[str, Any]) -> str:
    """The step's name: the owner's label, else the event's name or the pattern."""
    if step.get("label"):
        return str(step["label"])
    return EVENT_LABELS[step["event"]] if step["kind"] == "event" else step["pattern"]


def checked_steps(steps: list[dict[str, Any]], check_pattern: PatternCheck
                  ) -> list[dict[str, Any]]:
    """The steps with their patterns normalised; InvalidInput names what does not fit."""
    if not MIN_STEPS <= len(steps) <= MAX_STEPS:
        raise InvalidInput(f"a funnel has {MIN_STEPS} to {MAX_STEPS} steps", field="steps")
    checked = []
    for index, step in enumerate(steps):
        label = (step.get("label") or "").strip() or None
        if step.get("kind") == "page":
            try:
                checked.append({"kind": "page", "pattern": check_pattern(step["pattern"]),
                                "label": label})
            except (KeyError, ValueError) as exc:
                raise InvalidInput(str(exc) if isinstance(exc, ValueError)
                                   else "a page step has a pattern",
                                   field=f"steps.{index}.pattern") from None
        elif step.get("kind") == "event" and step.get("event") in STEP_EVENTS:
            checked.append({"kind": "event", "event": step["event"], "label": label})
        else:
            raise InvalidInput(f"a step is a page pattern or one of the events "
                               f"{', '.join(STEP_EVENTS)}", field=f"steps.{index}")
    return checked


# Definitions ----------------------------------------------------------------------------------


async def list_funnels(store: Store, site_id: str) -> list[dict[str, Any]]:
    """The shop funnel, then the site's own funnels, oldest first."""
    cursor = store.collection(COLLECTION).find({"siteId": site_id}).sort(
        [("createdAt", ASCENDING), ("_id", ASCENDING)]).limit(MAX_FUNNELS_PER_SITE)
    return [shop_funnel(), *[funnel async for funnel in cursor]]


async def find_funnel(store: Store, site_id: str, funnel_id: str) -> dict[str, Any]:
    """One funnel of the site (the shop funnel by its id "shop"); NotFound otherwise."""
    if funnel_id == SHOP_FUNNEL_ID:
        return shop_funnel()
    funnel = await store.collection(COLLECTION).find_one({"_id": funnel_id, "siteId": site_id})
    if funnel is None:
        raise NotFound("funnel not found")
    return funnel


async def create_funnel(store: Store, site_id: str, body: dict[str, Any],
                        check_pattern: PatternCheck, *, session: Any) -> dict[str, Any]:
    """Store a new funnel of the site."""
    if await store.collection(COLLECTION).count_documents(
            {"siteId": site_id}, session=session) >= MAX_FUNNELS_PER_SITE:
        raise InvalidInput(f"a site has at most {MAX_FUNNELS_PER_SITE} funnels of its own")
    now = datetime.now(UTC)
    funnel = {"_id": new_id(), "siteId": site_id, "name": body["name"].strip(),
              "steps": checked_steps(body["steps"], check_pattern), "createdAt": now,
              "updatedAt": now}
    await store.collection(COLLECTION).insert_one(funnel, session=session)
    return funnel


def _own(funnel_id: str) -> None:
    if funnel_id == SHOP_FUNNEL_ID:
        raise InvalidInput("the shop funnel is built in and cannot be changed", field="id")


async def update_funnel(store: Store, site_id: str, funnel_id: str, body: dict[str, Any],
                        check_pattern: PatternCheck, *, session: Any
                        ) -> tuple[dict[str, Any], list[str]]:
    """Change a funnel's name or steps; returns it and the fields that changed."""
    _own(funnel_id)
    funnel = await store.collection(COLLECTION).find_one({"_id": funnel_id, "siteId": site_id},
                                                         session=session)
    if funnel is None:
        raise NotFound("funnel not found")
    changes: dict[str, Any] = {}
    if "name" in body and body["name"].strip() != funnel["name"]:
        changes["name"] = body["name"].strip()
    if "steps" in body:
        steps = checked_steps(body["steps"], check_pattern)
        if steps != funnel["steps"]:
            changes["steps"] = steps
    if not changes:
        return funnel, []
    await store.collection(COLLECTION).update_one(
        {"_id": funnel_id, "siteId": site_id},
        {"$set": {**changes, "updatedAt": datetime.now(UTC)}}, session=session)
    return {**funnel, **changes}, sorted(changes)


async def delete_funnel(store: Store, site_id: str, funnel_id: str, *, session: Any) -> None:
    _own(funnel_id)
    deleted = await store.collection(COLLECTION).delete_one(
        {"_id": funnel_id, "siteId": site_id}, session=session)
    if not deleted.deleted_count:
        raise NotFound("funnel not found")


# Going through a funnel -----------------------------------------------------------------------


@dataclass(frozen=True)
class SessionPath:
    """One session of the range and the moments it reached the funnel's steps."""

    visitor_id: str
    session_id: str | None
    device: str
    country: str
    source: str
    reached: tuple[datetime, ...]
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


def day_bounds(first: date, last: date) -> tuple[datetime, datetime]:
    start = datetime(first.year, first.month, first.day, tzinfo=UTC)
    return start, datetime(last.year, last.month, last.day, tzinfo=UTC) + timedelta(days=1)


@dataclass(frozen=True)
class RangeSessions:
    """What a report over a range reads: the visits that started in it, each with its
    journey (its commerce steps), restricted visitors left out."""

    visits: list[dict[str, Any]]


async def read_sessions(store: Store, site_id: str, first: date, last: date, *,
                        source: str | None = None) -> RangeSessions:
    """Every session that started between `first` and `last` (of `source` when given), one
    visit document each; restricted visitors left out."""
    hidden = await restricted_visitor_ids(store, site_id)
    found = [visit async for visit in visits.visits_between(store, site_id, first, last,
                                                            hidden=hidden, source=source)]
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
                                 tuple(steps)))
    return paths


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _median_seconds(paths: list[SessionPath], step: int) -> float | None:
    gaps = [(path.reached[step] - path.reached[step - 1]).total_seconds() for path in paths
            if len(path.reached) > step]
    return round(statistics.median(gaps), 1) if gaps else None


async def funnel_report(store: Store, site_id: str, funnel: dict[str, Any], first: date,
                        last: date, *, source: str | None, page_matches: PageMatch,
                        offload: Offload) -> dict[str, Any]:
    """The funnel's report over the range: read here, worked out through `offload`."""
    sessions = await read_sessions(store, site_id, first, last, source=source)

    def work_out(check: Checkpoint) -> dict[str, Any]:
        paths = paths_through(funnel, sessions, page_matches=page_matches, check=check)
        return report(funnel, paths, first, last, source)

    return await offload(work_out)


def report(funnel: dict[str, Any], paths: list[SessionPath], first: date, last: date,
           source: str | None) -> dict[str, Any]:
    """Per step: sessions that reached it, conversion from step 1 and from the step before,
    the sessions that stopped there (drop-off) and the median time from the step before; and
    the same counts by device, country and source."""
    count = len(funnel["steps"])
    reached = [sum(1 for path in paths if len(path.reached) > k) for k in range(count)]
    steps = []
    for k, step in enumerate(funnel["steps"]):
        steps.append({
            "index": k + 1, **_step_view(step), "sessions": reached[k],
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
    return {"funnel": view(funnel), "from": first.isoformat(), "to": last.isoformat(),
            "source": source, "sessions": len(paths), "steps": steps, "breakdown": breakdown}


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
        start, end = day_bounds(first, last)
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
