"""Nonces of accepted product statements, so a statement attributes one pageview only.

The nonce is the `_id`, scoped by site: the unique `_id` makes "first use wins" one atomic insert,
with no check-then-write race between server processes. A TTL index removes a nonce once its
statement could no longer verify anyway (issued-at + maximum age + clock skew).
"""

from __future__ import annotations

from datetime import datetime

from documents.store import ASCENDING, DuplicateKeyError, Index, Store

COLLECTION = "statement_nonces"

INDEXES = [
    # expireAfterSeconds=0: each document carries its own expiry time in `expiresAt`.
    Index(COLLECTION, (("expiresAt", ASCENDING),), expire_after_seconds=0),
]


async def claim_nonce(store: Store, site_id: str, nonce: str, expires_at: datetime) -> bool:
    """Record a statement's nonce; False when it was already used (a replay)."""
    try:
        await store.collection(COLLECTION).insert_one(
            {"_id": f"{site_id}:{nonce}", "siteId": site_id, "expiresAt": expires_at})
    except DuplicateKeyError:
        return False
    return True
