"""The error outbox: accepted errors-ingest jobs kept in MongoDB until a worker finishes each.

One document per job (`_id` = job id) holding the job, `receivedAt`, `relayAfter` (when the
relay may send it again) and `relayAttempts`. Inserting it is what accepting an error means on
the Celery back-end; the worker deletes it once the job is processed or stored in
`failed_jobs`. tasks/outbox.py holds the timing rules and the relay loop.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pymongo import ReturnDocument

from documents.store import ASCENDING, Index, Store

OUTBOX = "error_outbox"

INDEXES = [
    # The relay's claim: the oldest entry that is due.
    Index(OUTBOX, (("relayAfter", ASCENDING),)),
]


async def keep_job(store: Store, job: dict[str, Any], *, now: datetime,
                   relay_after: datetime) -> None:
    """Insert the job, keyed by its id, due for a relay at `relay_after`."""
    await store.collection(OUTBOX).insert_one({
        "_id": job["jobId"],
        "siteId": job.get("siteId"),
        "job": job,
        "receivedAt": now,
        "relayAfter": relay_after,
        "relayAttempts": 0,
    })


async def holds_job(store: Store, job_id: str) -> bool:
    """True while the job is kept, i.e. not yet finished."""
    return await store.collection(OUTBOX).find_one({"_id": job_id}, {"_id": 1}) is not None


async def delete_job(store: Store, job_id: str) -> None:
    """Forget a finished job."""
    await store.collection(OUTBOX).delete_one({"_id": job_id})


async def claim_due_job(store: Store, *, now: datetime, relay_after: datetime
                        ) -> dict[str, Any] | None:
    """Claim the oldest due entry for one relay and make it due again at `relay_after`.

    One atomic update both finds and moves the entry, so of several server processes relaying
    side by side exactly one gets it in each period.
    """
    return await store.collection(OUTBOX).find_one_and_update(
        {"relayAfter": {"$lte": now}},
        {"$set": {"relayAfter": relay_after, "relayedAt": now}, "$inc": {"relayAttempts": 1}},
        sort=[("relayAfter", ASCENDING)],
        return_document=ReturnDocument.AFTER,
    )


async def postpone_job(store: Store, job_id: str, *, attempts: int, relay_after: datetime
                       ) -> None:
    """Move the next relay of a just-claimed entry later; no-op if another claim came between."""
    await store.collection(OUTBOX).update_one(
        {"_id": job_id, "relayAttempts": attempts}, {"$set": {"relayAfter": relay_after}})


async def count_jobs(store: Store) -> int:
    """Jobs kept and not yet finished."""
    return await store.collection(OUTBOX).count_documents({})
