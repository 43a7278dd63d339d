"""Single-use account links: invitations to an organization and password resets.

A link carries a random token; only its HMAC under a key derived from SECRET_KEY is stored, so
the collection alone opens nothing. A link is used by one atomic update that also checks its
expiry, so two clicks race for one use. Used and expired links stay until `removeAt` (the TTL
monitor) so the account export and the team page can say what became of an invitation.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

from pymongo import ReturnDocument

from documents.accounts import new_id, normalise_email
from documents.store import ASCENDING, DESCENDING, Index, Store

COLLECTION = "account_links"
INVITATION = "invitation"
PASSWORD_RESET = "password_reset"
#: How long a used or expired link is kept for the team page and the export.
KEPT_AFTER_EXPIRY = timedelta(days=30)

INDEXES = [
    Index(COLLECTION, (("tokenDigest", ASCENDING),), unique=True),
    Index(COLLECTION, (("organizationId", ASCENDING), ("kind", ASCENDING),
                       ("createdAt", DESCENDING))),
    Index(COLLECTION, (("accountId", ASCENDING),)),
    Index(COLLECTION, (("removeAt", ASCENDING),), expire_after_seconds=0),
]


class LinkSigner:
    """Makes link tokens and the digests they are stored as (HMAC-SHA256, purpose-bound key)."""

    def __init__(self, secret_key: bytes) -> None:
        self._key = hashlib.sha256(b"visitor-service/account-link/v1\x00" + secret_key).digest()

    @staticmethod
    def new_token() -> str:
        """A fresh token for a link: 256 random bits, URL-safe."""
        return secrets.token_urlsafe(32)

    def digest(self, token: str) -> str:
        """The stored form of a token."""
        return hmac.new(self._key, token.encode("utf-8"), "sha256").hexdigest()


async def create_link(store: Store, *, kind: str, token_digest: str, lifetime: timedelta,
                      account_id: str, organization_id: str | None, email: str,
                      role: str | None = None, user_id: str | None = None,
                      created_by: str | None = None, session: Any = None) -> dict[str, Any]:
    """Store a new link (its digest only) and return its document."""
    now = datetime.now(UTC)
    link = {
        "_id": new_id(), "kind": kind, "tokenDigest": token_digest, "accountId": account_id,
        "organizationId": organization_id, "email": normalise_email(email), "role": role,
        "userId": user_id, "createdBy": created_by, "createdAt": now,
        "expiresAt": now + lifetime, "usedAt": None, "revokedAt": None,
        "removeAt": now + lifetime + KEPT_AFTER_EXPIRY,
    }
    await store.collection(COLLECTION).insert_one(link, session=session)
    return link


async def use_link(store: Store, kind: str, token_digest: str, *, session: Any = None
                   ) -> dict[str, Any] | None:
    """Mark a live link of `kind` used and return it; None when unknown, used, revoked or
    expired."""
    now = datetime.now(UTC)
    return await store.collection(COLLECTION).find_one_and_update(
        {"tokenDigest": token_digest, "kind": kind, "usedAt": None, "revokedAt": None,
         "expiresAt": {"$gt": now}},
        {"$set": {"usedAt": now}},
        return_document=ReturnDocument.AFTER, session=session,
    )


async def find_live_link(store: Store, kind: str, token_digest: str) -> dict[str, Any] | None:
    """A live link of `kind` by its digest, without using it (to show who is invited)."""
    return await store.collection(COLLECTION).find_one(
        {"tokenDigest": token_digest, "kind": kind, "usedAt": None, "revokedAt": None,
         "expiresAt": {"$gt": datetime.now(UTC)}})


async def revoke_invitation(store: Store, organization_id: str, link_id: str, *,
                            session: Any = None) -> dict[str, Any] | None:
    """Revoke a pending invitation of the organization; None when there is none to revoke."""
    return await store.collection(COLLECTION).find_one_and_update(
        {"_id": link_id, "kind": INVITATION, "organizationId": organization_id, "usedAt": None,
         "revokedAt": None},
        {"$set": {"revokedAt": datetime.now(UTC)}},
        return_document=ReturnDocument.AFTER, session=session,
    )


async def revoke_user_links(store: Store, kind: str, user_id: str, *, session: Any = None
                            ) -> None:
    """Revoke every live link of `kind` issued to the user (a reset used, a password changed)."""
    await store.collection(COLLECTION).update_many(
        {"kind": kind, "userId": user_id, "usedAt": None, "revokedAt": None},
        {"$set": {"revokedAt": datetime.now(UTC)}}, session=session)


async def pending_invitations(store: Store, organization_id: str) -> list[dict[str, Any]]:
    """The organization's invitations not used, revoked or expired, newest first."""
    return await store.collection(COLLECTION).find(
        {"organizationId": organization_id, "kind": INVITATION, "usedAt": None,
         "revokedAt": None, "expiresAt": {"$gt": datetime.now(UTC)}},
    ).sort("createdAt", DESCENDING).to_list(None)


async def revoke_invitations_of(store: Store, organization_id: str, email: str, *,
                                session: Any = None) -> None:
    """Revoke the pending invitations of that address to the organization (a new one
    replaces them)."""
    await store.collection(COLLECTION).update_many(
        {"organizationId": organization_id, "kind": INVITATION,
         "email": normalise_email(email), "usedAt": None, "revokedAt": None},
        {"$set": {"revokedAt": datetime.now(UTC)}}, session=session)


async def invitations_of_account(store: Store, account_id: str) -> list[dict[str, Any]]:
    """Every invitation of the account still kept, oldest first, without token digests."""
    found = await store.collection(COLLECTION).find(
        {"accountId": account_id, "kind": INVITATION}, {"tokenDigest": 0},
    ).sort("createdAt", ASCENDING).to_list(None)
    return [{key: value for key, value in link.items() if key != "removeAt"} for link in found]


def invitation_view(link: dict[str, Any]) -> dict[str, Any]:
    """An invitation as the team API shows it."""
    return {"id": link["_id"], "email": link["email"], "role": link["role"],
            "invitedAt": link["createdAt"], "expiresAt": link["expiresAt"]}
