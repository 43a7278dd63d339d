"""The delivery log of account mail (invitations, password resets): what was sent when, and
whether it arrived at the SMTP server. It holds neither the address nor the link: both are in
the message only, and a link in a log would open the account."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from documents.accounts import new_id
from documents.store import ASCENDING, DESCENDING, Index, Store

COLLECTION = "account_mail_deliveries"
#: Long enough to answer "did the invitation go out?" a while later.
KEPT_FOR = timedelta(days=90)

INDEXES = [
    Index(COLLECTION, (("accountId", ASCENDING), ("createdAt", DESCENDING))),
    Index(COLLECTION, (("removeAt", ASCENDING),), expire_after_seconds=0),
]


async def start_delivery(store: Store, *, kind: str, account_id: str | None) -> str:
    """Log a delivery about to be attempted; returns its id."""
    now = datetime.now(UTC)
    delivery_id = new_id()
    await store.collection(COLLECTION).insert_one({
        "_id": delivery_id, "kind": kind, "accountId": account_id, "createdAt": now,
        "status": "pending", "attempts": 0, "lastError": None, "finishedAt": None,
        "removeAt": now + KEPT_FOR,
    })
    return delivery_id


async def record_attempt(store: Store, delivery_id: str, *, error: str | None, final: bool
                         ) -> None:
    """Count one attempt; `error` None means delivered; `final` closes a failing delivery."""
    status = "sent" if error is None else ("failed" if final else "pending")
    update: dict[str, Any] = {"$inc": {"attempts": 1},
                              "$set": {"status": status, "lastError": error}}
    if error is None or final:
        update["$set"]["finishedAt"] = datetime.now(UTC)
    await store.collection(COLLECTION).update_one({"_id": delivery_id}, update)


async def deliveries_of_account(store: Store, account_id: str, limit: int = 50
                                ) -> list[dict[str, Any]]:
    """The account's newest deliveries."""
    return await store.collection(COLLECTION).find(
        {"accountId": account_id}, {"removeAt": 0},
    ).sort("createdAt", DESCENDING).limit(limit).to_list(None)
