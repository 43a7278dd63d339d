"""Error aggregates, per-session error links, per-visitor occurrences and failed jobs.

* `errors`: one aggregate per (siteId, fingerprint), created or incremented by one atomic upsert
  on its `_id`, which is derived from the pair (so the `_id` index is the unique index).
  It keeps a bounded list of the job ids it has counted, so a job retried after its write
  succeeded is not counted twice.
* `error_sessions`: one link per (errorId, sessionId, visitorId, siteId), its `_id` a hash of
  the four.
* `error_occurrences`: one entry per job (`_id` is the job id): what a visitor hit, when, on
  which page and device and with which context, for the data-subject export (which must not
  hand over the aggregate) and the dashboard's per-error breakdowns. Erasure deletes them.
* `failed_jobs`: jobs that exhausted their retries or failed for good, with reason and attempts;
  Celery on Redis has no dead-letter queue, so this collection is it.

The error id is derived from (siteId, fingerprint), so links and occurrences can be written
before the aggregate, and the aggregate's upsert is the last write a job makes.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from pymongo import ReturnDocument

from documents import audit
from documents.retention import Expiry
from documents.store import ASCENDING, DESCENDING, DuplicateKeyError, Index, Store
from errors import NotFound

ERRORS = "errors"
SESSION_LINKS = "error_sessions"
OCCURRENCES = "error_occurrences"
FAILED_JOBS = "failed_jobs"

INDEXES = [
    # Uniqueness of (site, fingerprint) is the `_id` index: `_id` is derived from the pair.
    Index(ERRORS, (("siteId", ASCENDING), ("fingerprint", ASCENDING))),
    Index(ERRORS, (("siteId", ASCENDING), ("lastSeen", DESCENDING))),
    Index(ERRORS, (("siteId", ASCENDING), ("status", ASCENDING), ("lastSeen", DESCENDING))),
    Index(SESSION_LINKS, (("siteId", ASCENDING), ("sessionId", ASCENDING))),
    Index(SESSION_LINKS, (("siteId", ASCENDING), ("visitorId", ASCENDING))),
    Index(OCCURRENCES, (("siteId", ASCENDING), ("visitorId", ASCENDING),
                        ("occurredAt", DESCENDING))),
    Index(OCCURRENCES, (("siteId", ASCENDING), ("errorId", ASCENDING))),
    # Errors per day for the charts, and the errors list over a date range.
    Index(OCCURRENCES, (("siteId", ASCENDING), ("occurredAt", ASCENDING))),
    # The errors list filtered by page (a path prefix) over a date range.
    Index(OCCURRENCES, (("siteId", ASCENDING), ("page", ASCENDING), ("occurredAt", ASCENDING))),
    # One error's breakdown over a date range, and its latest occurrences.
    Index(OCCURRENCES, (("siteId", ASCENDING), ("errorId", ASCENDING),
                        ("occurredAt", DESCENDING))),
    Index(FAILED_JOBS, (("failedAt", DESCENDING),)),
    Index(FAILED_JOBS, (("siteId", ASCENDING), ("failedAt", DESCENDING))),
    # The site's oldest links, for retention (documents/retention.py); its oldest occurrences
    # are on the (siteId, occurredAt) index above.
    Index(SESSION_LINKS, (("siteId", ASCENDING), ("lastSeen", ASCENDING))),
]
SESSION_LINK_EXPIRY = Expiry(SESSION_LINKS, "lastSeen")
#: Occurrences and aggregates are anonymised when they expire, never deleted (privacy/erasure.py
#: says how): the ones still naming someone are the ones left to do.
OCCURRENCE_EXPIRY = Expiry(OCCURRENCES, "occurredAt")
ERROR_EXPIRY = Expiry(ERRORS, "lastSeen")
NAMING_SOMEONE: dict[str, Any] = {"$or": [
    {"visitorId": {"$ne": None}}, {"sessionId": {"$ne": None}}, {"wpUserId": {"$ne": None}}]}

#: How many counted job ids an aggregate remembers. Retries of one job arrive within seconds,
#: while thousands of other jobs would have to land in between to push its id out. A copy
#: relayed from the outbox comes OUTBOX_RELAY_AFTER_SECONDS or more later, but a copy of a
#: finished job is skipped before counting (its outbox entry is gone); only a job counted whose
#: entry was left behind (its worker died between the two) leans on this window then, and is
#: counted twice if more than this many other jobs of one aggregate were counted in between.
RECENT_JOBS = 2000
#: The aggregate as the pipeline needs it back: the job-id window is bookkeeping, and copying
#: its thousands of ids out with every count would cost more than the count.
WITHOUT_JOB_IDS = {"recentJobIds": 0}

_ERROR_ID_NAMESPACE = uuid.UUID("0d5a3b52-6a3f-4d1e-9a51-4f0c1d7e2b90")

#: A message that begins with what the title already says: Chromium's `ErrorEvent.message` is
#: "Uncaught TypeError: x is undefined", and the title is "type: message".
_REPEATED_TYPE = re.compile(r"^(?:Uncaught )?(?P<type>[A-Za-z_$][\w$.]*): (?=\S)")


def title_message(error_type: str, message: str) -> str:
    """The message as the title shows it after the type: without a repeated "[Uncaught ]type: "."""
    found = _REPEATED_TYPE.match(message)
    if found is None or found.group("type") != error_type.strip():
        return message
    return message[found.end():]


async def drop_repeated_types(store: Store) -> None:
    """Migration: titles of stored errors and occurrences no longer repeat their type."""
    for name in (ERRORS, OCCURRENCES):
        collection = store.collection(name)
        async for stored in collection.find({"message": {"$regex": _REPEATED_TYPE.pattern}},
                                            {"type": 1, "message": 1}):
            shown = title_message(stored.get("type") or "", stored["message"])
            if shown != stored["message"]:
                await collection.update_one({"_id": stored["_id"]}, {"$set": {"message": shown}})


def error_id_for(site_id: str, fingerprint: str) -> str:
    """The aggregate's id, derived so that every job of one fault agrees on it before writing."""
    return str(uuid.uuid5(_ERROR_ID_NAMESPACE, f"{site_id}\x00{fingerprint}"))


