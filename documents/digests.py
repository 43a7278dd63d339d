"""The digest's deliveries: one record per member, site and period (`digest_deliveries`).

A record is inserted before its mail is sent, under a unique (userId, siteId, period) key, so
when several evaluators meet on a member's digest exactly one insert succeeds and only that
evaluator sends it (tasks/digests.py); the others find the key taken. A period is named
"daily:<day>" or "weekly:<Monday>", the site's days. What became of the mail (sent to the
notifier, or skipped because the site has no e-mail channel) is written on the record; the
mail's own attempts are in the delivery log (documents/notifications.py). Records expire with
the delivery log.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pymongo.errors import DuplicateKeyError

from documents.notifications import DELIVERY_RETENTION_SECONDS
from documents.store import ASCENDING, DESCENDING, Index, Store

DELIVERIES = "digest_deliveries"

INDEXES = [
    # One digest per member, site and period, whatever the number of evaluators.
    Index(DELIVERIES, (("userId", ASCENDING), ("siteId", ASCENDING), ("period", ASCENDING)),
          unique=True),
    Index(DELIVERIES, (("siteId", ASCENDING), ("period", ASCENDING))),
    Index(DELIVERIES, (("createdAt", ASCENDING),), name="digest_deliveries_ttl",
          expire_after_seconds=DELIVERY_RETENTION_SECONDS),
]


def delivery_id(site_id: str, user_id: str, period: str) -> str:
    """The one record of a member's digest of a site for a period."""
    return f"{site_id}/{user_id}/{period}"


async def delivered_users(store: Store, site_id: str, period: str) -> set[str]:
    """The members whose digest of the site for `period` is taken already."""
    cursor = store.collection(DELIVERIES).find({"siteId": site_id, "period": period},
                                               {"userId": 1})
    return {doc["userId"] async for doc in cursor}


async def claim(store: Store, site_id: str, user_id: str, period: str, now: datetime) -> bool:
    """Take the member's digest of the site for `period`; False when another process has it."""
    try:
        await store.collection(DELIVERIES).insert_one({
            "_id": delivery_id(site_id, user_id, period), "siteId": site_id,
            "userId": user_id, "period": period, "outcome": "pending", "createdAt": now})
    except DuplicateKeyError:
        return False
    return True


async def record_outcome(store: Store, site_id: str, user_id: str, period: str,
                         outcome: str) -> None:
    """Write what became of a claimed digest: "sent" (to the notifier), or why it was not."""
    await store.collection(DELIVERIES).update_one(
        {"_id": delivery_id(site_id, user_id, period)}, {"$set": {"outcome": outcome}})


async def deliveries_of_site(store: Store, site_id: str, *, limit: int
                             ) -> list[dict[str, Any]]:
    """The site's newest digest records, for the account export."""
    cursor = store.collection(DELIVERIES).find({"siteId": site_id}).sort(
        "createdAt", DESCENDING).limit(limit)
    return await cursor.to_list(limit)
