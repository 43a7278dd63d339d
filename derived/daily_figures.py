"""Daily figures kept as data arrives, so the overview and the daily chart read a few documents
per day of the range instead of every pageview in it.

* `site_days`, one per (site, UTC day): pageviews, errors, leads, and `visitors`, the day's
  visitors counted by "<gap>|<country>|<device>". The gap is the number of days since the
  visitor's previous active day ("new" when there was none within MAX_GAP_DAYS). A visitor
  active in the range [a, b] is counted once, on their first active day d in it, which is the
  day whose gap is larger than d - a; so the distinct visitors of any range come from its day
  documents alone, exactly. Also pageviews per time-on-page bucket and the scroll depths
  reached (derived/engagement.py).
* `page_days`, one per (site, day, page path): pageviews, rage clicks and dead clicks.
* `visitor_days`, one per (site, visitor, day): the visitor's previous active day, country and
  device. It is the chain the gaps are kept on, and the visitor's data: erased with them.
* `session_days`, one per (site, day, dimension, value): the sessions that started that day
  with that entry page, exit page, referrer, source or UTM value (`visits.contributions`).
  The visits they are counted from (derived/visits.py) are kept by the fold as the
  visitor's days are, and are the visitor's data too.
* `error_days`, one per (site, day, error): its occurrences, the first and last of them, and
  `visitors`, the visitors it hit that day by "<gap>", the days since it last hit the same
  visitor: the errors list reads a range's errors from these alone, as the overview reads
  `site_days`. The gaps are kept on `error_visitor_days`, one per (site, visitor, error, day),
  the visitor's data like `visitor_days`.

What each kind of stored record adds to them is one table, `FIGURE_SOURCES`; counting,
a visitor's share and the rebuild all read it. The increments are made off the request path
by the derivation (derived/derivation.py), which folds each record's unfolded fact exactly
once; each document's `_id` is its key, so increments are upserts by `_id`. A visitor's share
is worked out again from their stored data (`visitor_share`): erasure takes out its folded
part, restriction takes it out and lifting the restriction puts it back. `rebuild_site`
recomputes a site from its stored data, which is how a store written before these figures
existed gets them (decisions "Issue 21: daily figures" and "Figures are derived off the
request path" in docs/decisions.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlsplit

from derived import engagement, journeys, visits
from documents import activity, commerce, error_records, interactions, sites, visitors
from documents.heatmaps import DEPTH_STEP
from documents.store import ASCENDING, DESCENDING, Index, Store
from instants import DayClock

SITE_DAYS = "site_days"
PAGE_DAYS = "page_days"
VISITOR_DAYS = "visitor_days"
SESSION_DAYS = "session_days"
ERROR_DAYS = "error_days"
ERROR_VISITOR_DAYS = "error_visitor_days"
#: Each day's site figures are spread over this many documents, by visitor, so that concurrent
#: transactions of different visitors seldom write the same document (a write conflict makes
#: MongoDB retry one of them); a read sums the slots. Page figures are not: traffic spreads
#: over pages by itself, and slots would multiply the documents a range's pages are read from.
SLOTS = 8
COLLECTIONS = (SITE_DAYS, PAGE_DAYS, VISITOR_DAYS, SESSION_DAYS, ERROR_DAYS, ERROR_VISITOR_DAYS)
#: The chains of days: a visitor's, and a visitor's with one error.
CHAINS = (VISITOR_DAYS, ERROR_VISITOR_DAYS)

#: Gaps at least this long count as "new": no range is longer (views.MAX_CHART_DAYS), so a
#: visitor whose previous day is that far back is first seen in any range that holds the day.
MAX_GAP_DAYS = 366
NEW = "new"
#: Page paths longer than this are cut: a key, not a record of the URL.
MAX_PAGE_LENGTH = 512
CLICK_FIELDS = {"rage_click": "rageClicks", "dead_click": "deadClicks"}
SCROLL_DEPTH = "scroll_depth"
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

INDEXES = [
    # site_days is read by `_id`; this one serves a site's rebuild and its shard key.
    Index(SITE_DAYS, (("siteId", ASCENDING), ("day", ASCENDING))),
    Index(PAGE_DAYS, (("siteId", ASCENDING), ("day", ASCENDING), ("page", ASCENDING))),
    Index(VISITOR_DAYS, (("siteId", ASCENDING), ("visitorId", ASCENDING), ("day", ASCENDING))),
    # A range's sessions are read one dimension at a time: equalities before the days.
    Index(SESSION_DAYS, (("siteId", ASCENDING), ("dimension", ASCENDING), ("day", ASCENDING))),
    Index(ERROR_DAYS, (("siteId", ASCENDING), ("day", ASCENDING))),
    Index(ERROR_VISITOR_DAYS, (("siteId", ASCENDING), ("visitorId", ASCENDING),
                               ("errorId", ASCENDING), ("day", ASCENDING))),
]


def page_path(url: Any) -> str | None:
    """The URL's path, which is what pages are grouped and shown by."""
    if not url or not isinstance(url, str):
        return None
    try:
        return urlsplit(url).path or "/"
    except ValueError:
        return None


def slot_of(who: str | None) -> int:
    """The slot a visitor's increments go to, the same for all of theirs."""
    return hashlib.sha256((who or "").encode()).digest()[0] % SLOTS


def site_day_id(site_id: str, day: str, slot: int) -> str:
    return f"{site_id}:{day}:{slot}"


