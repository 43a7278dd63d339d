"""How many items of each site ingest dropped, per reason and day, for the first-run checklist.

/metrics counts drops per process and without the site; a shop owner whose test visit was
taken for a bot needs the reason on their own site's page. One small document per
(site, reason, day of the site) is incremented by a single upsert where a drop is counted
(ingest/intake.py), so only dropped items pay for it; the kept items' path writes nothing more.
Documents expire after `KEPT_DAYS`: the checklist looks at recent days only.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from documents.store import ASCENDING, Index, Store

COLLECTION = "ingest_drops"
#: Long enough for a week's test visits to explain themselves; counts carry no visitor.
KEPT_DAYS = 30

INDEXES = [
    Index(COLLECTION, (("siteId", ASCENDING), ("day", ASCENDING))),
    # expireAfterSeconds=0: each document carries its own expiry time in `expiresAt`.
    Index(COLLECTION, (("expiresAt", ASCENDING),), expire_after_seconds=0),
]


async def count_drop(store: Store, site_id: str, reason: str, day: str, at: datetime) -> None:
    """Add one dropped item of the site to `reason`'s count for `day` (the site's day)."""
    await store.collection(COLLECTION).update_one(
        {"_id": f"{site_id}|{reason}|{day}"},
        {"$inc": {"count": 1}, "$max": {"lastAt": at},
         "$setOnInsert": {"siteId": site_id, "reason": reason, "day": day,
                          "expiresAt": at + timedelta(days=KEPT_DAYS + 1)}},
        upsert=True)


async def drops_since(store: Store, site_id: str, first_day: str) -> list[dict[str, Any]]:
    """The site's drops from `first_day` on, per reason: count and last time, most first."""
    totals: dict[str, dict[str, Any]] = {}
    async for row in store.collection(COLLECTION).find(
            {"siteId": site_id, "day": {"$gte": first_day}}):
        total = totals.setdefault(row["reason"], {"reason": row["reason"], "count": 0,
                                                  "lastAt": row["lastAt"]})
        total["count"] += row["count"]
        total["lastAt"] = max(total["lastAt"], row["lastAt"])
    return sorted(totals.values(), key=lambda total: (-total["count"], total["reason"]))