@dataclass(frozen=True)
class Occurrence:
    """One job's error, already anonymised and normalised, ready to be counted."""

    job_id: str
    site_id: str
    fingerprint: str
    type: str
    message: str
    source: str
    occurred_at: datetime
    visitor_id: str | None
    session_id: str | None
    wp_user_id: str | None
    ip_address: str | None
    context: dict[str, Any]
    stack: str | None
    url: str | None = None
    #: browser, os and deviceType, as ingest described the user agent.
    device: dict[str, str | None] = field(default_factory=dict)

    @property
    def page(self) -> str | None:
        """The URL's path: what the dashboard groups and filters pages by."""
        if not self.url:
            return None
        try:
            return urlsplit(self.url).path or "/"
        except ValueError:
            return None

    @property
    def error_id(self) -> str:
        """The id of the aggregate this occurrence counts towards."""
        return error_id_for(self.site_id, self.fingerprint)


@dataclass(frozen=True)
class Counted:
    """The aggregate after a job, and what the job did to it."""

    error: dict[str, Any]
    created: bool
    applied: bool


async def record_occurrence(store: Store, occurrence: Occurrence, *,
                            session: Any = None) -> bool:
    """Keep what this visitor hit and when; idempotent on the job id. True when this call
    stored it (False for a repeated job, and for an error that names no visitor or session)."""
    if not occurrence.visitor_id and not occurrence.session_id:
        return False
    result = await store.collection(OCCURRENCES).update_one(
        {"_id": occurrence.job_id},
        {"$setOnInsert": {
            "siteId": occurrence.site_id,
            "visitorId": occurrence.visitor_id,
            "sessionId": occurrence.session_id,
            "wpUserId": occurrence.wp_user_id,
            "errorId": occurrence.error_id,
            "fingerprint": occurrence.fingerprint,
            "type": occurrence.type,
            "message": occurrence.message,
            "source": occurrence.source,
            "occurredAt": occurrence.occurred_at,
            "url": occurrence.url,
            "page": occurrence.page,
            "browser": occurrence.device.get("browser"),
            "os": occurrence.device.get("os"),
            "deviceType": occurrence.device.get("deviceType"),
            "context": occurrence.context,
        }},
        upsert=True, session=session,
    )
    return result.upserted_id is not None


