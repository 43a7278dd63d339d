"""Retention: how long each kind of data is kept, and the purge's own records (issue 32).

`KINDS` is the one table of the kinds of data a shop owner sets a retention for, with the
default, the minimum and the maximum in days and the reason for them (decision "Issue 32:
retention" in docs/decisions.md). A site stores its choices under `settings.retentionDays`;
what is not set there is the default.

Each collection family says when its documents expire with an `Expiry` declared next to its
indexes, and does its own deleting through `delete_expired` and friends below; the purge's
order and rules live in privacy/retention.py, its loop in tasks/purge.py.

The purge's own records:

* `retention_runs`: one document per run, with the instant its cutoffs are measured from, the
  (site, kind) pairs it finished, and what it removed. A run that stops (crash, failure) is
  resumed by the next pass from where it was: pairs already done are skipped, and the deletes
  are by age, so what was removed is not found again.
* `retention_status`: one document per (site, kind): the retention applied, the oldest item
  left, when it was last purged and how many items that run and all runs removed. It is
  incremented in the transaction of each batch, so the counts are exact across crashes. Two
  more, site-less, say since when a process watches for runs (`WATCH`) and which overdue
  episode was notified (`OVERDUE_NOTICE`): see `purge_clock`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pymongo import ReturnDocument

from documents.accounts import new_id
from documents.store import ASCENDING, DESCENDING, DuplicateKeyError, Index, Store

RUNS = "retention_runs"
STATUS = "retention_status"
#: The lease key the purge takes in the background loops' lease collection
#: (derived/derivation.py `claim`): one purge runner at a time across every process.
LEASE_KEY = "retention-purge"

INDEXES = [
    Index(RUNS, (("completedAt", ASCENDING), ("startedAt", DESCENDING))),
    Index(STATUS, (("siteId", ASCENDING), ("kind", ASCENDING))),
]
COLLECTIONS = [RUNS, STATUS]

DAY = timedelta(days=1)


@dataclass(frozen=True)
class RetentionKind:
    """One kind of data with its own retention."""

    key: str
    label: str
    default_days: int
    min_days: int
    max_days: int
    #: The access export's sections this retention applies to.
    sections: tuple[str, ...]
    #: False for a period the law sets, which no site may change.
    settable: bool = True


#: 25 months: the CNIL's cap for audience-measurement data, and a year and a month past the
#: visitor cookie's two-year lifetime.
MONTHS_25 = 761
#: Five years: the limitation period (French Code civil art. 2224) during which a controller may
#: have to prove a consent or show how it answered a data-subject request.
LEGAL_PROOF = 1826

KINDS: tuple[RetentionKind, ...] = (
    RetentionKind("recordings", "Session recordings and their footage", 90, 7, 730,
                  ("recordings", "recordingSegments")),
    RetentionKind("heatmaps", "Heatmap images", 90, 7, 730, ("heatmapImages",)),
    RetentionKind("errors", "Errors' links to visitors and their occurrences", 90, 7, MONTHS_25,
                  ("faults", "errorSessions", "errorRecords")),
    RetentionKind("activity", "Pageviews and interactions", MONTHS_25, 30, MONTHS_25,
                  ("pageviews", "interactions", "visits")),
    RetentionKind("leads", "Leads, orders and checkout data", 1095, 30, 1095,
                  ("leads", "orders", "commerceEvents")),
    RetentionKind("surveys", "Survey answers", 365, 30, MONTHS_25, ("surveyResponses",)),
    RetentionKind("chats", "Chat transcripts", 365, 30, 1095, ("chatTranscripts",)),
    RetentionKind("consent", "Consent decisions", LEGAL_PROOF, LEGAL_PROOF, 2191,
                  ("consentDecisions",)),
    RetentionKind("visitors", "Visitor profiles not seen for this long", MONTHS_25, 30,
                  MONTHS_25, ("visitor", "activeDays")),
    RetentionKind("requestLog", "Data-subject request log (after completion)", LEGAL_PROOF,
                  LEGAL_PROOF, LEGAL_PROOF, (), settable=False),
)
BY_KEY = {kind.key: kind for kind in KINDS}
SETTABLE = tuple(kind.key for kind in KINDS if kind.settable)


class RetentionOutOfRange(ValueError):
    """A retention outside its kind's minimum and maximum; `kind` names it."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def checked_days(changes: dict[str, Any]) -> dict[str, int]:
    """Retention changes as whole days within each kind's range, or RetentionOutOfRange."""
    checked: dict[str, int] = {}
    for key, days in changes.items():
        kind = BY_KEY.get(key)
        if kind is None or not kind.settable:
            raise RetentionOutOfRange(key, f"{key} has no retention a site can set")
        if isinstance(days, bool) or not isinstance(days, int) \
                or not kind.min_days <= days <= kind.max_days:
            raise RetentionOutOfRange(key, f"{key} is kept between {kind.min_days} and "
                                           f"{kind.max_days} days")
        checked[key] = days
    return checked


