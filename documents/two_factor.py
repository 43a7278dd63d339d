"""Two-factor sign-in's stored state: each user's TOTP secret (sealed, never in clear), the last
time step a code was accepted for (so a code works once), the digests of the recovery codes,
and each organization's choice to require a second factor of its members.

One document per user in `two_factor` (its `_id` is the user's id): `pendingSecret` while an
enrolment waits for its first code, `secret` once confirmed. The sealed forms are opened only by
auth/two_factor.py, which owns the sealing purpose.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pymongo import ReturnDocument

from documents.store import ASCENDING, DuplicateKeyError, Index, Store

COLLECTION = "two_factor"
#: One document per organization whose owner requires a second factor of its members.
REQUIREMENTS = "two_factor_requirements"

INDEXES = [
    # The account export reads an account's users' states.
    Index(COLLECTION, (("accountId", ASCENDING),)),
]
#: Found by `_id` only, so no index of its own; created at start-up.
COLLECTIONS = (REQUIREMENTS,)


async def find(store: Store, user_id: str) -> dict[str, Any] | None:
    """The user's two-factor state, or None when they never started an enrolment."""
    return await store.collection(COLLECTION).find_one({"_id": user_id})


async def start_enrolment(store: Store, user_id: str, account_id: str, sealed_secret: str
                          ) -> bool:
    """Keep a new secret waiting for its first code; False when two-factor is already on (a
    second enrolment must not replace a confirmed secret)."""
    now = datetime.now(UTC)
    try:
        await store.collection(COLLECTION).update_one(
            {"_id": user_id, "secret": None},
            {"$set": {"pendingSecret": sealed_secret, "pendingSince": now,
                      "accountId": account_id}},
            upsert=True)
    except DuplicateKeyError:
        # The user's document exists with a confirmed secret, so the upsert tried to insert.
        return False
    return True


async def confirm_enrolment(store: Store, user_id: str, sealed_pending: str, step: int,
                            recovery_digests: list[str]) -> bool:
    """Make the pending secret the user's, its first code's step the last used; False when the
    pending secret changed meanwhile (another enrolment started) or two-factor is already on."""
    result = await store.collection(COLLECTION).update_one(
        {"_id": user_id, "pendingSecret": sealed_pending, "secret": None},
        {"$set": {"secret": sealed_pending, "enabledAt": datetime.now(UTC), "lastStep": step,
                  "recoveryCodes": recovery_digests},
         "$unset": {"pendingSecret": "", "pendingSince": ""}})
    return result.modified_count == 1


async def use_step(store: Store, user_id: str, step: int) -> bool:
    """Record that a code of `step` was accepted; False when a code of this step or a later one
    was accepted already (a replayed code), in one atomic update so two requests race for it."""
    found = await store.collection(COLLECTION).find_one_and_update(
        {"_id": user_id, "secret": {"$ne": None}, "lastStep": {"$lt": step}},
        {"$set": {"lastStep": step}}, return_document=ReturnDocument.AFTER)
    return found is not None


async def use_recovery_code(store: Store, user_id: str, digest: str) -> int | None:
    """Remove one recovery code by its digest; the codes left, or None when it was not there
    (unknown or used), atomically so a code works once."""
    found = await store.collection(COLLECTION).find_one_and_update(
        {"_id": user_id, "secret": {"$ne": None}, "recoveryCodes": digest},
        {"$pull": {"recoveryCodes": digest}}, return_document=ReturnDocument.AFTER)
    return None if found is None else len(found.get("recoveryCodes", []))


async def replace_recovery_codes(store: Store, user_id: str, digests: list[str]) -> bool:
    """A fresh set of recovery codes, the old ones dead; False when two-factor is off."""
    result = await store.collection(COLLECTION).update_one(
        {"_id": user_id, "secret": {"$ne": None}}, {"$set": {"recoveryCodes": digests}})
    return result.matched_count == 1


async def remove(store: Store, user_id: str) -> None:
    """Turn two-factor off: the secret and the recovery codes are gone."""
    await store.collection(COLLECTION).delete_one({"_id": user_id})


async def states_of_account(store: Store, account_id: str) -> list[dict[str, Any]]:
    """Each of the account's users' two-factor state, without secrets or code digests."""
    return await store.collection(COLLECTION).find(
        {"accountId": account_id, "secret": {"$ne": None}},
        {"_id": 1, "enabledAt": 1, "recoveryCodes": 1}).to_list(None)


# Organizations' requirement -------------------------------------------------------------------


async def set_requirement(store: Store, organization_id: str, required: bool, user_id: str
                          ) -> None:
    """Require a second factor of the organization's members, or stop requiring it."""
    if required:
        await store.collection(REQUIREMENTS).update_one(
            {"_id": organization_id},
            {"$set": {"setBy": user_id, "setAt": datetime.now(UTC)}}, upsert=True)
    else:
        await store.collection(REQUIREMENTS).delete_one({"_id": organization_id})


async def requiring(store: Store, organization_ids: list[str]) -> list[str]:
    """Which of these organizations require a second factor."""
    return [doc["_id"] async for doc in store.collection(REQUIREMENTS).find(
        {"_id": {"$in": organization_ids}}, {"_id": 1})]
