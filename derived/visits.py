"""Visits: one document per (site, visitor, browser session), kept by the derivation's fold.

A visit says where the session came from (the landing pageview's referrer domain and UTM
source, medium and campaign, captured at ingest as raw facts of the pageview), its entry and
exit pages, when it started and ended, the visitor's country and device, and its first
MAX_PAGES pages in time order (what funnels match page patterns against).

Visits are the visitor's data (exported, erased with them). Like `visitor_days` they are
written only by the fold, so they hold exactly what is folded; what a visit adds to the daily
session figures (`session_days`, derived/daily_figures.py) is `contributions(visit)`, and the fold
applies the difference a pageview makes to it (decision "Issue 31" in docs/decisions.md).

Sessions are found by outcome (issue 41 point 5, the sessions list and saved segments,
documents/segments.py) through what every save writes beside the visit, a function of the visit
alone like its contributions: `filterKeys`, one "kind:value" string per thing a session can be
found by (its entry and exit, each page, UTM campaign and source, source, device, country,
each error hit, each page with a rage or dead click, and whether and in which currencies it
paid), on one index with the start; and `orderValues`, its paid orders' net revenue per
currency, which a value filter ranges over (`matching`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from derived import engagement, journeys
from documents import commerce
from documents.retention import Expiry
from documents.segments import SessionFilters
from documents.store import ASCENDING, DESCENDING, Index, Store
from errors import InvalidInput
from instants import DayClock, days_condition

COLLECTION = "visit_sessions"
#: Pages kept per visit, the earliest first: funnels look at these. A visit of more pages
#: still counts every pageview, its entry and its exit.
MAX_PAGES = 100
#: URLs are cut to this many characters: a page to match patterns against, not a record.
MAX_URL = 1024
#: UTM values and referrer domains are cut to this many characters.
MAX_LABEL = 100
#: The referrer of a visit without one, or from the site's own pages.
DIRECT = "(direct)"
UTM_FIELDS = {"utm_source": "utmSource", "utm_medium": "utmMedium",
              "utm_campaign": "utmCampaign"}
#: What the daily session figures are kept by (`session_days` documents' `dimension`).
DIMENSIONS = ("all", "entry", "exit", "referrer", "source", "utmSource", "utmMedium",
              "utmCampaign", engagement.BOUNCE, engagement.LENGTH)

INDEXES = [
    # A site's visits by start: funnels over a date range, source filters.
    Index(COLLECTION, (("siteId", ASCENDING), ("startedAt", ASCENDING))),
    # A visitor's visits: erasure, export, restriction; the last before a moment (journeys).
    Index(COLLECTION, (("siteId", ASCENDING), ("visitorId", ASCENDING), ("startedAt", ASCENDING))),
    # Sessions found by outcome (`matching`): a site's visits of one filter key by start; the
    # other keys of a combination, and the value range, are matched on the visits it reads.
    Index(COLLECTION, (("siteId", ASCENDING), ("filterKeys", ASCENDING), ("startedAt", ASCENDING))),
]
#: A visit goes with the pageviews it was made of (retention's "activity"): when it started
#: before the cutoff. What it added to the session figures stays, as anyone's.
EXPIRY = Expiry(COLLECTION, "startedAt")


def _host(url: Any) -> str | None:
    if not isinstance(url, str) or not url:
        return None
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    return host.lower() if host else None


def own_hostnames(origins: Iterable[str]) -> frozenset[str]:
    """The host names of the site's allowed origins, `www.` and all."""
    return frozenset(host for origin in origins if (host := _host(origin)))


def landing_source(url: Any, referrer: Any, own: frozenset[str]) -> dict[str, str]:
    """Where a pageview came from: the referrer's domain unless it is one of the site's own
    hosts (or the page's), and the `utm_source`, `utm_medium` and `utm_campaign` of the page's
    query, lower case. Empty when it came from nowhere outside the site."""
    source: dict[str, str] = {}
    page_host = _host(url)
    domain = _host(referrer)
    if domain and domain != page_host and domain not in own:
        source["referrerDomain"] = domain.removeprefix("www.")[:MAX_LABEL]
    if isinstance(url, str) and "utm_" in url:
        try:
            query = parse_qs(urlsplit(url).query)
        except ValueError:
            query = {}
        for name, field in UTM_FIELDS.items():
            value = (query.get(name) or [""])[0].strip().lower()[:MAX_LABEL]
            if value:
                source[field] = value
    return source


