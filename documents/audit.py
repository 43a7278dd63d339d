"""The append-only audit trail: who did what, to which organization and site, and when.

Entries are only ever inserted; nothing in the service updates or deletes them. They carry
field names and counts, never the personal values that changed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from documents.accounts import new_id
from documents.store import ASCENDING, DESCENDING, Index, Store

COLLECTION = "audit_log"

INDEXES = [
    Index(COLLECTION, (("organizationId", ASCENDING), ("at", DESCENDING))),
    Index(COLLECTION, (("accountId", ASCENDING), ("at", DESCENDING))),
]


async def record(store: Store, *, action: str, actor_user_id: str | None,
                 account_id: str | None, organization_id: str | None, site_id: str | None = None,
                 details: dict[str, Any] | None = None, session: Any = None) -> str:
    """Append one entry; pass `session` when it belongs to a transaction."""
    entry_id = new_id()
    await store.collection(COLLECTION).insert_one(
        {
            "_id": entry_id,
            "at": datetime.now(UTC),
            "action": action,
            "actorUserId": actor_user_id,
            "accountId": account_id,
            "organizationId": organization_id,
            "siteId": site_id,
            "details": details or {},
        },
        session=session,
    )
    return entry_id


async def entries_for_account(store: Store, account_id: str) -> AsyncIterator[dict[str, Any]]:
    """The account's entries, newest first."""
    cursor = store.collection(COLLECTION).find({"accountId": account_id}).sort("at", DESCENDING)
    async for entry in cursor:
        yield entry
