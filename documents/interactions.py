"""Interactions (spec §2): clicks, rage clicks, dead clicks and scroll depth, in bounded buckets.

A visitor's interactions go to bucket documents of at most `BUCKET_CAP` events each, per
(site, visitor), never to an unbounded array: an upsert matches a bucket with room left and
otherwise starts a new one. Two concurrent writers may each start a bucket; that only leaves two
part-filled buckets, which readers do not care about.

A batch the client names with a `batchId` is stored at most once: it goes to buckets of its own
whose `_id` derives from (site, visitor, batchId), each created by an upsert that a retry finds
already done (decision "Interaction batches are idempotent on batchId" in docs/decisions.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from documents.accounts import new_id
from documents.retention import Expiry
from documents.store import ASCENDING, AlreadyStored, DuplicateKeyError, Index, Store

COLLECTION = "interaction_buckets"

#: Events per bucket document: large enough that reads touch few documents, small enough that
#: a bucket stays far below MongoDB's 16 MB document limit with long selectors.
BUCKET_CAP = 200

#: Namespace of batch bucket ids: uuid5 of (site, visitor, batchId, part) is the same on a retry.
_BATCH_NAMESPACE = uuid.UUID("c3d5e1a0-6b2f-4f7e-8a49-0d1e2f3a4b5c")

INDEXES = [
    Index(COLLECTION, (("siteId", ASCENDING), ("visitorId", ASCENDING), ("count", ASCENDING))),
    Index(COLLECTION, (("siteId", ASCENDING), ("visitorId", ASCENDING),
                       ("firstAt", ASCENDING))),
    # The site's oldest interactions, for retention (documents/retention.py).
    Index(COLLECTION, (("siteId", ASCENDING), ("firstAt", ASCENDING))),
    # Rage and dead clicks across the site over a date range (the overview).
    Index(COLLECTION, (("siteId", ASCENDING), ("lastAt", ASCENDING))),
]
#: A bucket holds expired interactions once its first one is past the retention.
EXPIRY = Expiry(COLLECTION, "firstAt")


async def append_interactions(store: Store, site_id: str, visitor_id: str,
                              events: Sequence[dict[str, Any]], *,
                              cap: int = BUCKET_CAP, session: Any = None) -> int:
    """Append events to the visitor's buckets, starting new ones as they fill; returns how many."""
    collection = store.collection(COLLECTION)
    for start in range(0, len(events), cap):
        group = list(events[start:start + cap])
        times = [event["at"] for event in group]
        await collection.update_one(
            # Only a bucket with room for the whole group matches, so none grows past the cap.
            {"siteId": site_id, "visitorId": visitor_id, "count": {"$lte": cap - len(group)}},
            {
                "$setOnInsert": {"_id": new_id(), "createdAt": datetime.now(UTC)},
                "$push": {"events": {"$each": group}},
                "$inc": {"count": len(group)},
                "$min": {"firstAt": min(times)},
                "$max": {"lastAt": max(times)},
            },
            upsert=True, session=session,
        )
    return len(events)


def batch_bucket_id(site_id: str, visitor_id: str, batch_id: str, part: int) -> str:
    """The `_id` of part `part` of a client-named batch; the same on every retry."""
    return str(uuid.uuid5(_BATCH_NAMESPACE, f"{site_id}\n{visitor_id}\n{batch_id}\n{part}"))


async def append_batch(store: Store, site_id: str, visitor_id: str, batch_id: str,
                       events: Sequence[dict[str, Any]], *, cap: int = BUCKET_CAP,
                       session: Any) -> int:
    """Store a client-named batch in the caller's transaction; returns how many events.

    Each part of the batch inserts its own bucket by an upsert on its derived `_id`. The parts
    are written together, so finding one already there means an earlier attempt stored them
    all: that raises `AlreadyStored`, and a retry racing the first attempt conflicts with it.
    """
    collection = store.collection(COLLECTION)
    for part, start in enumerate(range(0, len(events), cap)):
        group = list(events[start:start + cap])
        times = [event["at"] for event in group]
        bucket = batch_bucket_id(site_id, visitor_id, batch_id, part)
        try:
            result = await collection.update_one(
                {"_id": bucket, "siteId": site_id, "visitorId": visitor_id},
                # The filter's equality fields are written on insert; repeating them conflicts.
                {"$setOnInsert": {"batchId": batch_id, "createdAt": datetime.now(UTC),
                                  "events": group, "count": len(group),
                                  "firstAt": min(times), "lastAt": max(times)}},
                upsert=True, session=session,
            )
        except DuplicateKeyError as exc:
            raise AlreadyStored(bucket) from exc
        if result.upserted_id is None:
            raise AlreadyStored(bucket)
    return len(events)


def buckets_overlapping(store: Store, site_id: str, visitor_ids: list[str], low: datetime,
                        high: datetime, *, session: Any = None) -> Any:
    """A cursor over the visitors' buckets that overlap [low, high], on (siteId, visitorId,
    firstAt); of the events, only what places and labels a rage or dead click is read."""
    return store.collection(COLLECTION).find(
        {"siteId": site_id, "visitorId": {"$in": visitor_ids}, "firstAt": {"$lte": high},
         "lastAt": {"$gte": low}},
        {"visitorId": 1, "events.kind": 1, "events.at": 1, "events.sessionId": 1,
         "events.selector": 1, "events.count": 1, "events.url": 1}, session=session)


async def list_interactions(store: Store, site_id: str, visitor_id: str) -> list[dict[str, Any]]:
    """Every stored interaction of the visitor, oldest first."""
    cursor = store.collection(COLLECTION).find({"siteId": site_id, "visitorId": visitor_id})
    events = [event async for bucket in cursor for event in bucket["events"]]
    return sorted(events, key=lambda event: event["at"])


def visitor_events(store: Store, site_id: str, visitor_id: str, *, session: Any = None) -> Any:
    """A cursor over the events of each of the visitor's buckets."""
    return store.collection(COLLECTION).find(
        {"siteId": site_id, "visitorId": visitor_id}, {"events": 1}, session=session)
