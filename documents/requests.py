"""The data-subject request log: what was asked, when it was received, due and completed.

A request names its subject by a keyed digest of (site, visitor id), so the log survives the
erasure it records without keeping the erased identifier, and an erasure can be replayed after a
restore by matching digests (docs/operations.md). While the visitor's data is held, the request
also keeps the visitor id, so the log can say whom it was about; completing an erasure removes
that id from every request with the same digest, in the erasure's own transaction.
"""

from __future__ import annotations

import calendar
import contextlib
import hashlib
import hmac
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, Literal

from pymongo.errors import PyMongoError

from documents.accounts import new_id
from documents.retention import Expiry
from documents.store import ASCENDING, DESCENDING, Index, Store

RequestType = Literal["access", "erasure", "restriction", "objection", "rectification"]

COLLECTION = "dsr_requests"

INDEXES = [
    Index(COLLECTION, (("organizationId", ASCENDING), ("receivedAt", DESCENDING))),
    Index(COLLECTION, (("siteId", ASCENDING), ("subjectDigest", ASCENDING))),
    Index(COLLECTION, (("siteId", ASCENDING), ("completedAt", ASCENDING))),
]
#: A request's entry expires by when it was completed; an open one never does.
EXPIRY = Expiry(COLLECTION, "completedAt")


def one_month_later(moment: datetime) -> datetime:
    """The same day and time next month, clamped to the month's end (GDPR Art. 12(3))."""
    year, month = (moment.year + 1, 1) if moment.month == 12 else (moment.year, moment.month + 1)
    day = min(moment.day, calendar.monthrange(year, month)[1])
    return moment.replace(year=year, month=month, day=day)


class SubjectDigester:
    """A keyed digest of (site, visitor): recognises a subject without storing the id."""

    def __init__(self, secret_key: bytes) -> None:
        self._key = hashlib.sha256(b"visitor-service/subject-digest/v1\x00" + secret_key).digest()

    def digest(self, site_id: str, visitor_id: str) -> str:
        """The digest stored in the request log."""
        message = f"{site_id}\x00{visitor_id}".encode()
        return hmac.new(self._key, message, "sha256").hexdigest()


async def open_request(store: Store, *, kind: RequestType, site: dict[str, Any],
                       subject_digest: str, actor_user_id: str,
                       details: dict[str, Any] | None = None,
                       visitor_id: str | None = None) -> dict[str, Any]:
    """Log a request as received now, due in one month; `visitor_id` names its subject."""
    now = datetime.now(UTC)
    request = {
        "_id": new_id(),
        "type": kind,
        "siteId": site["_id"],
        "organizationId": site["organizationId"],
        "subjectDigest": subject_digest,
        "actorUserId": actor_user_id,
        "receivedAt": now,
        "dueAt": one_month_later(now),
        "completedAt": None,
        "status": "received",
        "details": details or {},
    }
    log = store.collection(COLLECTION)
    # Once a subject is erased, a later request about the same id (a second erasure, say) does
    # not bring the erased identifier back into the log.
    if visitor_id is not None and await log.find_one(
            {"siteId": site["_id"], "subjectDigest": subject_digest, "type": "erasure",
             "status": "completed"}, {"_id": 1}) is None:
        request["visitorId"] = visitor_id
    await log.insert_one(request)
    return request


async def complete_request(store: Store, request_id: str, *, outcome: dict[str, Any] | None = None,
                           session: Any = None) -> datetime:
    """Mark the request completed now; pass `session` when inside the erasure transaction."""
    now = datetime.now(UTC)
    log = store.collection(COLLECTION)
    completed = await log.find_one_and_update(
        {"_id": request_id},
        {"$set": {"completedAt": now, "status": "completed", "outcome": outcome or {}}},
        projection={"type": 1, "siteId": 1, "subjectDigest": 1}, session=session,
    )
    if completed is not None and completed["type"] == "erasure":
        # The erased visitor's id must not outlive their data, here either.
        await log.update_many(
            {"siteId": completed["siteId"], "subjectDigest": completed["subjectDigest"]},
            {"$unset": {"visitorId": ""}}, session=session)
    return now


async def fail_request(store: Store, request_id: str, reason: str) -> None:
    """Mark the request failed, with a reason that holds no personal data."""
    await store.collection(COLLECTION).update_one(
        {"_id": request_id}, {"$set": {"status": "failed", "failureReason": reason}})


#: The failure reason of a request whose change the store could not make (nothing was changed).
STORE_UNAVAILABLE = "the database was unavailable; nothing was changed, the request may be repeated"


@contextlib.asynccontextmanager
async def failed_if_the_store_fails(store: Store, request_id: str) -> AsyncIterator[None]:
    """Log the request failed when the store fails while carrying it out, then re-raise.

    The request was received, so its entry stays (the log is the record of what was asked);
    the change itself runs in one transaction with its completion and audit entry, so nothing
    of it is left. Marking the failure is itself best effort: the store may still be down.
    """
    try:
        yield
    except PyMongoError:
        with contextlib.suppress(PyMongoError):
            await fail_request(store, request_id, STORE_UNAVAILABLE)
        raise


async def requests_for_organizations(store: Store, organization_ids: list[str], *,
                                     limit: int = 500) -> list[dict[str, Any]]:
    """The newest requests of these organizations."""
    cursor = store.collection(COLLECTION).find(
        {"organizationId": {"$in": organization_ids}}).sort("receivedAt", DESCENDING)
    return await cursor.limit(limit).to_list(None)


def erasures_completed_since(store: Store, since: datetime) -> Any:
    """A cursor over the site and subject digest of every erasure completed at or after
    `since`."""
    return store.collection(COLLECTION).find(
        {"type": "erasure", "status": "completed", "completedAt": {"$gte": since}},
        {"siteId": 1, "subjectDigest": 1})