def session_link_id(occurrence: Occurrence) -> str:
    """The `_id` of the link between an error and the session (and visitor) it happened in."""
    key = "\x1f".join((occurrence.site_id, occurrence.error_id, occurrence.session_id or "",
                       occurrence.visitor_id or ""))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


async def link_session(store: Store, occurrence: Occurrence) -> None:
    """Link the error to the browser session it happened in; idempotent by its unique key."""
    if not occurrence.session_id:
        return
    fields = {"errorId": occurrence.error_id, "sessionId": occurrence.session_id,
              "visitorId": occurrence.visitor_id, "siteId": occurrence.site_id}
    # The link's identity is its `_id`, derived from the four fields: the `_id` index makes it
    # unique, and the write is a lookup by key rather than a search over every link.
    key = {"_id": session_link_id(occurrence)}
    links = store.collection(SESSION_LINKS)
    try:
        await links.update_one(
            key,
            {"$setOnInsert": {**fields, "firstSeen": occurrence.occurred_at},
             "$max": {"lastSeen": occurrence.occurred_at}},
            upsert=True,
        )
    except DuplicateKeyError:
        # Two jobs inserted the same link at once; the other one won, and that is the same link.
        await links.update_one(key, {"$max": {"lastSeen": occurrence.occurred_at}})


async def count_occurrence(store: Store, occurrence: Occurrence, now: datetime) -> Counted:
    """Create the aggregate or add one to it, atomically, at most once per job."""
    errors = store.collection(ERRORS)
    latest = {
        "lastOccurredAt": occurrence.occurred_at,
        "visitorId": occurrence.visitor_id,
        "sessionId": occurrence.session_id,
        "wpUserId": occurrence.wp_user_id,
        "ipAddress": occurrence.ip_address,
        "context": occurrence.context,
        "lastStack": occurrence.stack,
    }
    # First and last seen are when the error happened (the client's time, never ahead of the
    # server's), not when a worker got to it: the visitor page and the daily chart count the
    # same occurrences by their time, and a queue backlog or a replayed import must not move
    # them. `$min`/`$max` keep an occurrence that arrives late from moving them backwards.
    increment = {
        "$inc": {"occurrenceCount": 1},
        "$set": latest,
        "$min": {"firstSeen": occurrence.occurred_at},
        "$max": {"lastSeen": occurrence.occurred_at},
        "$push": {"recentJobIds": {"$each": [occurrence.job_id], "$slice": -RECENT_JOBS}},
    }
    on_insert = {
        "_id": occurrence.error_id,
        "siteId": occurrence.site_id,
        "fingerprint": occurrence.fingerprint,
        "type": occurrence.type,
        "message": occurrence.message,
        "source": occurrence.source,
        "status": "open",
        "firstJobId": occurrence.job_id,
    }
    # The `$ne` makes a second application of the same job match nothing.
    unapplied = {"_id": occurrence.error_id, "recentJobIds": {"$ne": occurrence.job_id}}
    try:
        after = await errors.find_one_and_update(
            unapplied, {**increment, "$setOnInsert": on_insert}, upsert=True,
            projection=WITHOUT_JOB_IDS, return_document=ReturnDocument.AFTER,
        )
    except DuplicateKeyError:
        # Either a concurrent job inserted the aggregate first, or this job was already counted
        # (then the filter matched nothing and the upsert collided); without upsert, the first
        # case counts and the second matches nothing.
        after = await errors.find_one_and_update(unapplied, increment,
                                                 projection=WITHOUT_JOB_IDS,
                                                 return_document=ReturnDocument.AFTER)
    if after is not None:
        return Counted(after, created=after.get("firstJobId") == occurrence.job_id,
                       applied=True)
    existing = await errors.find_one({"_id": occurrence.error_id}, WITHOUT_JOB_IDS)
    if existing is None:
        raise LookupError(f"error {occurrence.error_id} vanished while being counted")
    # Counted by an earlier attempt of this job, whose announcement may not have gone out.
    return Counted(existing, created=existing.get("firstJobId") == occurrence.job_id,
                   applied=False)


