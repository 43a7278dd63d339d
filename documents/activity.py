"""Pageview history in bounded buckets: many pageviews per document, capped, never one array.

A bucket belongs to one (site, visitor). New pageviews go to the visitor's open bucket (fewer
than BUCKET_CAP events) with one atomic upsert; when it is full the upsert opens the next.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from documents.store import ASCENDING, Index, Store

COLLECTION = "pageview_buckets"
#: Events per bucket: big enough to keep reads cheap, far below the 16 MB document limit.
BUCKET_CAP = 200

INDEXES = [
    Index(COLLECTION, (("siteId", ASCENDING), ("visitorId", ASCENDING), ("count", ASCENDING))),
    Index(COLLECTION, (("siteId", ASCENDING), ("visitorId", ASCENDING), ("firstAt", ASCENDING))),
    Index(COLLECTION, (("siteId", ASCENDING), ("events.id", ASCENDING))),
    Index(COLLECTION, (("siteId", ASCENDING), ("lastAt", ASCENDING))),
]


async def append_pageview(store: Store, site_id: str, visitor_id: str, event: dict[str, Any],
                          *, cap: int = BUCKET_CAP) -> bool:
    """Append to the open bucket (opening one when needed); False for an id already stored."""
    at: datetime = event["at"]
    buckets = store.collection(COLLECTION)
    push = {"$push": {"events": event}, "$inc": {"count": 1},
            "$min": {"firstAt": at}, "$max": {"lastAt": at}}
    open_bucket = {"siteId": site_id, "visitorId": visitor_id, "count": {"$lt": cap},
                   "events.id": {"$ne": event["id"]}}
    if (await buckets.update_one(open_bucket, push)).modified_count:
        return True
    # No open bucket took it: either it is full/absent, or a retry brought an id we have.
    if await buckets.find_one({"siteId": site_id, "events.id": event["id"]}, {"_id": 1}):
        return False
    await buckets.update_one(open_bucket, push, upsert=True)
    return True


async def set_pageview_duration(store: Store, site_id: str, visitor_id: str, pageview_id: str,
                                duration_seconds: float) -> bool:
    """Fill in time on page; the larger value wins when several reports arrive."""
    result = await store.collection(COLLECTION).update_one(
        {"siteId": site_id, "visitorId": visitor_id, "events.id": pageview_id},
        {"$max": {"events.$.duration": round(duration_seconds, 3)}},
    )
    return bool(result.matched_count)


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
