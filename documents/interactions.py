"""Interactions (spec §2): clicks, rage clicks, dead clicks and scroll depth, in bounded buckets.

A visitor's interactions go to bucket documents of at most `BUCKET_CAP` events each, per
(site, visitor), never to an unbounded array: an upsert matches a bucket with room left and
otherwise starts a new one. Two concurrent writers may each start a bucket; that only leaves two
part-filled buckets, which readers do not care about.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from documents.accounts import new_id
from documents.store import ASCENDING, Index, Store

COLLECTION = "interaction_buckets"

#: Events per bucket document: large enough that reads touch few documents, small enough that
#: a bucket stays far below MongoDB's 16 MB document limit with long selectors.
BUCKET_CAP = 200

INDEXES = [
    Index(COLLECTION, (("siteId", ASCENDING), ("visitorId", ASCENDING), ("count", ASCENDING))),
    Index(COLLECTION, (("siteId", ASCENDING), ("visitorId", ASCENDING),
                       ("firstAt", ASCENDING))),
]


async def append_interactions(store: Store, site_id: str, visitor_id: str,
                              events: Sequence[dict[str, Any]], *,
                              cap: int = BUCKET_CAP) -> int:
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
            upsert=True,
        )
    return len(events)


async def list_interactions(store: Store, site_id: str, visitor_id: str) -> list[dict[str, Any]]:
    """Every stored interaction of the visitor, oldest first."""
    cursor = store.collection(COLLECTION).find({"siteId": site_id, "visitorId": visitor_id})
    events = [event async for bucket in cursor for event in bucket["events"]]
    return sorted(events, key=lambda event: event["at"])