async def reopen_if_resolved(store: Store, error: dict[str, Any], job_id: str,
                             now: datetime) -> dict[str, Any] | None:
    """Re-open a resolved error; only one job wins, and it gets the re-opened document."""
    if error.get("status") == "open" and error.get("reopenedByJobId") == job_id:
        return error  # this job re-opened it in an earlier attempt; announce again
    if error.get("status") != "resolved":
        return None
    return await store.collection(ERRORS).find_one_and_update(
        {"_id": error["_id"], "status": "resolved"},
        {"$set": {"status": "open", "reopenedAt": now, "reopenedByJobId": job_id},
         "$inc": {"reopenCount": 1}},
        projection=WITHOUT_JOB_IDS, return_document=ReturnDocument.AFTER,
    )


async def store_failed_job(store: Store, job: dict[str, Any], *, queue: str, reason: str,
                           attempts: int, now: datetime) -> None:
    """Keep a job that will not be processed, with why and after how many attempts."""
    await store.collection(FAILED_JOBS).update_one(
        {"_id": job.get("jobId") or str(uuid.uuid4())},
        {"$set": {"siteId": job.get("siteId"), "queue": queue,
                  "job": job, "reason": reason, "attempts": attempts, "failedAt": now}},
        upsert=True,
    )


async def change_status(store: Store, site: dict[str, Any], error_id: str, status: str, *,
                        actor_user_id: str, account_id: str | None) -> dict[str, Any]:
    """Set the status (open, resolved, ignored) and audit a real change, in one transaction;
    the aggregate after. NotFound when the site has no such error."""

    async def change(session: Any) -> dict[str, Any]:
        now = datetime.now(UTC)
        before = await store.collection(ERRORS).find_one_and_update(
            {"_id": error_id, "siteId": site["_id"]},
            {"$set": {"status": status, "statusChangedAt": now,
                      "statusChangedBy": actor_user_id}},
            return_document=ReturnDocument.BEFORE, session=session,
        )
        if before is None:
            raise NotFound("error not found")
        if before.get("status", "open") != status:
            await audit.record(store, action="error.status_changed", actor_user_id=actor_user_id,
                               account_id=account_id, organization_id=site["organizationId"],
                               site_id=site["_id"], details={
                                   "errorId": error_id, "from": before.get("status", "open"),
                                   "to": status}, session=session)
        return {**before, "status": status, "statusChangedAt": now,
                "statusChangedBy": actor_user_id}

    return await store.transaction(change)


async def recently_announced(store: Store, site_id: str, since: datetime,
                             limit: int) -> list[dict[str, Any]]:
    """The site's errors that were new or re-opened since `since` (what the live feed
    announced), the most recently seen first."""
    # lastSeen bounds the scan on the (siteId, lastSeen) index: a new or re-opened error was
    # seen at or after that moment.
    cursor = store.collection(ERRORS).find(
        {"siteId": site_id, "lastSeen": {"$gte": since},
         "$or": [{"firstSeen": {"$gte": since}}, {"reopenedAt": {"$gte": since}}]},
        WITHOUT_JOB_IDS).sort("lastSeen", DESCENDING).limit(limit)
    return await cursor.to_list(limit)


async def sessions_hit(store: Store, site_id: str, error_id: str, start: datetime,
                       end: datetime, *, hidden: list[str], limit: int) -> list[str]:
    """Browser session ids the error hit in [start, end), the earliest hit first, the `hidden`
    visitors left out; on (siteId, errorId, occurredAt)."""
    # The index bounds first; what is matched beyond them is a stage of its own, so no store
    # scans the site's occurrences for it.
    beyond: dict[str, Any] = {"sessionId": {"$ne": None}}
    if hidden:
        beyond["visitorId"] = {"$nin": hidden}
    rows = store.collection(OCCURRENCES).aggregate([
        {"$match": {"siteId": site_id, "errorId": error_id,
                    "occurredAt": {"$gte": start, "$lt": end}}},
        {"$match": beyond},
        {"$group": {"_id": "$sessionId", "at": {"$min": "$occurredAt"}}},
        {"$sort": {"at": 1, "_id": 1}}, {"$limit": limit}])
    return [row["_id"] async for row in rows]