def source_label(source: dict[str, Any] | None) -> str:
    """The one name a visit's source is filtered and broken down by: the UTM source when
    tagged, else the referrer domain, else "(direct)"."""
    source = source or {}
    return source.get("utmSource") or source.get("referrerDomain") or DIRECT


def page_path(url: Any) -> str:
    """The URL's path, as pages are shown (derived/daily_figures.py groups pages the same way)."""
    if not isinstance(url, str) or not url:
        return "unknown"
    try:
        return (urlsplit(url).path or "/")[:512]
    except ValueError:
        return "unknown"


def session_key(record: dict[str, Any], clock: DayClock) -> str:
    """A pageview's visit: its browser session, or for a pageview sent without one, its
    visitor's day (the site's)."""
    session_id = record.get("sessionId")
    if isinstance(session_id, str) and session_id:
        return f"s:{session_id}"
    return f"d:{clock.day_of(record['at'])}"


def visit_id(site_id: str, visitor_id: str, key: str) -> str:
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"{site_id}:{visitor_id}:{digest}"


def with_pageview(visit: dict[str, Any] | None, record: dict[str, Any], *, site_id: str,
                  visitor_id: str, country: Any, device: Any, clock: DayClock
                  ) -> dict[str, Any]:
    """The visit once this pageview (a fact's record: at, url, sessionId, source, product)
    is in it. The earliest pageview is the entry and gives the source; the latest is the exit
    (of two at the same moment, the one folded later). A visit of no pageviews yet (a journey
    record folded first) is filled as a new one, its journey kept."""
    at: datetime = record["at"]
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    url = record.get("url")
    page = {"url": url[:MAX_URL] if isinstance(url, str) else None, "at": at,
            "product": bool(record.get("product"))}
    if visit is None or not visit.get("pageviews"):
        key = session_key(record, clock)
        return {"_id": visit_id(site_id, visitor_id, key), "siteId": site_id,
                "visitorId": visitor_id, "sessionId": record.get("sessionId") or None,
                "startedAt": at, "endedAt": at, "day": clock.day_of(at),
                "country": country.upper() if isinstance(country, str) and country else None,
                "device": device or None, "entry": page_path(url), "exit": page_path(url),
                "source": dict(record.get("source") or {}), "pageviews": 1, "pages": [page],
                "journey": (visit or {}).get("journey") or journeys.empty()}
    visit = dict(visit)
    started = _aware(visit["startedAt"])
    if at < started:
        visit.update(startedAt=at, day=clock.day_of(at), entry=page_path(url),
                     source=dict(record.get("source") or {}))
    if at >= _aware(visit["endedAt"]):
        visit.update(endedAt=at, exit=page_path(url))
    pages = sorted([*visit.get("pages", []), page], key=lambda p: _aware(p["at"]))
    visit["pages"] = pages[:MAX_PAGES]
    visit["pageviews"] = int(visit.get("pageviews") or 0) + 1
    return visit


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def contributions(visit: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    """(day, dimension, value) of each daily session figure the visit counts 1 in: all
    sessions, its entry and exit pages, its referrer, source and UTM values, whether it
    bounced and its length, and its journey's outcome (derived/journeys.py), all on the day
    it started. A visit of no pageviews yet
    counts nothing."""
    if visit is None or not visit.get("pageviews"):
        return []
    day = visit["day"]
    source = visit.get("source") or {}
    keys = [(day, "all", "sessions"), (day, "entry", visit["entry"]),
            (day, "exit", visit["exit"]),
            (day, "referrer", source.get("referrerDomain") or DIRECT),
            (day, "source", source_label(source))]
    keys += [(day, field, source[field]) for field in ("utmSource", "utmMedium", "utmCampaign")
             if source.get(field)]
    # Engagement (derived/engagement.py): a bounce is a visit of one pageview; its length runs
    # from its first pageview to its last.
    length = (_aware(visit["endedAt"]) - _aware(visit["startedAt"])).total_seconds()
    keys += [(day, engagement.BOUNCE, "1" if visit["pageviews"] == 1 else "0"),
             (day, engagement.LENGTH, str(engagement.bucket_of(length)))]
    return keys + journeys.outcome_contributions(visit)


# Writes (by the fold and the rebuild only) ----------------------------------------------------


async def find_visit(store: Store, site_id: str, visitor_id: str, record: dict[str, Any], *,
                     clock: DayClock, session: Any) -> dict[str, Any] | None:
    """The visit a pageview belongs to, as folded so far."""
    return await store.collection(COLLECTION).find_one(
        {"_id": visit_id(site_id, visitor_id, session_key(record, clock))}, session=session)


def journey_stub(site_id: str, visitor_id: str, session_id: str, at: datetime,
                 clock: DayClock) -> dict[str, Any]:
    """A browser session's visit before any of its pageviews is folded: it holds the journey
    records folded first, and counts nothing until its first pageview fills it."""
    return {"_id": visit_id(site_id, visitor_id, f"s:{session_id}"), "siteId": site_id,
            "visitorId": visitor_id, "sessionId": session_id, "startedAt": at, "endedAt": at,
            "day": clock.day_of(at), "pageviews": 0, "pages": []}


async def journey_visit(store: Store, site_id: str, visitor_id: str, session_id: Any,
                        at: datetime, *, clock: DayClock, session: Any
                        ) -> dict[str, Any] | None:
    """The visit a journey record belongs to (derived/journeys.py): its browser session's
    (a stub when none is folded yet), or for a record sent without one, the visitor's visit
    that started last before it, if the record came at most `journeys.LATE` after that
    visit's last pageview; None when there is no such visit."""
    if isinstance(session_id, str) and session_id:
        found = await store.collection(COLLECTION).find_one(
            {"_id": visit_id(site_id, visitor_id, f"s:{session_id}")}, session=session)
        return found or journey_stub(site_id, visitor_id, session_id, _aware(at), clock)
    found = await store.collection(COLLECTION).find_one(
        {"siteId": site_id, "visitorId": visitor_id, "startedAt": {"$lte": at},
         "pageviews": {"$gt": 0}}, sort=[("startedAt", DESCENDING)], session=session)
    if found is None or _aware(found["endedAt"]) + journeys.LATE < _aware(at):
        return None
    return found


async def save_visit(store: Store, visit: dict[str, Any], *, session: Any) -> None:
    await store.collection(COLLECTION).replace_one({"_id": visit["_id"]}, findable(visit),
                                                   upsert=True, session=session)


async def replace_site(store: Store, site_id: str, visits: list[dict[str, Any]]) -> None:
    """The site's visits as a rebuild worked them out."""
    await store.collection(COLLECTION).delete_many({"siteId": site_id})
    for offset in range(0, len(visits), 1000):
        await store.collection(COLLECTION).insert_many(
            [findable(visit) for visit in visits[offset:offset + 1000]])


async def add_filter_keys(store: Store) -> None:
    """Give every stored visit its filter keys and order values (a start-up migration for the
    visits folded before sessions were found by outcome)."""
    batch: list[dict[str, Any]] = []
    async for visit in store.collection(COLLECTION).find({"filterKeys": None}):
        batch.append(visit)
        if len(batch) == 500:
            await _rewrite(store, batch)
            batch = []
    await _rewrite(store, batch)


async def _rewrite(store: Store, batch: list[dict[str, Any]]) -> None:
    for visit in batch:
        found = findable(visit)
        await store.collection(COLLECTION).update_one(
            {"_id": visit["_id"]}, {"$set": {"filterKeys": found["filterKeys"],
                                            "orderValues": found["orderValues"]}})


# Finding sessions by outcome ------------------------------------------------------------------

#: The filter key of a session with a paid order, and the prefix of one per currency paid in.
CONVERTED = "converted"
PAID_IN = "paid:"


def paid_values(visit: dict[str, Any]) -> dict[str, int]:
    """The net revenue of the session's paid orders, in minor units per currency."""
    values: dict[str, int] = {}
    for _order, _at, currency, orders, revenue in journeys.of(visit)["orders"]:
        if orders > 0:
            values[currency] = values.get(currency, 0) + int(revenue)
    return values


def filter_keys(visit: dict[str, Any]) -> list[str]:
    """What the session can be found by, as "kind:value" strings (`matching`); nothing for a
    visit of no pageviews yet."""
    if not visit.get("pageviews"):
        return []
    source = visit.get("source") or {}
    journey = journeys.of(visit)
    keys = {f"entry:{visit.get('entry')}", f"exit:{visit.get('exit')}",
            f"source:{source_label(source)}"}
    keys |= {f"page:{page_path(page.get('url'))}" for page in visit.get("pages") or []
             if isinstance(page, dict)}
    keys |= {f"{field}:{source[field]}" for field in ("utmCampaign", "utmSource")
             if source.get(field)}
    keys |= {f"{field}:{visit[field]}" for field in ("device", "country") if visit.get(field)}
    keys |= {f"error:{error_id}" for error_id, _ in journey["errors"]}
    keys |= {f"frustration:{page}" for page, _ in journey["frustrated"]}
    paid = paid_values(visit)
    if paid:
        keys |= {CONVERTED, *(f"{PAID_IN}{currency}" for currency in paid)}
    return sorted(keys)


def findable(visit: dict[str, Any]) -> dict[str, Any]:
    """The visit with its filter keys and order values, as it is saved."""
    return {**visit, "filterKeys": filter_keys(visit), "orderValues": paid_values(visit)}


#: Each key-matched filter's kind of key, by the `SessionFilters` field that names it.
_KEYED = {"utm_campaign": "utmCampaign", "utm_source": "utmSource", "source": "source",
          "entry": "entry", "exit": "exit", "page": "page", "error": "error",
          "frustration": "frustration", "device": "device", "country": "country"}


def _amount(raw: str | None, currency: str, name: str) -> int | None:
    if raw is None:
        return None
    try:
        return commerce.minor_units(raw, currency)
    except commerce.InvalidMoney as exc:
        raise InvalidInput(f"{name}: {exc}", field=name) from None


def matching(filters: SessionFilters, currency: str | None) -> dict[str, Any]:
    """The query condition of the visits the filters find (every filter must hold), on the
    index of (siteId, filterKeys, startedAt) when one is key-matched. A value is in the site's
    reporting `currency`; InvalidInput when a value is asked for and there is none yet."""
    keys: list[str] = []
    clauses: list[dict[str, Any]] = []
    for field, kind in _KEYED.items():
        value = getattr(filters, field)
        if value is None:
            continue
        if kind in ("entry", "exit", "page", "frustration") and value.endswith("*"):
            clauses.append({"filterKeys": {"$regex": "^" + re.escape(f"{kind}:{value[:-1]}")}})
        else:
            keys.append(f"{kind}:{value}")
    if filters.converted is True:
        keys.append(CONVERTED)
    elif filters.converted is False:
        clauses.append({"filterKeys": {"$ne": CONVERTED}})
    if filters.min_value is not None or filters.max_value is not None:
        if currency is None:
            raise InvalidInput("an order value is in the site's reporting currency, and the "
                               "site has none yet", field="minValue" if filters.min_value
                               is not None else "maxValue")
        keys.append(f"{PAID_IN}{currency}")
        within: dict[str, int] = {}
        if (low := _amount(filters.min_value, currency, "minValue")) is not None:
            within["$gte"] = low
        if (high := _amount(filters.max_value, currency, "maxValue")) is not None:
            within["$lte"] = high
        clauses.append({f"orderValues.{currency}": within})
    if keys:
        clauses.insert(0, {"filterKeys": {"$all": keys}})
    return {"$and": clauses} if clauses else {}


def seek_key(clauses: list[dict[str, Any]]) -> dict[str, Any]:
    """The equality the index of (siteId, filterKeys, startedAt) seeks for the clauses of
    `matching` conditions: their first filter key (the clauses still hold them all); {}
    when none is key-matched."""
    for clause in clauses:
        if keys := clause.get("filterKeys", {}).get("$all"):
            return {"filterKeys": keys[0]}
    return {}


# Reads ----------------------------------------------------------------------------------------


async def visits_of(store: Store, site_id: str, visitor_id: str, *, session: Any = None
                    ) -> AsyncIterator[dict[str, Any]]:
    """The visitor's visits, as folded."""
    async for visit in store.collection(COLLECTION).find(
            {"siteId": site_id, "visitorId": visitor_id}, session=session):
        yield visit


def bounded_and_rest(site_id: str, within: dict[str, Any] | None, *conditions: dict[str, Any]
                     ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The condition of the site's kept visits (a pageview) meeting `within` (`matching`) and
    every condition, in two: what an index bounds (the site and the one filter key `seek_key`
    picks), to be matched first, and the rest, to be matched in a later stage. SecantusDB
    scans the whole collection for a query with a second operator beside a range's."""
    bounded = {"siteId": site_id, **seek_key((within or {}).get("$and", []))}
    rest = [{"pageviews": {"$gt": 0}}, *(condition for condition in (within, *conditions)
                                        if condition)]
    return bounded, {"$and": rest}


def _reading(site_id: str, started: dict[str, Any] | None, within: dict[str, Any] | None,
             *conditions: dict[str, Any]) -> list[dict[str, Any]]:
    """The stages that find what `bounded_and_rest` says, of visits that started within
    `started` (any when None)."""
    bounded, rest = bounded_and_rest(site_id, within, *conditions)
    if started is not None:
        bounded["startedAt"] = started
    return [{"$match": bounded}, {"$match": rest}]


async def visits_between(store: Store, site_id: str, first: date, last: date, *,
                         clock: DayClock, hidden: list[str], source: str | None = None,
                         within: dict[str, Any] | None = None,
                         ) -> AsyncIterator[dict[str, Any]]:
    """The site's visits that started on the site's days `first` to `last` (`clock`),
    restricted visitors (`hidden`) left out, of one source (`source_label`) when given, and
    meeting `within` (a segment's `matching`) when given; read on (siteId, startedAt), or on
    the filter keys when `within` has one."""
    stages = _reading(site_id, days_condition(first, last, clock), within,
                      {"visitorId": {"$nin": hidden}} if hidden else {},
                      source_filter(source) if source is not None else {})
    stages.append({"$project": {"source": 1, "visitorId": 1, "sessionId": 1, "country": 1,
                                "device": 1, "pages": 1, "startedAt": 1, "day": 1,
                                "journey": 1}})
    async for visit in store.collection(COLLECTION).aggregate(stages):
        yield visit


def source_filter(source: str) -> dict[str, Any]:
    """The query condition of visits whose `source_label` is `source`."""
    if source == DIRECT:
        return {"source.utmSource": None, "source.referrerDomain": None}
    return {"$or": [{"source.utmSource": source},
                    {"source.utmSource": None, "source.referrerDomain": source}]}


async def session_ids_matching(store: Store, site_id: str, within: dict[str, Any],
                               first: datetime, last: datetime, *, hidden: list[str],
                               limit: int) -> list[str]:
    """Browser session ids of the site's visits meeting `within` (`matching`) that started in
    [first, last), the newest first, restricted visitors (`hidden`) left out."""
    stages = _reading(site_id, {"$gte": first, "$lt": last}, within,
                      {"sessionId": {"$ne": None}},
                      {"visitorId": {"$nin": hidden}} if hidden else {})
    rows = store.collection(COLLECTION).aggregate([
        *stages, {"$sort": {"startedAt": DESCENDING}}, {"$limit": limit},
        {"$project": {"sessionId": 1}}])
    return [visit["sessionId"] async for visit in rows]


async def visitor_ids_matching(store: Store, site_id: str, within: dict[str, Any], *,
                               hidden: list[str], limit: int) -> list[str]:
    """The visitors with a kept visit meeting `within` (`matching`), those of the newest
    visits first, at most `limit`; restricted visitors (`hidden`) left out."""
    rows = store.collection(COLLECTION).aggregate([
        *_reading(site_id, None, within, {"visitorId": {"$nin": hidden}} if hidden else {}),
        {"$group": {"_id": "$visitorId", "last": {"$max": "$startedAt"}}},
        {"$sort": {"last": DESCENDING, "_id": DESCENDING}},
        {"$limit": limit},
    ])
    return [row["_id"] async for row in rows]


async def session_ids_from(store: Store, site_id: str, source: str, first: datetime,
                           last: datetime, *, limit: int) -> list[str]:
    """Browser session ids of the site's visits from `source` that started in [first, last)."""
    rows = store.collection(COLLECTION).aggregate([
        *_reading(site_id, {"$gte": first, "$lt": last}, None, {"sessionId": {"$ne": None}},
                  source_filter(source)),
        {"$limit": limit}, {"$project": {"sessionId": 1}}])
    return [visit["sessionId"] async for visit in rows]