def site_days(site: dict[str, Any]) -> dict[str, int]:
    """Every kind's retention in days for the site: its choice, else the default."""
    chosen = (site.get("settings") or {}).get("retentionDays") or {}
    return {kind.key: int(chosen.get(kind.key, kind.default_days)) if kind.settable
            else kind.default_days for kind in KINDS}


def cutoff(now: datetime, days: int) -> datetime:
    """The instant before which an item of a kind kept `days` days has expired."""
    return now - days * DAY


# What each family declares ---------------------------------------------------------------------


@dataclass(frozen=True)
class Expiry:
    """When a collection's documents expire: their time field, and how they name their site.

    `bucket` names a GridFS bucket when the collection is its `.files`: the files go with their
    chunks.
    """

    collection: str
    time_field: str
    site_field: str = "siteId"
    bucket: str | None = None

    def query(self, site_id: str, before: datetime | None = None) -> dict[str, Any]:
        """The site's documents, expired before `before` when given."""
        query: dict[str, Any] = {self.site_field: site_id}
        if before is not None:
            query[self.time_field] = {"$lt": before}
        return query


async def expired_ids(store: Store, expiry: Expiry, site_id: str, before: datetime, *,
                      limit: int, extra: dict[str, Any] | None = None,
                      session: Any = None) -> list[Any]:
    """The `_id`s of the site's oldest `limit` documents expired before `before`."""
    return [doc["_id"] for doc in await expired_documents(
        store, expiry, site_id, before, limit=limit, extra=extra, projection={"_id": 1},
        session=session)]


async def expired_documents(store: Store, expiry: Expiry, site_id: str, before: datetime, *,
                            limit: int, projection: dict[str, Any],
                            extra: dict[str, Any] | None = None, session: Any = None
                            ) -> list[dict[str, Any]]:
    """The site's oldest `limit` documents expired before `before` (the projection's fields),
    the ones a batch of the purge takes."""
    return await store.collection(expiry.collection).find(
        {**expiry.query(site_id, before), **(extra or {})}, projection, session=session,
    ).sort(expiry.time_field, ASCENDING).limit(limit).to_list(None)


async def delete_expired(store: Store, expiry: Expiry, site_id: str, before: datetime, *,
                         limit: int, extra: dict[str, Any] | None = None,
                         session: Any = None) -> tuple[int, int]:
    """Delete up to `limit` of the site's expired documents (files with their chunks), those
    matching `extra` when given; returns (documents found, documents deleted)."""
    ids = await expired_ids(store, expiry, site_id, before, limit=limit, extra=extra,
                            session=session)
    if not ids:
        return 0, 0
    if expiry.bucket is not None:
        deleted = await store.bucket(expiry.bucket).delete_where(
            {"_id": {"$in": ids}}, session=session)
    else:
        deleted = (await store.collection(expiry.collection).delete_many(
            {"_id": {"$in": ids}}, session=session)).deleted_count
    return len(ids), deleted


async def oldest(store: Store, expiry: Expiry, site_id: str,
                 extra: dict[str, Any] | None = None) -> datetime | None:
    """When the site's oldest document of the collection was made, or None."""
    cursor = store.collection(expiry.collection).find(
        {**expiry.query(site_id), expiry.time_field: {"$type": "date"}, **(extra or {})},
        {expiry.time_field: 1},
    ).sort(expiry.time_field, ASCENDING).limit(1)
    found = [doc async for doc in cursor]
    return _field(found[0], expiry.time_field) if found else None


async def count_expired(store: Store, expiry: Expiry, site_id: str, before: datetime,
                        extra: dict[str, Any] | None = None) -> int:
    """How many of the site's documents expired before `before`."""
    return await store.collection(expiry.collection).count_documents(
        {**expiry.query(site_id, before), **(extra or {})})