async def sessions_with_errors_on_pages(store: Store, site_id: str, prefixes: list[str],
                                        start: datetime, end: datetime) -> int:
    """Browser sessions with an error on a page under one of `prefixes` in [start, end), on
    (siteId, occurredAt): the pages and sessions are matched on those occurrences alone."""
    pattern = "^(?:" + "|".join(re.escape(prefix) for prefix in prefixes) + ")"
    rows = store.collection(OCCURRENCES).aggregate([
        {"$match": {"siteId": site_id, "occurredAt": {"$gte": start, "$lt": end}}},
        {"$match": {"page": {"$regex": pattern}, "sessionId": {"$ne": None}}},
        {"$group": {"_id": "$sessionId"}}, {"$count": "sessions"}])
    found = [row async for row in rows]
    return int(found[0]["sessions"]) if found else 0


async def occurrences_by_error(store: Store, site_id: str, start: datetime, end: datetime
                               ) -> Counter[str]:
    """Each error's occurrences in [start, end), on (siteId, occurredAt)."""
    rows = store.collection(OCCURRENCES).aggregate([
        {"$match": {"siteId": site_id, "occurredAt": {"$gte": start, "$lt": end}}},
        {"$group": {"_id": "$errorId", "occurrences": {"$sum": 1}}}])
    return Counter({row["_id"]: int(row["occurrences"]) async for row in rows})


async def anonymise_errors(store: Store, query: dict[str, Any],
                           strip_context: Callable[[Any], Any], *, session: Any = None) -> int:
    """Take the visitor out of the aggregates `query` finds (their context through
    `strip_context`); returns how many there were."""
    errors = store.collection(ERRORS)
    count = 0
    async for error in errors.find(query, {"context": 1}, session=session):
        await errors.update_one(
            {"_id": error["_id"]},
            {"$set": {"visitorId": None, "sessionId": None, "wpUserId": None,
                      "ipAddress": None, "context": strip_context(error.get("context") or {}),
                      "anonymisedAt": datetime.now(UTC)}},
            session=session,
        )
        count += 1
    return count


async def anonymise_occurrences(store: Store, query: dict[str, Any], *, session: Any = None
                                ) -> int:
    """Take the visit out of the occurrences `query` finds; returns how many matched."""
    # The fault and when it happened stay (the Errors list and the error counts read them);
    # everything about the visit goes: who, which session, which page and device, what context.
    result = await store.collection(OCCURRENCES).update_many(
        query,
        {"$set": {"visitorId": None, "sessionId": None, "wpUserId": None, "url": None,
                  "page": None, "browser": None, "os": None, "deviceType": None,
                  "context": {}, "anonymisedAt": datetime.now(UTC)}},
        session=session,
    )
    return result.matched_count


async def count_errors(store: Store, site_id: str) -> int:
    """How many error aggregates the site has."""
    return await store.collection(ERRORS).count_documents({"siteId": site_id})


async def find_error(store: Store, site_id: str, error_id: str) -> dict[str, Any] | None:
    """One of the site's error aggregates, or None."""
    return await store.collection(ERRORS).find_one({"_id": error_id, "siteId": site_id})


def errors_matching(store: Store, filter_: dict[str, Any], projection: dict[str, Any]) -> Any:
    """A cursor over the error aggregates `filter_` finds (a site's, by id)."""
    return store.collection(ERRORS).find(filter_, projection)


async def latest_occurrences_of_visitor(store: Store, site_id: str, visitor_id: str, *,
                                        limit: int) -> list[dict[str, Any]]:
    """The visitor's latest occurrences, newest first."""
    return await store.collection(OCCURRENCES).find(
        {"siteId": site_id, "visitorId": visitor_id}).sort("occurredAt", DESCENDING).limit(
        limit).to_list(None)