def page_day_id(site_id: str, day: str, page: str) -> str:
    digest = hashlib.sha256(page.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"{site_id}:{day}:{digest}"


def visitor_day_id(site_id: str, visitor_id: str, day: str) -> str:
    return f"{site_id}:{visitor_id}:{day}"


def session_day_id(site_id: str, day: str, dimension: str, value: str) -> str:
    digest = hashlib.sha256(f"{dimension}\n{value}".encode("utf-8", "surrogatepass")
                            ).hexdigest()[:24]
    return f"{site_id}:{day}:{digest}"


def error_day_id(site_id: str, day: str, error_id: str) -> str:
    return f"{site_id}:{day}:{error_id}"


def error_visitor_day_id(site_id: str, visitor_id: str, error_id: str, day: str) -> str:
    return f"{site_id}:{visitor_id}:{error_id}:{day}"


def _label(value: Any) -> str:
    text = _KEY_UNSAFE.sub("_", str(value or ""))[:32]
    return text or "unknown"


def country_code(country: Any) -> str | None:
    """A country as the figures keep it: upper case, None when unknown."""
    return str(country).upper() if country else None


def gap_key(gap: int | None) -> str:
    """A gap as a `visitors` key begins: "new" when there is none within MAX_GAP_DAYS."""
    return NEW if gap is None or gap >= MAX_GAP_DAYS else str(gap)


def visitor_key(gap: int | None, country: Any, device: Any) -> str:
    """The `visitors` key a visitor-day is counted under."""
    return f"{gap_key(gap)}|{_label(country_code(country))}|{_label(device)}"


def first_in_range(gap_key_: str, offset: int) -> bool:
    """Whether a day counted with this gap, `offset` days into a range, is its visitor's first
    in the range: so the distinct visitors of a range are the sum over its days of these."""
    when = gap_key_.partition("|")[0]
    return when == NEW or int(when) > offset


def gap_between(day: str, previous_day: str | None) -> int | None:
    if previous_day is None:
        return None
    return (date.fromisoformat(day) - date.fromisoformat(previous_day)).days


#: The sums the store keeps are 64-bit integers (BSON int64); a sum leaving them is refused
#: before it is written (`FigureOverflow`), on every store alike.
INT64 = range(-(2**63), 2**63)
#: The figures a sum of money can make large: orders and net revenue, per currency.
_MONEY = ("orders.", "revenue.")


class FigureOverflow(ArithmeticError):
    """A figure's sum would leave the 64-bit integers the store keeps (decision "Issue 38:
    sums that cannot overflow" in docs/decisions.md)."""


@dataclass
class Tally:
    """Increments to the day documents of one site, gathered first and written together."""

    site_id: str
    #: The site's days (its time zone): what a moment's day is.
    clock: DayClock
    increments: dict[tuple[str, str], Counter[str]] = field(
        default_factory=lambda: defaultdict(Counter))
    keys: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    #: The first and last moment counted on each `error_days` document.
    seen: dict[tuple[str, str], tuple[datetime, datetime]] = field(default_factory=dict)

    def _add(self, collection: str, doc_id: str, keys: dict[str, Any], name: str,
             amount: int) -> None:
        self.keys[(collection, doc_id)] = keys
        self.increments[(collection, doc_id)][name] += amount

    def _day(self, who: str | None, day: str, name: str, amount: int = 1) -> None:
        slot = slot_of(who)
        self._add(SITE_DAYS, site_day_id(self.site_id, day, slot),
                  {"siteId": self.site_id, "day": day, "slot": slot}, name, amount)

    def _page(self, day: str, url: Any, name: str) -> None:
        page = (page_path(url) or "unknown")[:MAX_PAGE_LENGTH]
        self._add(PAGE_DAYS, page_day_id(self.site_id, day, page),
                  {"siteId": self.site_id, "day": day, "page": page}, name, 1)

    def pageview(self, who: str | None, at: datetime, url: Any) -> None:
        day = self.clock.day_of(at)
        self._day(who, day, "pageviews")
        self._page(day, url, "pageviews")

    def click(self, at: datetime, url: Any, kind: str) -> None:
        if kind in CLICK_FIELDS:
            self._page(self.clock.day_of(at), url, CLICK_FIELDS[kind])

    def time_on_page(self, who: str | None, record: dict[str, Any]) -> None:
        """A pageview's time on page (or with `amount` -1, a shorter one a longer replaced),
        in its duration bucket (derived/engagement.py)."""
        bucket = engagement.bucket_of(record["duration"])
        self._day(who, self.clock.day_of(record["at"]), f"timeOnPage.{bucket}",
                  record.get("amount", 1))

    def scroll(self, who: str | None, record: dict[str, Any]) -> None:
        """A scroll depth report: a view measured when it is the view's first, and each
        DEPTH_STEP % it reached beyond what the view reported before, as the heatmap counts."""
        day = self.clock.day_of(record["at"])
        start = float(record.get("from") or 0)
        if start == 0:
            self._day(who, day, "scrollViews")
        for step in range(DEPTH_STEP, 101, DEPTH_STEP):
            if start < step <= float(record.get("depth") or 0):
                self._day(who, day, f"scrollReach.{step}")

    def visit(self, visit: dict[str, Any] | None, amount: int = 1) -> None:
        """Count (or with -1 take out) a visit in the daily session figures: a document per
        day, dimension and value, or for a hit per day and error or page, its outcome counted
        in it too (`journeys.split_hit`)."""
        for day, dimension, value in visits.contributions(visit):
            counted = ["sessions"]
            if dimension in journeys.HIT_DIMENSIONS:
                value, outcome = journeys.split_hit(value)
                counted.append(outcome)
            doc_id = session_day_id(self.site_id, day, dimension, value)
            keys = {"siteId": self.site_id, "day": day, "dimension": dimension, "value": value}
            for name in counted:
                self._add(SESSION_DAYS, doc_id, keys, name, amount)

    def lead(self, who: str | None, at: datetime) -> None:
        self._day(who, self.clock.day_of(at), "leads")

    def _error_day(self, day: str, error_id: str, name: str, amount: int) -> tuple[str, str]:
        doc_id = error_day_id(self.site_id, day, error_id)
        self._add(ERROR_DAYS, doc_id, {"siteId": self.site_id, "day": day, "errorId": error_id},
                  name, amount)
        return ERROR_DAYS, doc_id

    def error(self, who: str | None, record: dict[str, Any]) -> None:
        """An occurrence: on the site's day, and on its error's day with its moment."""
        at = record["at"]
        day = self.clock.day_of(at)
        self._day(who, day, "errors")
        if error_id := record.get("errorId"):
            key = self._error_day(day, error_id, "occurrences", 1)
            first, last = self.seen.get(key, (at, at))
            self.seen[key] = (min(first, at), max(last, at))

    def error_visitor_day(self, error_id: str, day: str, previous_day: str | None,
                          amount: int = 1) -> None:
        self._error_day(day, error_id, f"visitors.{gap_key(gap_between(day, previous_day))}",
                        amount)

    def order(self, who: str | None, record: dict[str, Any]) -> None:
        """Paid orders and their net revenue (minor units), per currency (documents/commerce.py)."""
        day = self.clock.day_of(record["at"])
        self._day(who, day, f"orders.{record['currency']}", record["orders"])
        self._day(who, day, f"revenue.{record['currency']}", record["revenue"])

    def visitor_day(self, who: str, day: str, previous_day: str | None, country: Any,
                    device: Any, amount: int = 1) -> None:
        key = visitor_key(gap_between(day, previous_day), country, device)
        self._day(who, day, f"visitors.{key}", amount)

    async def _check_sums(self, store: Store, sign: int, session: Any) -> None:
        """Raise FigureOverflow when a money sum would leave int64 once these are added: the
        documents' current sums are read first, in the caller's transaction."""
        money = {doc_id: {name: amount for name, amount in amounts.items()
                          if name.startswith(_MONEY)}
                 for collection, doc_id, _keys, amounts in self.documents(sign)
                 if collection == SITE_DAYS}
        money = {doc_id: amounts for doc_id, amounts in money.items() if amounts}
        if not money:
            return
        current: dict[str, dict[str, Any]] = {doc_id: {} for doc_id in money}
        async for doc in store.collection(SITE_DAYS).find(
                {"_id": {"$in": sorted(money)}}, {"orders": 1, "revenue": 1}, session=session):
            current[doc["_id"]] = _dotted({name: doc.get(name) or {}
                                           for name in ("orders", "revenue")})
        for doc_id, amounts in money.items():
            for name, amount in amounts.items():
                if int(current[doc_id].get(name) or 0) + amount not in INT64:
                    raise FigureOverflow(f"{name} of {doc_id.rsplit(':', 2)[-2]}")

    def add(self, other: Tally) -> None:
        """Add `other`'s increments to these."""
        for key, counts in other.increments.items():
            self.keys.setdefault(key, other.keys[key])
            self.increments[key].update(counts)
        for key, (first, last) in other.seen.items():
            mine = self.seen.get(key, (first, last))
            self.seen[key] = (min(mine[0], first), max(mine[1], last))

    def leave_out(self, other: Tally) -> None:
        """Take `other`'s increments out of these (what is not folded yet, say)."""
        for key, counts in other.increments.items():
            self.keys.setdefault(key, other.keys[key])
            self.increments[key].subtract(counts)

    def documents(self, sign: int = 1) -> Iterable[tuple[str, str, dict[str, Any],
                                                         dict[str, int]]]:
        """(collection, `_id`, key fields, increments) of every document touched."""
        for (collection, doc_id), counts in self.increments.items():
            amounts = {name: amount * sign for name, amount in counts.items() if amount}
            if amounts:
                yield collection, doc_id, self.keys[(collection, doc_id)], amounts

    async def write(self, store: Store, *, sign: int = 1, session: Any = None,
                    field: str | None = None) -> None:
        """Add (or with sign -1 take out) the increments, one upsert by `_id` per document;
        to the figures, or to one field of them (`RETAINED`)."""
        pages, sessions, errors = [], [], []
        lowered = False
        outcomes_lowered: list[tuple[str, str]] = []
        if field is None:
            await self._check_sums(store, sign, session)
        for collection, doc_id, keys, amounts in self.documents(sign):
            update: dict[str, Any] = {"$setOnInsert": keys}
            if field is not None:
                amounts = {f"{field}.{name}": amount for name, amount in amounts.items()}
            elif sign > 0 and (seen := self.seen.get((collection, doc_id))):
                update.update({"$min": {"first": seen[0]}, "$max": {"last": seen[1]}})
            await store.collection(collection).update_one(
                {"_id": doc_id}, {"$inc": amounts, **update}, upsert=True, session=session)
            if field is not None:
                continue
            if collection == PAGE_DAYS:
                pages.append(doc_id)
            elif collection == SESSION_DAYS:
                sessions.append(doc_id)
                lowered = lowered or any(amount < 0 for amount in amounts.values())
                outcomes_lowered += [(doc_id, name) for name, amount in amounts.items()
                                     if amount < 0 and name.startswith(journeys.HITS)]
            elif collection == ERROR_DAYS and amounts.get("occurrences", 0) < 0:
                errors.append(doc_id)
        if sign < 0 and pages:
            # A page's day left at nothing is removed, so no trace of the visitor stays.
            await store.collection(PAGE_DAYS).delete_many(
                {"_id": {"$in": pages}, **{name: {"$not": {"$gt": 0}} for name in (
                    "pageviews", *CLICK_FIELDS.values())}}, session=session)
        if lowered:
            # So is a session figure left at nothing (a fold moves a visit's exit page on),
            # and a hit's outcome count left at nothing in one that stays.
            await store.collection(SESSION_DAYS).delete_many(
                {"_id": {"$in": sessions}, "sessions": {"$not": {"$gt": 0}}}, session=session)
            for doc_id, name in outcomes_lowered:
                await store.collection(SESSION_DAYS).update_one(
                    {"_id": doc_id, name: {"$not": {"$gt": 0}}}, {"$unset": {name: ""}},
                    session=session)
        if errors:
            await _bound_error_days(store, self.site_id, errors, session)


async def _bound_error_days(store: Store, site_id: str, doc_ids: list[str], session: Any
                            ) -> None:
    """An error's day whose occurrences were taken out: removed when none is left, else its
    first and last moments found again among the occurrences still counted (a restricted
    visitor's are not), so no moment of what was taken out stays on it."""
    days = store.collection(ERROR_DAYS)
    await days.delete_many({"_id": {"$in": doc_ids}, "occurrences": {"$not": {"$gt": 0}}},
                           session=session)
    held = await visitors.restricted_visitor_ids(store, site_id, session=session)
    async for doc in days.find({"_id": {"$in": doc_ids}}, {"day": 1, "errorId": 1},
                               session=session):
        start = datetime.combine(date.fromisoformat(doc["day"]), time(), UTC)
        bounds = await error_records.occurrence_bounds(
            store, site_id, doc["errorId"], start, start + timedelta(days=1), held,
            session=session)
        if bounds is not None:
            await days.update_one({"_id": doc["_id"]},
                                  {"$set": {"first": bounds[0], "last": bounds[1]}},
                                  session=session)


# What feeds the figures ---------------------------------------------------------------------


@dataclass(frozen=True)
class FigureSource:
    """One kind of stored record and what each of its records adds to the derived figures.

    Counting (the derivation's fold of unfolded facts), a visitor's share (erasure, restriction)
    and the rebuild of a site all read this one table, as export and erasure read
    `privacy.subject_data.VISITOR_DATA`.
    """

    #: The name an unfolded fact of this kind carries (derived/derivation.py).
    kind: str
    #: Where the records are stored, and the fields a share or a rebuild reads.
    collection: str
    projection: dict[str, int]
    #: A stored document's records, each as {"at", "url"?, "kind"?}.
    records: Callable[[dict[str, Any]], Iterable[dict[str, Any]]]
    #: What one record adds to the day documents.
    count: Callable[[Tally, str | None, dict[str, Any]], None]
    #: The records' days make the visitor's chain of active days (`visitor_days`).
    chains_days: bool = False
    #: The records' days make the visitor's chain of days with their error
    #: (`error_visitor_days`).
    chains_error_days: bool = False
    #: The recording mark a record sets, if any (documents/recordings.py MARKS).
    mark: Callable[[dict[str, Any]], str | None] = lambda _record: None
    #: Each record carries the heatmap share it adds (documents/heatmaps.py).
    heatmap: bool = False
    #: Erasure anonymises these records instead of deleting them, so what they count stays in
    #: the figures as anyone's (privacy.subject_data.VISITOR_DATA; decision "An erased
    #: visitor's errors stay counted" in docs/decisions.md).
    kept_when_erased: bool = False
    #: What a record adds to its session's journey (derived/journeys.py), given the record
    #: and its fact: the journey after it, or None when it adds nothing (which the record
    #: and fact alone decide, so the fold can ask before it looks the visit up).
    journey: Callable[[dict[str, Any], dict[str, Any], dict[str, Any]],
                      dict[str, Any] | None] | None = None
    #: Whether a record sent without a browser session still joins a journey (the shop's
    #: server-side steps and orders; an error or a click without one does not).
    joins_without_session: bool = False
    #: Only this kind's facts are counted here: its stored records are another source's,
    #: which counts them (a time on page is counted with its pageview; its facts are changes).
    facts_only: bool = False


def _events(doc: dict[str, Any]) -> Iterable[dict[str, Any]]:
    return doc.get("events") or []


def _count_pageview(tally: Tally, who: str | None, record: dict[str, Any]) -> None:
    tally.pageview(who, record["at"], record.get("url"))
    if record.get("duration") is not None:
        tally.time_on_page(who, record)


def _count_interaction(tally: Tally, who: str | None, record: dict[str, Any]) -> None:
    if record.get("kind") == SCROLL_DEPTH:
        if record.get("url"):  # as the heatmap: a depth on no page is not counted
            tally.scroll(who, record)
    else:
        tally.click(record["at"], record.get("url"), record.get("kind", ""))


PAGEVIEW, INTERACTION, LEAD, ERROR = "pageview", "interaction", "lead", "error"
ORDER, STEP, TIME_ON_PAGE = "order", "step", "time_on_page"
#: The commerce events that are steps of a session's journey, not of an order.
_STEP_EVENTS = (commerce.ADD_TO_CART, commerce.CHECKOUT_STARTED)


def _frustration(journey: dict[str, Any], record: dict[str, Any], _fact: dict[str, Any]
                 ) -> dict[str, Any] | None:
    if record.get("kind") not in CLICK_FIELDS:
        return None
    return journeys.with_frustration(journey, visits.page_path(record.get("url")), record["at"])


def _error_hit(journey: dict[str, Any], record: dict[str, Any], fact: dict[str, Any]
               ) -> dict[str, Any] | None:
    error_id = record.get("errorId") or fact.get("errorId")
    return journeys.with_error(journey, error_id, record["at"]) if error_id else None


def _order_change(journey: dict[str, Any], record: dict[str, Any], fact: dict[str, Any]
                  ) -> dict[str, Any] | None:
    order_id = record.get("orderId") or fact.get("orderId")
    return journeys.with_order_change(journey, order_id, record) if order_id else None


FIGURE_SOURCES: tuple[FigureSource, ...] = (
    FigureSource(PAGEVIEW, activity.COLLECTION,
                 {"visitorId": 1, "events.at": 1, "events.url": 1, "events.sessionId": 1,
                  "events.source": 1, "events.product": 1, "events.referrer": 1,
                  "events.duration": 1},
                 _events, _count_pageview, chains_days=True),
    # A change to a stored pageview's time on page: the longer report in, the shorter out.
    FigureSource(TIME_ON_PAGE, activity.COLLECTION, {}, lambda _doc: [], Tally.time_on_page,
                 facts_only=True),
    FigureSource(INTERACTION, interactions.COLLECTION,
                 {"visitorId": 1, "events.at": 1, "events.url": 1, "events.kind": 1,
                  "events.sessionId": 1, "events.depth": 1, "events.from": 1},
                 _events, _count_interaction,
                 mark=lambda r: r.get("kind") if r.get("kind") in CLICK_FIELDS else None,
                 heatmap=True, journey=_frustration),
    FigureSource(LEAD, "leads", {"visitorId": 1, "createdAt": 1},
                 lambda doc: [{"at": doc["createdAt"]}],
                 lambda tally, who, r: tally.lead(who, r["at"]), mark=lambda _r: "lead"),
    FigureSource(ERROR, error_records.OCCURRENCES,
                 {"visitorId": 1, "occurredAt": 1, "errorId": 1, "sessionId": 1},
                 lambda doc: [{"at": doc["occurredAt"], "errorId": doc.get("errorId"),
                               "sessionId": doc.get("sessionId")}],
                 Tally.error, mark=lambda _r: "error", kept_when_erased=True,
                 journey=_error_hit, chains_error_days=True),
    # An order's records are its figure, and a fact's are the change to it (documents/commerce.py).
    FigureSource(ORDER, commerce.ORDERS, {"visitorId": 1, "figure": 1, "sessionId": 1},
                 lambda doc: [{**record, "orderId": doc["_id"],
                               "sessionId": doc.get("sessionId")}
                              for record in doc.get("figure") or []],
                 Tally.order, journey=_order_change, joins_without_session=True),
    # A session's add to cart and checkout: nothing in the daily figures, a step of its journey.
    FigureSource(STEP, commerce.EVENTS, {"visitorId": 1, "occurredAt": 1, "type": 1,
                                         "sessionId": 1},
                 lambda doc: [{"at": doc["occurredAt"], "kind": doc["type"],
                               "sessionId": doc.get("sessionId")}]
                 if doc.get("type") in _STEP_EVENTS else [],
                 lambda _tally, _who, _record: None,
                 journey=lambda journey, r, _fact: journeys.with_step(journey, r["kind"],
                                                                      r["at"]),
                 joins_without_session=True),
)
SOURCES = {source.kind: source for source in FIGURE_SOURCES}
#: The sources whose stored records are counted (a share, a rebuild, the purge).
STORED_SOURCES = tuple(source for source in FIGURE_SOURCES if not source.facts_only)
#: The source stored in each collection (the retention purge counts what it removes).
SOURCE_IN = {source.collection: source for source in STORED_SOURCES}


# Folding ------------------------------------------------------------------------------------


async def chain_day(store: Store, tally: Tally, site_id: str, visitor_id: str, at: datetime, *,
                    country: Any, device: Any, session: Any) -> None:
    """Count a pageview on the visitor's day, and the day itself when it is their first
    pageview that day (linking the day into the visitor's chain of days)."""
    day = tally.clock.day_of(at)
    doc_id = visitor_day_id(site_id, visitor_id, day)
    before = await store.collection(VISITOR_DAYS).find_one_and_update(
        {"_id": doc_id}, {"$inc": {"pageviews": 1}, "$setOnInsert": {
            "siteId": site_id, "visitorId": visitor_id, "day": day, "previousDay": None,
            "country": country_code(country), "device": device}},
        upsert=True, projection={"_id": 1}, session=session)
    if before is None:
        def count(doc: dict[str, Any] | None, day: str, previous_day: str | None,
                  amount: int) -> None:
            tally.visitor_day(visitor_id, day, previous_day, (doc or {}).get("country", country),
                              (doc or {}).get("device", device), amount)

        await _link_day(store.collection(VISITOR_DAYS),
                        {"siteId": site_id, "visitorId": visitor_id}, day, doc_id, count,
                        session)


async def chain_error_day(store: Store, tally: Tally, site_id: str, visitor_id: str,
                          record: dict[str, Any], *, session: Any) -> None:
    """Link an occurrence's day into the visitor's chain of days with its error, when it is
    the first that day: so the error's day counts the visitor, by the gap since the last."""
    error_id = record.get("errorId")
    if not error_id:
        return
    day = tally.clock.day_of(record["at"])
    doc_id = error_visitor_day_id(site_id, visitor_id, error_id, day)
    mine = {"siteId": site_id, "visitorId": visitor_id, "errorId": error_id}
    before = await store.collection(ERROR_VISITOR_DAYS).find_one_and_update(
        {"_id": doc_id}, {"$inc": {"occurrences": 1},
                          "$setOnInsert": {**mine, "day": day, "previousDay": None}},
        upsert=True, projection={"_id": 1}, session=session)
    if before is None:
        await _link_day(store.collection(ERROR_VISITOR_DAYS), mine, day, doc_id,
                        lambda _doc, day, previous_day, amount: tally.error_visitor_day(
                            error_id, day, previous_day, amount), session)


async def _link_day(days: Any, mine: dict[str, Any], day: str, doc_id: str,
                    count: Callable[[dict[str, Any] | None, str, str | None, int], None],
                    session: Any) -> None:
    """Put a new day into a chain of days (`mine`): count it by its gap from the day before,
    and the next day by its gap now measured from it (a record can arrive after later ones).
    `count(following doc or None, day, previous day, +1 or -1)` counts one day."""
    previous = await days.find_one({**mine, "day": {"$lt": day}}, {"day": 1},
                                   sort=[("day", DESCENDING)], session=session)
    previous_day = previous["day"] if previous else None
    if previous_day is not None:
        await days.update_one({"_id": doc_id}, {"$set": {"previousDay": previous_day}},
                              session=session)
    count(None, day, previous_day, 1)
    following = await days.find_one({**mine, "day": {"$gt": day}}, sort=[("day", ASCENDING)],
                                    session=session)
    if following is not None:
        count(following, following["day"], following.get("previousDay"), -1)
        count(following, following["day"], day, 1)
        await days.update_one({"_id": following["_id"]}, {"$set": {"previousDay": day}},
                              session=session)


async def chain_visit(store: Store, tally: Tally, site_id: str, visitor_id: str,
                      record: dict[str, Any], *, country: Any, device: Any,
                      session: Any) -> None:
    """Put a pageview into its visit and count the difference it makes to the daily session
    figures (a new entry or exit page, a source, a new visit)."""
    before = await visits.find_visit(store, site_id, visitor_id, record, clock=tally.clock,
                                     session=session)
    after = visits.with_pageview(before, record, site_id=site_id, visitor_id=visitor_id,
                                 country=country, device=device, clock=tally.clock)
    await visits.save_visit(store, after, session=session)
    tally.visit(before, -1)
    tally.visit(after)


# A visitor's share ----------------------------------------------------------------------------


async def _count_stored(store: Store, tally: Tally, sources: Iterable[FigureSource],
                       site_id: str, visitor_id: str, who: str | None, session: Any) -> None:
    mine = {"siteId": site_id, "visitorId": visitor_id}
    for source in sources:
        async for doc in store.collection(source.collection).find(mine, source.projection,
                                                                  session=session):
            for record in source.records(doc):
                source.count(tally, who, record)


async def visitor_share(store: Store, site_id: str, visitor_id: str, *,
                        session: Any = None) -> Tally:
    """What the visitor's stored data added to the day documents (once folded)."""
    tally = Tally(site_id, await sites.site_clock(store, site_id, session=session))
    await _count_stored(store, tally, STORED_SOURCES, site_id, visitor_id, visitor_id, session)
    mine = {"siteId": site_id, "visitorId": visitor_id}
    async for day in store.collection(VISITOR_DAYS).find(mine, session=session):
        tally.visitor_day(visitor_id, day["day"], day.get("previousDay"), day.get("country"),
                          day.get("device"))
    async for day in store.collection(ERROR_VISITOR_DAYS).find(mine, session=session):
        tally.error_visitor_day(day["errorId"], day["day"], day.get("previousDay"))
    async for visit in visits.visits_of(store, site_id, visitor_id, session=session):
        tally.visit(visit)
    return tally


async def anonymised_share(store: Store, site_id: str, visitor_id: str, *,
                           session: Any = None) -> Tally:
    """What the visitor's records that erasure keeps add to the day documents once they name
    no visitor (counted as anyone's, as the fold and the rebuild count such records)."""
    tally = Tally(site_id, await sites.site_clock(store, site_id, session=session))
    await _count_stored(store, tally, [source for source in STORED_SOURCES
                                       if source.kept_when_erased],
                        site_id, visitor_id, None, session)
    return tally


# Rebuilding a site ---------------------------------------------------------------------------

#: Each figure document's share that the retention purge kept after removing the data it was
#: counted from, as `retained.<name>`: the purged data is gone, so a rebuild adds this back to
#: what the stored data adds up to (decision "Issue 38: a rebuild keeps what retention kept").
RETAINED = "retained"
#: The fields that say which figure a document is, per collection.
_KEY_FIELDS = {SITE_DAYS: ("siteId", "day", "slot"), PAGE_DAYS: ("siteId", "day", "page"),
               SESSION_DAYS: ("siteId", "day", "dimension", "value"),
               ERROR_DAYS: ("siteId", "day", "errorId")}


@dataclass
class Stored:
    """What stored data adds up to, as a rebuild counts it: the increments, the visitors'
    chains of days and their visits."""

    tally: Tally
    chain: list[dict[str, Any]]
    visits: list[dict[str, Any]]
    error_chain: list[dict[str, Any]] = field(default_factory=list)


async def count_stored(store: Store, site_id: str, visitor_ids: list[str] | None = None, *,
                       session: Any = None) -> Stored:
    """What the site's stored data (or only these visitors') adds to the figures, restricted
    visitors left out: the stored records, and the visitors' chains of days and visits as
    folded, or as the stored pageviews make them where none was folded (a store from before
    them). Countries and devices come from the profiles, since stored pageviews do not carry
    them. A rebuild writes it; the retention purge counts it for the visitors of a batch
    before and after removing their data (`retain`)."""
    mine: dict[str, Any] = {"siteId": site_id}
    if visitor_ids is not None:
        mine["visitorId"] = {"$in": visitor_ids}
    profiles = await visitors.profiles_for_rebuild(store, site_id, visitor_ids, session=session)
    held = {visitor for visitor, doc in profiles.items() if doc.get("restricted")}
    site = await sites.find_site(store, site_id, {"allowedOrigins": 1, "settings": 1,
                                                  sites.TIME_ZONES: 1}, session=session)
    clock = sites.day_clock(site or {})
    tally = Tally(site_id, clock)
    active: dict[str, Counter[str]] = defaultdict(Counter)
    hit: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    viewed: dict[str, list[dict[str, Any]]] = defaultdict(list)
    joinable: list[tuple[FigureSource, str, dict[str, Any]]] = []
    for source in STORED_SOURCES:
        # An error without a visitor (a session's only, or an erased visitor's) is counted,
        # as the fold counts its fact.
        async for doc in store.collection(source.collection).find(mine, source.projection,
                                                                  session=session):
            visitor_id = doc.get("visitorId")
            for record in source.records(doc):
                if source.chains_days:
                    # A restricted visitor's days stay chained, to be counted when it is lifted.
                    active[visitor_id][clock.day_of(record["at"])] += 1
                    viewed[visitor_id].append(record)
                if source.chains_error_days and visitor_id and record.get("errorId"):
                    hit[(visitor_id, record["errorId"])][clock.day_of(record["at"])] += 1
                if source.journey is not None and visitor_id:
                    joinable.append((source, visitor_id, record))
                if visitor_id not in held:
                    source.count(tally, visitor_id, record)
    # The visitors' days and visits as folded stand for themselves: one whose pageviews the
    # retention purge removed stays the visitor's (and erasure takes out what it counts) until
    # the visitor or the visit goes, when the purge keeps what it counted (`retain`).
    async for day in store.collection(VISITOR_DAYS).find(
            mine, {"visitorId": 1, "day": 1, "pageviews": 1}, session=session):
        days = active[day["visitorId"]]
        if day["day"] not in days:
            days[day["day"]] = int(day.get("pageviews") or 0)
    async for day in store.collection(ERROR_VISITOR_DAYS).find(
            mine, {"visitorId": 1, "errorId": 1, "day": 1, "occurrences": 1}, session=session):
        days = hit[(day["visitorId"], day["errorId"])]
        if day["day"] not in days:
            days[day["day"]] = int(day.get("occurrences") or 0)
    error_chain = []
    for (visitor_id, error_id), days in hit.items():
        previous = None
        for day in sorted(days):
            if visitor_id not in held:
                tally.error_visitor_day(error_id, day, previous)
            error_chain.append({
                "_id": error_visitor_day_id(site_id, visitor_id, error_id, day),
                "siteId": site_id, "visitorId": visitor_id, "errorId": error_id, "day": day,
                "previousDay": previous, "occurrences": days[day]})
            previous = day
    folded_visits = {visit["_id"]: visit async for visit in store.collection(
        visits.COLLECTION).find(mine, session=session)}
    chain = []
    for visitor_id, days in active.items():
        profile = profiles.get(visitor_id) or {}
        country = (profile.get("location") or {}).get("country")
        device = (profile.get("device") or {}).get("type")
        previous = None
        for day in sorted(days):
            if visitor_id not in held:
                tally.visitor_day(visitor_id, day, previous, country, device)
            chain.append({"_id": visitor_day_id(site_id, visitor_id, day), "siteId": site_id,
                          "visitorId": visitor_id, "day": day, "previousDay": previous,
                          "pageviews": days[day],
                          "country": country_code(country),
                          "device": device})
            previous = day
    own = visits.own_hostnames((site or {}).get("allowedOrigins") or ())
    site_visits = []
    for visitor_id, records in viewed.items():
        profile = profiles.get(visitor_id) or {}
        found: dict[str, dict[str, Any]] = {}
        for record in sorted(records, key=lambda r: r["at"]):
            if "source" not in record:
                # Stored before ingest kept it: worked out from the stored URL and referrer,
                # as ingest would have.
                record = {**record, "source": visits.landing_source(
                    record.get("url"), record.get("referrer"), own)}
            key = visits.session_key(record, clock)
            found[key] = visits.with_pageview(
                found.get(key), record, site_id=site_id, visitor_id=visitor_id,
                country=(profile.get("location") or {}).get("country"),
                device=(profile.get("device") or {}).get("type"), clock=clock)
        for visit in found.values():
            site_visits.append(folded_visits.pop(visit["_id"], visit))
    site_visits.extend(folded_visits.values())
    _join_stored_journeys(site_id, site_visits, joinable)
    for visit in site_visits:
        if visit.get("visitorId") not in held:
            tally.visit(visit)
    return Stored(tally, chain, site_visits, error_chain)


def _join_stored_journeys(site_id: str, site_visits: list[dict[str, Any]],
                          joinable: list[tuple[FigureSource, str, dict[str, Any]]]) -> None:
    """Give each visit that carries no journey or an empty one (worked out from stored
    pageviews, folded before journeys were kept, or rebuilt before such visits were joined)
    the journey its stored records make, joined as the fold joins them
    (`visits.journey_visit`); a folded journey stands for itself, as a folded visit does. An
    empty one is joined again at no risk: the fold would have joined the stored records."""
    bare = {visit["_id"] for visit in site_visits if not any((visit.get("journey") or {}).values())}
    if not bare:
        return
    by_id = {visit["_id"]: visit for visit in site_visits}
    by_visitor: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for visit in site_visits:
        if visit["_id"] in bare:
            visit["journey"] = journeys.empty()
        if visit.get("pageviews"):
            by_visitor[visit["visitorId"]].append(visit)
    for theirs in by_visitor.values():
        theirs.sort(key=lambda visit: journeys.aware(visit["startedAt"]))
    for source, visitor_id, record in sorted(joinable,
                                             key=lambda item: journeys.aware(item[2]["at"])):
        at = journeys.aware(record["at"])
        session_id = record.get("sessionId")
        if session_id:
            visit = by_id.get(visits.visit_id(site_id, visitor_id, f"s:{session_id}"))
        elif source.joins_without_session:
            visit = next((visit for visit in reversed(by_visitor[visitor_id])
                          if journeys.aware(visit["startedAt"]) <= at), None)
            if visit is not None and journeys.aware(visit["endedAt"]) + journeys.LATE < at:
                visit = None
        else:
            visit = None
        if visit is None or visit["_id"] not in bare:
            continue
        assert source.journey is not None
        visit["journey"] = source.journey(visit["journey"], record, {}) or visit["journey"]


async def kept_when_erased(store: Store, site_id: str, visitor_ids: list[str], *,
                           session: Any) -> list[tuple[FigureSource, list[Any]]]:
    """The `_id`s of the visitors' records that erasure anonymises, per source."""
    return [(source, [doc["_id"] async for doc in store.collection(source.collection).find(
        {"siteId": site_id, "visitorId": {"$in": visitor_ids}}, {"_id": 1}, session=session)])
        for source in STORED_SOURCES if source.kept_when_erased]


async def count_anonymous(store: Store, tally: Tally, source: FigureSource, ids: list[Any], *,
                          session: Any) -> None:
    """Count those of the records that name no visitor, as a rebuild counts them."""
    async for doc in store.collection(source.collection).find(
            {"_id": {"$in": ids}, "visitorId": None}, source.projection, session=session):
        for record in source.records(doc):
            source.count(tally, None, record)


async def retain(store: Store, before: Tally, after: Tally, *, session: Any) -> None:
    """Keep, as retained, what a purge batch took out of what a rebuild would count (`before`
    less `after`, both measured with `count_stored`), in the caller's transaction."""
    removed = Tally(before.site_id, before.clock)
    removed.add(before)
    removed.leave_out(after)
    await removed.write(store, session=session, field=RETAINED)


async def _retained(store: Store, site_id: str) -> Tally:
    """What the purge kept of each of the site's figure documents."""
    tally = Tally(site_id, await sites.site_clock(store, site_id))
    for collection, key_fields in _KEY_FIELDS.items():
        async for doc in store.collection(collection).find(
                {"siteId": site_id, RETAINED: {"$exists": True}}):
            keys = {name: doc.get(name) for name in key_fields}
            for name, amount in _dotted(doc[RETAINED]).items():
                tally._add(collection, doc["_id"], keys, name, int(amount))
    return tally


def _dotted(nested: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested fields as the dotted names an increment uses (the inverse of `_nested`)."""
    flat: dict[str, Any] = {}
    for name, value in nested.items():
        if isinstance(value, dict):
            flat.update(_dotted(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = value
    return flat


async def rebuild_site(store: Store, site_id: str) -> None:
    """Recompute the site's day documents: what the retention purge kept of data it removed,
    plus what the stored data adds up to (restricted visitors left out), and keep its first
    currency if it has none yet. Run it under the
    site's fold lease (`derivation.rebuild_site`), so no fold writes meanwhile."""
    stored = await count_stored(store, site_id)
    retained = await _retained(store, site_id)
    tally = stored.tally
    tally.add(retained)
    first = await commerce.first_currency(store, site_id)
    if first is not None:
        # A site folded before the first currency was kept gets it (kept ones stay).
        await sites.keep_first_currency(store, site_id, first)
    await visits.replace_site(store, site_id, stored.visits)
    for collection in COLLECTIONS:
        await store.collection(collection).delete_many({"siteId": site_id})
    documents = defaultdict(list)
    kept = {key: {name: amount for name, amount in counts.items() if amount}
            for key, counts in retained.increments.items()}
    for (collection, doc_id), counts in tally.increments.items():
        amounts = {name: amount for name, amount in counts.items() if amount}
        own = kept.get((collection, doc_id))
        if not amounts and not own:
            continue
        doc = {"_id": doc_id, **tally.keys[(collection, doc_id)], **_nested(amounts)}
        if seen := tally.seen.get((collection, doc_id)):
            doc["first"], doc["last"] = seen
        if own:
            doc[RETAINED] = _nested(own)
        documents[collection].append(doc)
    documents[VISITOR_DAYS] = stored.chain
    documents[ERROR_VISITOR_DAYS] = stored.error_chain
    for collection, docs in documents.items():
        for offset in range(0, len(docs), 1000):
            await store.collection(collection).insert_many(docs[offset:offset + 1000])


def _nested(amounts: dict[str, int]) -> dict[str, Any]:
    """Dotted increments ("visitors.k") as the nested fields an insert writes."""
    nested: dict[str, Any] = {}
    for name, amount in amounts.items():
        head, _, tail = name.partition(".")
        if tail:
            nested.setdefault(head, {})[tail] = amount
        else:
            nested[name] = amount
    return nested


# Reading --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Period:
    """A period's figures from its day documents."""

    pageviews: int
    errors: int
    leads: int
    visitors: int
    countries: Counter[str]
    devices: Counter[str]
    per_day: dict[str, dict[str, int]]
    #: Paid orders and their net revenue in minor units, per currency (documents/commerce.py),
    #: in all and per day; currencies are never summed together.
    orders: Counter[str] = field(default_factory=Counter)
    revenue: Counter[str] = field(default_factory=Counter)
    money_per_day: dict[str, dict[str, Counter[str]]] = field(default_factory=dict)
    #: Pageviews per time-on-page bucket, views whose scroll depth was measured and the views
    #: that reached each depth (derived/engagement.py).
    time_on_page: Counter[str] = field(default_factory=Counter)
    scroll_views: int = 0
    scroll_reach: Counter[str] = field(default_factory=Counter)


def _days(first: date, last: date) -> list[str]:
    return [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]


#: The site_days fields that hold counts per key.
_DAY_COUNTERS = ("visitors", "orders", "revenue", "timeOnPage", "scrollReach")


async def site_days(store: Store, site_id: str, first: date, last: date
                    ) -> dict[str, dict[str, Any]]:
    """The site's figures of each day from `first` to `last`, the slots summed (days without
    data are missing)."""
    ids = [site_day_id(site_id, day, slot) for day in _days(first, last) for slot in range(SLOTS)]
    days: dict[str, dict[str, Any]] = {}
    async for doc in store.collection(SITE_DAYS).find({"_id": {"$in": ids}}):
        day = days.setdefault(doc["day"], {name: Counter() for name in _DAY_COUNTERS})
        for name in ("pageviews", "errors", "leads", "scrollViews"):
            day[name] = day.get(name, 0) + int(doc.get(name) or 0)
        for name in _DAY_COUNTERS:
            day[name].update(doc.get(name) or {})
    return days


def period(documents: dict[str, dict[str, Any]], first: date, last: date) -> Period:
    """The figures of [first, last] from the day documents (which may hold more days)."""
    totals: Counter[str] = Counter()
    countries: Counter[str] = Counter()
    devices: Counter[str] = Counter()
    per_day: dict[str, dict[str, int]] = {}
    money: dict[str, Counter[str]] = {"orders": Counter(), "revenue": Counter()}
    money_per_day: dict[str, dict[str, Counter[str]]] = {}
    visitors = 0
    engaged: dict[str, Counter[str]] = {"timeOnPage": Counter(), "scrollReach": Counter()}
    scroll_views = 0
    for offset, day in enumerate(_days(first, last)):
        doc = documents.get(day) or {}
        for name, counts in engaged.items():
            counts.update(doc.get(name) or {})
        scroll_views += int(doc.get("scrollViews") or 0)
        figures = {name: int(doc.get(name) or 0) for name in ("pageviews", "errors", "leads")}
        per_day[day] = figures
        totals.update(figures)
        money_per_day[day] = {name: +Counter(doc.get(name) or {}) for name in money}
        for name, amounts in money_per_day[day].items():
            money[name].update(amounts)
        for key, count in (doc.get("visitors") or {}).items():
            _when, _, rest = key.partition("|")
            country, _, device = rest.partition("|")
            # Counted here when this is the visitor's first active day in the period.
            if count > 0 and first_in_range(key, offset):
                visitors += count
                countries[country] += count
                devices[device] += count
    return Period(totals["pageviews"], totals["errors"], totals["leads"], visitors, countries,
                  devices, per_day, +money["orders"], +money["revenue"], money_per_day,
                  engaged["timeOnPage"], scroll_views, engaged["scrollReach"])


async def page_figures(store: Store, site_id: str, first: date, last: date
                       ) -> list[dict[str, Any]]:
    """Pageviews, rage and dead clicks per page over the days, one indexed query."""
    rows = store.collection(PAGE_DAYS).aggregate([
        # Days by $in: one index bound per day (and a store that mishandles equal range
        # bounds answers it right; see documents/heatmaps.py).
        {"$match": {"siteId": site_id, "day": {"$in": _days(first, last)}}},
        {"$group": {"_id": "$page", "pageviews": {"$sum": "$pageviews"},
                    "rageClicks": {"$sum": "$rageClicks"},
                    "deadClicks": {"$sum": "$deadClicks"}}},
    ])
    return [row async for row in rows]


async def session_figures(store: Store, site_id: str, first: date, last: date, *,
                          dimensions: Iterable[str] = visits.DIMENSIONS
                          ) -> dict[str, Counter[str]]:
    """Sessions per dimension and value (`visits.DIMENSIONS`, or the journeys' outcome counts,
    a hit's by its `<outcome>:<name>` value) that started between `first` and `last`, one
    indexed query per dimension."""
    days = _days(first, last)

    async def one(dimension: str) -> Counter[str]:
        if dimension in journeys.HIT_DIMENSIONS:
            return await _hit_figures(store, site_id, dimension, days)
        # The index bounds are the site, the dimension and each day (`$in`, one bound per
        # day); what is matched beyond them is a later stage, so no store scans the site.
        rows = store.collection(SESSION_DAYS).aggregate([
            {"$match": {"siteId": site_id, "dimension": dimension, "day": {"$in": days}}},
            {"$match": {"sessions": {"$gt": 0}}},
            {"$group": {"_id": "$value", "sessions": {"$sum": "$sessions"}}},
        ])
        return Counter({row["_id"]: int(row["sessions"]) async for row in rows})

    dimensions = list(dict.fromkeys(dimensions))
    return dict(zip(dimensions, await asyncio.gather(*map(one, dimensions)), strict=True))


async def session_figures_by_day(store: Store, site_id: str, days: Iterable[date],
                                 dimension: str) -> dict[date, Counter[str]]:
    """Sessions per value of one dimension (not a hit's) on each of `days`, however far
    apart: one indexed query."""
    days = list(days)
    figures: dict[date, Counter[str]] = {day: Counter() for day in days}
    async for doc in store.collection(SESSION_DAYS).find(
            {"siteId": site_id, "dimension": dimension,
             "day": {"$in": [day.isoformat() for day in days]}},
            {"day": 1, "value": 1, "sessions": 1}):
        if doc["sessions"] > 0:
            figures[date.fromisoformat(doc["day"])][doc["value"]] += int(doc["sessions"])
    return figures


async def _hit_figures(store: Store, site_id: str, dimension: str, days: list[str]
                       ) -> Counter[str]:
    counts: Counter[str] = Counter()
    async for doc in store.collection(SESSION_DAYS).find(
            {"siteId": site_id, "dimension": dimension, "day": {"$in": days}},
            {"value": 1, journeys.HITS: 1}):
        for key, count in (doc.get(journeys.HITS) or {}).items():
            if count > 0:
                counts[journeys.joined_hit(key, doc["value"])] += int(count)
    return counts


@dataclass
class ErrorFigures:
    """One error's figures over a range, from its day documents."""

    occurrences: int = 0
    visitors: int = 0
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    per_day: Counter[str] = field(default_factory=Counter)


async def error_figures(store: Store, site_id: str, first: date, last: date
                        ) -> dict[str, ErrorFigures]:
    """Each error's occurrences, distinct visitors hit, first and last moment and occurrences
    per day between `first` and `last`: one indexed read of errors × days documents."""
    days = _days(first, last)
    offsets = {day: offset for offset, day in enumerate(days)}
    figures: dict[str, ErrorFigures] = defaultdict(ErrorFigures)
    # Only the site and the days are matched: the index's bounds, so no store scans the site.
    async for doc in store.collection(ERROR_DAYS).find({"siteId": site_id, "day": {"$in": days}}):
        if int(doc.get("occurrences") or 0) <= 0:
            continue
        error = figures[doc["errorId"]]
        error.occurrences += int(doc["occurrences"])
        error.per_day[doc["day"]] += int(doc["occurrences"])
        error.visitors += sum(int(count) for key, count in (doc.get("visitors") or {}).items()
                              if count > 0 and first_in_range(key, offsets[doc["day"]]))
        if doc.get("first") is not None:
            error.first_seen = min(filter(None, (error.first_seen, doc["first"])))
            error.last_seen = max(filter(None, (error.last_seen, doc["last"])))
    return dict(figures)