def _field(doc: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


# Runs and status -----------------------------------------------------------------------------


async def open_run(store: Store, owner: str, now: datetime) -> dict[str, Any]:
    """The unfinished run to resume, taken over by `owner`, or a new run measured from `now`."""
    resumed = await store.collection(RUNS).find_one_and_update(
        {"completedAt": None}, {"$set": {"owner": owner, "resumedAt": now}},
        sort=[("startedAt", DESCENDING)], return_document=ReturnDocument.AFTER)
    if resumed is not None:
        return resumed
    run = {"_id": new_id(), "owner": owner, "startedAt": now, "now": now, "completedAt": None,
           "done": [], "removed": {}, "failures": 0, "lastError": None}
    await store.collection(RUNS).insert_one(run)
    return run


def pair_key(site_id: str, kind: str) -> str:
    """The name of one (site, kind) pair in a run's `done` list and the status `_id`."""
    return f"{site_id}:{kind}"


async def start_pair(store: Store, run_id: str, site_id: str, kind: str) -> None:
    """Begin counting the pair's removals for this run (a resumed pair keeps its count)."""
    try:
        await store.collection(STATUS).update_one(
            {"_id": pair_key(site_id, kind), "runId": {"$ne": run_id}},
            {"$set": {"runId": run_id, "removedInRun": 0, "siteId": site_id, "kind": kind},
             "$setOnInsert": {"removedTotal": 0}},
            upsert=True)
    except DuplicateKeyError:
        pass  # this run began the pair before it stopped: its count so far stands


async def count_removed(store: Store, run_id: str, site_id: str, kind: str, removed: int, *,
                        session: Any) -> None:
    """Add a batch's removals to the run and the pair, in the batch's transaction."""
    if not removed:
        return
    await store.collection(STATUS).update_one(
        {"_id": pair_key(site_id, kind)},
        {"$inc": {"removedInRun": removed, "removedTotal": removed}}, session=session)
    await store.collection(RUNS).update_one(
        {"_id": run_id}, {"$inc": {f"removed.{kind}": removed}}, session=session)


async def finish_pair(store: Store, run_id: str, site_id: str, kind: str, *, days: int,
                      oldest_held: datetime | None, purged_at: datetime) -> None:
    """Record that the pair is done in this run, with what is left."""
    key = pair_key(site_id, kind)
    status = await store.collection(STATUS).find_one({"_id": key}) or {}
    await store.collection(STATUS).update_one(
        {"_id": key},
        {"$set": {"retentionDays": days, "oldestHeldAt": oldest_held, "lastPurgeAt": purged_at,
                  "removedLastRun": status.get("removedInRun", 0)}})
    await store.collection(RUNS).update_one({"_id": run_id}, {"$addToSet": {"done": key}})


async def complete_run(store: Store, run_id: str, at: datetime, *, finished_at: datetime
                       ) -> None:
    """Mark the run finished: `completedAt` is the instant its cutoffs were measured from (a
    resumed run keeps its first), `finishedAt` the pass that finished it."""
    await store.collection(RUNS).update_one(
        {"_id": run_id}, {"$set": {"completedAt": at, "finishedAt": finished_at}})


async def fail_run(store: Store, run_id: str, reason: str, at: datetime) -> None:
    """Record a failed pass of the run; it stays open, to be resumed."""
    await store.collection(RUNS).update_one(
        {"_id": run_id}, {"$set": {"lastError": reason[:300], "failedAt": at},
                          "$inc": {"failures": 1}})


async def last_completed_run(store: Store) -> dict[str, Any] | None:
    """The run that finished last, or None."""
    cursor = store.collection(RUNS).find({"completedAt": {"$ne": None}}).sort(
        "completedAt", DESCENDING).limit(1)
    found = [doc async for doc in cursor]
    return found[0] if found else None


#: Since when a process has watched for purge runs: what an overdue purge is measured from
#: before any run has finished (a purge that never ran at all is overdue too).
WATCH = "purge:watch"
#: The overdue episode whose notice went out (an episode is named by the instant it is
#: measured from, so a new one begins only after a run finishes).
OVERDUE_NOTICE = "purge:overdue"
#: Added to two purge intervals: how long one pass may take before its lateness counts.
OVERDUE_GRACE = timedelta(hours=1)


def overdue_after(interval_seconds: float) -> timedelta:
    """How long the purge may go without finishing a run before it is overdue: a pass missed
    (two intervals) and an hour for a long one (decision "Issue 32: retention")."""
    return 2 * timedelta(seconds=interval_seconds) + OVERDUE_GRACE


@dataclass(frozen=True)
class PurgeClock:
    """When the purge last finished a run, and since when it is overdue (None: it is not)."""

    last_completed_at: datetime | None
    overdue_since: datetime | None


async def watch(store: Store, now: datetime) -> None:
    """Note, the first time only, that a process watches for purge runs from `now`."""
    try:
        await store.collection(STATUS).update_one(
            {"_id": WATCH}, {"$setOnInsert": {"since": now}}, upsert=True)
    except DuplicateKeyError:
        pass  # another process noted it at the same moment


async def purge_clock(store: Store, *, now: datetime, after: timedelta) -> PurgeClock:
    """The last finished run, and whether more than `after` has passed since it (or, before
    any run finished, since the purge was first watched for)."""
    last = await last_completed_run(store)
    since: datetime | None = (last.get("finishedAt") or last["completedAt"]) if last else None
    if since is None:
        watched = await store.collection(STATUS).find_one({"_id": WATCH})
        since = watched["since"] if watched else None
    overdue = since is not None and now - since > after
    return PurgeClock(last["completedAt"] if last else None, since if overdue else None)


async def claim_overdue_notice(store: Store, since: datetime) -> bool:
    """True for the one process, of all, that first claims the overdue episode measured from
    `since`: the one that notifies it."""
    try:
        await store.collection(STATUS).update_one(
            {"_id": OVERDUE_NOTICE, "since": {"$ne": since}}, {"$set": {"since": since}},
            upsert=True)
    except DuplicateKeyError:
        return False
    return True


async def open_runs(store: Store) -> list[dict[str, Any]]:
    """Runs started and not finished (at most one, unless something went wrong)."""
    return await store.collection(RUNS).find({"completedAt": None}).to_list(None)


async def site_status(store: Store, site_id: str) -> dict[str, dict[str, Any]]:
    """The site's status per kind."""
    return {doc["kind"]: doc async for doc in store.collection(STATUS).find({"siteId": site_id})}


async def claim_alert(store: Store, site_id: str, *, now: datetime, every: timedelta) -> bool:
    """True at most once per `every` per site: whether to notify the owner of a purge problem."""
    try:
        await store.collection(STATUS).update_one(
            {"_id": pair_key(site_id, "alert"), "alertedAt": {"$lt": now - every}},
            {"$set": {"alertedAt": now, "siteId": site_id, "kind": "alert"}}, upsert=True)
    except DuplicateKeyError:
        return False
    return True


async def trim_expired_buckets(store: Store, expiry: Expiry, site_id: str, before: datetime, *,
                               limit: int, session: Any) -> tuple[int, int]:
    """Take the events older than `before` out of up to `limit` of the site's event buckets
    (documents/activity.py, documents/interactions.py); returns (buckets found, events
    removed).

    A bucket whose last event is older goes whole, in one delete for the batch: an event
    appended meanwhile moves its `lastAt` and so keeps it. A bucket holding younger events too
    is rewritten without the old ones, conditionally on its `count` as read, so an event
    appended meanwhile is never lost: that bucket is left for the next batch.
    """
    collection = store.collection(expiry.collection)
    found = await collection.find(
        expiry.query(site_id, before), {"count": 1, "lastAt": 1}, session=session,
    ).sort(expiry.time_field, ASCENDING).limit(limit).to_list(None)
    whole = [bucket for bucket in found if bucket["lastAt"] < before]
    removed = 0
    if whole:
        deleted = await collection.delete_many(
            {"_id": {"$in": [bucket["_id"] for bucket in whole]}, "lastAt": {"$lt": before}},
            session=session)
        if deleted.deleted_count == len(whole):
            removed += sum(bucket.get("count", 0) for bucket in whole)
        else:  # some took a new event meanwhile; count what went by what is left
            left = {doc["_id"] async for doc in collection.find(
                {"_id": {"$in": [bucket["_id"] for bucket in whole]}}, {"_id": 1},
                session=session)}
            removed += sum(bucket.get("count", 0) for bucket in whole
                           if bucket["_id"] not in left)
    for partial in (bucket for bucket in found if bucket["lastAt"] >= before):
        bucket = await collection.find_one({"_id": partial["_id"]}, {"events": 1, "count": 1},
                                           session=session)
        if bucket is None:
            continue
        events = bucket.get("events", [])
        kept = [event for event in events if event["at"] >= before]
        result = await collection.update_one(
            {"_id": bucket["_id"], "count": bucket.get("count")},
            {"$set": {"events": kept, "count": len(kept),
                      expiry.time_field: min(event["at"] for event in kept)}},
            session=session)
        if result.modified_count:
            removed += len(events) - len(kept)
    return len(found), removed


async def oldest_event(store: Store, expiry: Expiry, site_id: str) -> datetime | None:
    """When the site's oldest event in a bucket collection happened (its first bucket's first)."""
    return await oldest(store, expiry, site_id)


async def count_expired_events(store: Store, expiry: Expiry, site_id: str,
                               before: datetime) -> int:
    """How many events in the site's buckets happened before `before`."""
    total = 0
    async for bucket in store.collection(expiry.collection).find(
            expiry.query(site_id, before), {"events.at": 1}):
        total += sum(1 for event in bucket.get("events", []) if event["at"] < before)
    return total


def periods(site: dict[str, Any]) -> list[dict[str, Any]]:
    """Each kind's retention for the site in a reader's terms (the access export's
    `information.retentionPeriods`)."""
    days = site_days(site)
    return [{"kind": kind.key, "label": kind.label, "days": days[kind.key],
             "sections": list(kind.sections)} for kind in KINDS if kind.sections]