def occurrences_between(store: Store, site_id: str, visitor_ids: list[str], low: datetime,
                        high: datetime, projection: dict[str, Any], *, session: Any = None
                        ) -> Any:
    """A cursor over these visitors' occurrences from `low` to `high` (both included)."""
    return store.collection(OCCURRENCES).find(
        {"siteId": site_id, "visitorId": {"$in": visitor_ids},
         "occurredAt": {"$gte": low, "$lte": high}}, projection, session=session)


def occurrences_matching(store: Store, match: dict[str, Any],
                         projection: dict[str, Any] | None) -> Any:
    """A cursor over the occurrences `match` finds (one error's, over a range)."""
    return store.collection(OCCURRENCES).find(match, projection)


async def occurrence_bounds(store: Store, site_id: str, error_id: str, start: datetime,
                            end: datetime, excluded_visitors: list[str], *, session: Any = None
                            ) -> tuple[datetime, datetime] | None:
    """The first and last moment the error occurred in [start, end), leaving out these
    visitors' occurrences; None when there was none. Two reads of one index range."""
    match: dict[str, Any] = {"siteId": site_id, "errorId": error_id,
                             "occurredAt": {"$gte": start, "$lt": end}}
    if excluded_visitors:
        match["visitorId"] = {"$nin": excluded_visitors}
    bounds = []
    for direction in (ASCENDING, DESCENDING):
        found = await store.collection(OCCURRENCES).find_one(
            match, {"occurredAt": 1}, sort=[("occurredAt", direction)], session=session)
        if found is None:
            return None
        bounds.append(found["occurredAt"])
    return bounds[0], bounds[1]


async def visitors_with_errors(store: Store, site_id: str, visitor_ids: list[str]) -> set[str]:
    """Those of these visitors who hit an error."""
    return set(await store.collection(OCCURRENCES).distinct(
        "visitorId", {"siteId": site_id, "visitorId": {"$in": visitor_ids}}))


async def occurrences_per_error(store: Store, match: dict[str, Any]) -> list[dict[str, Any]]:
    """For each error among the occurrences `match` finds: its occurrences, the visitors it hit,
    and its first and last time."""
    return await store.collection(OCCURRENCES).aggregate([
        {"$match": match},
        # Per (error, visitor) first, so visitors are counted without holding them in a set.
        {"$group": {"_id": {"error": "$errorId", "visitor": "$visitorId"},
                    "count": {"$sum": 1}, "first": {"$min": "$occurredAt"},
                    "last": {"$max": "$occurredAt"}}},
        {"$group": {"_id": "$_id.error", "occurrences": {"$sum": "$count"},
                    "visitors": {"$sum": {"$cond": [{"$ifNull": ["$_id.visitor", False]},
                                                    1, 0]}},
                    "firstSeen": {"$min": "$first"}, "lastSeen": {"$max": "$last"}}},
    ]).to_list(None)


def occurrences_per_error_and_day(store: Store, match: dict[str, Any], day: Any) -> Any:
    """A cursor over the count of the occurrences `match` finds per error and `day` (an
    expression of the occurrence's day)."""
    return store.collection(OCCURRENCES).aggregate([
        {"$match": match},
        {"$group": {"_id": {"error": "$errorId", "day": day}, "count": {"$sum": 1}}},
    ])


async def occurrences_counted_by(store: Store, match: dict[str, Any], key: Any,
                                 limit: int | None) -> list[dict[str, Any]]:
    """The occurrences `match` finds counted by `key` with the latest time of each, the most
    first (then the latest, then by key), `limit` of them when given."""
    pipeline: list[dict[str, Any]] = [
        {"$match": match},
        {"$group": {"_id": key, "count": {"$sum": 1}, "last": {"$max": "$occurredAt"}}},
        {"$sort": {"count": DESCENDING, "last": DESCENDING, "_id": ASCENDING}}]
    if limit:
        pipeline.append({"$limit": limit})
    return await store.collection(OCCURRENCES).aggregate(pipeline).to_list(None)
