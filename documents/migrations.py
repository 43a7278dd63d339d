"""Data migrations run once per store when a process starts (`documents.prepare_store`).

A migration is claimed by an upsert on its name as `_id`: the first process inserts the claim
and runs it, any other collides on the key and goes on. A claim carries a lease, so a process
that died half-way is followed by the next start rather than leaving the migration undone.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from documents.store import DuplicateKeyError, Store

COLLECTION = "migrations"
LEASE = timedelta(minutes=30)

log = logging.getLogger("visitor_service.migrations")

Migration = Callable[[Store], Awaitable[None]]


async def run_once(store: Store, name: str, migration: Migration) -> bool:
    """Run `migration` unless it is done or another process holds it; True when it ran here."""
    now = datetime.now(UTC)
    try:
        await store.collection(COLLECTION).update_one(
            {"_id": name, "doneAt": None, "leaseUntil": {"$lt": now}},
            {"$set": {"leaseUntil": now + LEASE, "startedAt": now, "doneAt": None}},
            upsert=True)
    except DuplicateKeyError:
        return False  # done, or running elsewhere
    log.info("migration started", extra={"migration": name})
    await migration(store)
    await store.collection(COLLECTION).update_one(
        {"_id": name}, {"$set": {"doneAt": datetime.now(UTC)}})
    log.info("migration done", extra={"migration": name})
    return True
