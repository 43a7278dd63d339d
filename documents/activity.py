"""Pageview history in bounded buckets: many pageviews per document, capped, never one array.

A bucket belongs to one (site, visitor) and holds BUCKET_CAP pageviews; its `_id` is derived
from the visitor and the pageview's ordinal, so appends are single upserts by `_id`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from documents.retention import Expiry
from documents.store import ASCENDING, AlreadyStored, DuplicateKeyError, Index, Store

COLLECTION = "pageview_buckets"
#: Events per bucket: big enough to keep reads cheap, far below the 16 MB document limit.
BUCKET_CAP = 200

INDEXES = [
    Index(COLLECTION, (("siteId", ASCENDING), ("visitorId", ASCENDING), ("firstAt", ASCENDING))),
    Index(COLLECTION, (("siteId", ASCENDING), ("events.id", ASCENDING))),
    Index(COLLECTION, (("siteId", ASCENDING), ("lastAt", ASCENDING))),
    # The site's oldest pageviews, for retention (documents/retention.py).
    Index(COLLECTION, (("siteId", ASCENDING), ("firstAt", ASCENDING))),
]
#: A bucket holds expired pageviews once its first one is past the retention.
EXPIRY = Expiry(COLLECTION, "firstAt")


def bucket_id(site_id: str, visitor_id: str, sequence: int) -> str:
    """The `_id` of the visitor's bucket number `sequence`."""
    return f"{site_id}:{visitor_id}:{sequence}"


async def append_pageview(store: Store, site_id: str, visitor_id: str, event: dict[str, Any],
                          *, ordinal: int, cap: int = BUCKET_CAP, may_repeat: bool = True,
                          session: Any = None) -> bool:
    """Append the visitor's `ordinal`-th pageview (1-based) to its bucket.

    The ordinal comes from the profile's atomic pageview counter, so bucket n holds exactly
    pageviews n*cap+1 .. (n+1)*cap whatever the concurrency, and every write is by `_id`.
    Returns False when that bucket already holds the event id (a retried request); inside a
    transaction (`session`) that raises `AlreadyStored` instead.
    `may_repeat=False` says the id was minted by the server for this request, so no earlier
    request can have stored it and the bucket need not be searched for it.
    """
    at: datetime = event["at"]
    sequence = (ordinal - 1) // cap
    target: dict[str, Any] = {"_id": bucket_id(site_id, visitor_id, sequence)}
    if may_repeat:
        target["events.id"] = {"$ne": event["id"]}
    try:
        await store.collection(COLLECTION).update_one(
            target,
            {"$push": {"events": event}, "$inc": {"count": 1},
             "$min": {"firstAt": at}, "$max": {"lastAt": at},
             "$setOnInsert": {"siteId": site_id, "visitorId": visitor_id,
                              "sequence": sequence}},
            upsert=True, session=session,
        )
    except DuplicateKeyError as exc:
        # The bucket exists and holds this id, so the filter missed and the upsert collided.
        if session is not None:
            raise AlreadyStored(event["id"]) from exc
        return False
    return True


@dataclass(frozen=True)
class DurationSet:
    """What a time-on-page report did: whether its pageview is stored, and the time on page
    records it changed for the figures (the shorter one out with `amount` -1, the longer in)."""

    found: bool
    changed: list[dict[str, Any]]


async def set_pageview_duration(store: Store, site_id: str, visitor_id: str, pageview_id: str,
                                duration_seconds: float, *, session: Any = None) -> DurationSet:
    """Fill in time on page; the larger value wins. Run it in a transaction (`session`): the
    write is conditional on the duration it read, so a report that lands in between makes
    this one read again, never count a duration that is not the stored one."""
    duration = round(duration_seconds, 3)
    pageviews = store.collection(COLLECTION)
    for _attempt in range(3):
        bucket = await pageviews.find_one(
            {"siteId": site_id, "visitorId": visitor_id, "events.id": pageview_id},
            {"events": {"$elemMatch": {"id": pageview_id}}}, session=session)
        if bucket is None:
            return DurationSet(False, [])
        event = bucket["events"][0]
        before = event.get("duration")
        if before is not None and before >= duration:
            return DurationSet(True, [])
        # $set under an "as read" filter rather than $max: the stored duration starts as
        # null, and mongomock's $max cannot compare null with a number (MongoDB can).
        written = await pageviews.update_one(
            {"_id": bucket["_id"], "events": {"$elemMatch": {"id": pageview_id,
                                                             "duration": before}}},
            {"$set": {"events.$.duration": duration}}, session=session)
        if written.matched_count:
            out = [{"at": event["at"], "duration": before, "amount": -1}] if before else []
            return DurationSet(True, [*out, {"at": event["at"], "duration": duration}])
    raise RuntimeError("the pageview's time on page kept changing under this report")


async def pageviews_of(store: Store, site_id: str, visitor_id: str
                       ) -> AsyncIterator[dict[str, Any]]:
    """The visitor's pageviews, oldest bucket first, one bucket in memory at a time."""
    seen: set[str] = set()
    cursor = store.collection(COLLECTION).find(
        {"siteId": site_id, "visitorId": visitor_id}
    ).sort("firstAt", ASCENDING)
    async for bucket in cursor:
        for event in sorted(bucket["events"], key=lambda e: e["at"]):
            if event["id"] in seen:
                continue
            seen.add(event["id"])
            yield event
