"""Accounts, organizations, users, memberships, refresh-token families and login throttling.

An account is the paying customer; it owns organizations; users belong to organizations through
memberships carrying a role (owner, admin or viewer).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pymongo import ReturnDocument

from documents.store import ASCENDING, DuplicateKeyError, Index, Store
from errors import Conflict

ROLES = ("owner", "admin", "viewer")
#: Roles allowed to change things (settings, keys, erasure); viewers only read.
ADMIN_ROLES = frozenset({"owner", "admin"})

ACCOUNTS = "accounts"
USERS = "users"
MEMBERSHIPS = "memberships"
ORGANIZATIONS = "organizations"
REFRESH_TOKENS = "refresh_tokens"
REVOKED_FAMILIES = "revoked_families"
LOGIN_THROTTLE = "login_throttle"
#: The account's invoices: read for the account export, written by billing.
INVOICES = "invoices"

INDEXES = [
    Index(USERS, (("email", ASCENDING),), unique=True),
    Index(MEMBERSHIPS, (("userId", ASCENDING), ("organizationId", ASCENDING)), unique=True),
    Index(MEMBERSHIPS, (("organizationId", ASCENDING),)),
    Index(ORGANIZATIONS, (("accountId", ASCENDING),)),
    Index(REFRESH_TOKENS, (("familyId", ASCENDING),)),
    Index(REFRESH_TOKENS, (("expiresAt", ASCENDING),), expire_after_seconds=0),
    Index(LOGIN_THROTTLE, (("expiresAt", ASCENDING),), expire_after_seconds=0),
]
#: Written inside a transaction and without an index of its own, so created at start-up: a
#: transaction must not be the first write to a collection.
COLLECTIONS = (ACCOUNTS,)


def new_id() -> str:
    """A fresh random identifier: version 4 UUID text."""
    return str(uuid.uuid4())


def normalise_email(email: str) -> str:
    """E-mail addresses compare case-insensitively and without surrounding space."""
    return email.strip().lower()


@dataclass(frozen=True)
class AuthenticatedUser:
    """The user behind a verified access token, with their organization roles."""

    id: str
    account_id: str
    email: str
    roles: dict[str, str]
    token_family: str

    def role_in(self, organization_id: str) -> str | None:
        """The user's role in that organization, or None when not a member."""
        return self.roles.get(organization_id)

    def can_administer(self, organization_id: str) -> bool:
        """True for owners and admins of that organization."""
        return self.roles.get(organization_id) in ADMIN_ROLES


async def create_account(store: Store, *, email: str, password_hash: str, display_name: str,
                         account_name: str, organization_name: str) -> dict[str, Any]:
    """Create an account with its first organization and an owner user, all or nothing."""
    now = datetime.now(UTC)
    account_id, organization_id, user_id = new_id(), new_id(), new_id()

    async def write(session: Any) -> None:
        await store.collection(ACCOUNTS).insert_one(
            {"_id": account_id, "name": account_name, "ownerUserId": user_id, "createdAt": now},
            session=session,
        )
        await store.collection(ORGANIZATIONS).insert_one(
            {"_id": organization_id, "accountId": account_id, "name": organization_name,
             "createdAt": now},
            session=session,
        )
        await _insert_member(store, session, user_id=user_id, account_id=account_id,
                             organization_id=organization_id, email=email,
                             password_hash=password_hash, display_name=display_name,
                             role="owner", now=now)

    await store.transaction(write)
    return {"accountId": account_id, "organizationId": organization_id, "userId": user_id}


async def _insert_member(store: Store, session: Any, *, user_id: str, account_id: str,
                         organization_id: str, email: str, password_hash: str,
                         display_name: str, role: str, now: datetime) -> None:
    """Insert a user and their membership inside the caller's transaction."""
    try:
        await store.collection(USERS).insert_one(
            {"_id": user_id, "accountId": account_id, "email": normalise_email(email),
             "displayName": display_name, "passwordHash": password_hash, "createdAt": now,
             "knownLoginNetworks": []},
            session=session,
        )
    except DuplicateKeyError:
        raise Conflict("a user with this e-mail already exists", code="email_taken") from None
    await store.collection(MEMBERSHIPS).insert_one(
        {"_id": new_id(), "userId": user_id, "organizationId": organization_id, "role": role,
         "createdAt": now},
        session=session,
    )


async def add_member(store: Store, *, organization_id: str, email: str, password_hash: str,
                     display_name: str, role: str) -> str:
    """Create a user in the organization's account with the given role; returns the user id."""
    organization = await store.collection(ORGANIZATIONS).find_one({"_id": organization_id})
    if organization is None:
        raise Conflict("no such organization", code="no_such_organization")
    user_id = new_id()
    now = datetime.now(UTC)

    async def write(session: Any) -> None:
        await _insert_member(store, session, user_id=user_id,
                             account_id=organization["accountId"],
                             organization_id=organization_id, email=email,
                             password_hash=password_hash, display_name=display_name, role=role,
                             now=now)

    await store.transaction(write)
    return user_id


async def find_user_by_email(store: Store, email: str) -> dict[str, Any] | None:
    """The user with that e-mail, or None."""
    return await store.collection(USERS).find_one({"email": normalise_email(email)})


async def load_authenticated_user(store: Store, user_id: str, token_family: str
                                  ) -> AuthenticatedUser | None:
    """The user with their roles, or None when the user no longer exists."""
    user = await store.collection(USERS).find_one({"_id": user_id})
    if user is None:
        return None
    roles = {
        m["organizationId"]: m["role"]
        async for m in store.collection(MEMBERSHIPS).find({"userId": user_id})
    }
    return AuthenticatedUser(user["_id"], user["accountId"], user["email"], roles, token_family)


# Refresh-token families ---------------------------------------------------------------------


async def store_refresh_token(store: Store, *, token_id: str, family_id: str, user_id: str,
                              expires_at: datetime, parent_id: str | None = None) -> None:
    """Record an issued refresh token (its id only; the token itself is never stored)."""
    await store.collection(REFRESH_TOKENS).insert_one({
        "_id": token_id, "familyId": family_id, "userId": user_id, "parentId": parent_id,
        "issuedAt": datetime.now(UTC), "expiresAt": expires_at, "revokedAt": None,
        "revokedReason": None,
    })


async def revoke_for_rotation(store: Store, token_id: str) -> dict[str, Any] | None:
    """Atomically mark a live token as rotated; returns its record before, or None if not live."""
    return await store.collection(REFRESH_TOKENS).find_one_and_update(
        {"_id": token_id, "revokedAt": None},
        {"$set": {"revokedAt": datetime.now(UTC), "revokedReason": "rotated"}},
        return_document=ReturnDocument.BEFORE,
    )


async def find_refresh_token(store: Store, token_id: str) -> dict[str, Any] | None:
    """The refresh-token record, or None."""
    return await store.collection(REFRESH_TOKENS).find_one({"_id": token_id})


async def revoke_family(store: Store, family_id: str, reason: str) -> None:
    """Revoke every live token of a family (logout, or reuse of a revoked token)."""
    await store.collection(REFRESH_TOKENS).update_many(
        {"familyId": family_id, "revokedAt": None},
        {"$set": {"revokedAt": datetime.now(UTC), "revokedReason": reason}},
    )
    await store.collection(REVOKED_FAMILIES).update_one(
        {"_id": family_id},
        {"$setOnInsert": {"revokedAt": datetime.now(UTC), "reason": reason}},
        upsert=True,
    )


async def is_family_revoked(store: Store, family_id: str) -> bool:
    """True when the family was revoked as a whole (logout or token reuse)."""
    return await store.collection(REVOKED_FAMILIES).find_one({"_id": family_id}) is not None


# Login throttling ---------------------------------------------------------------------------

THROTTLE_WINDOW = timedelta(minutes=15)


async def count_failure(store: Store, key: str) -> int:
    """Add one failed login to the counter `key` for the current window; returns the count."""
    now = datetime.now(UTC)
    doc = await store.collection(LOGIN_THROTTLE).find_one_and_update(
        {"_id": key},
        {"$inc": {"failures": 1}, "$setOnInsert": {"expiresAt": now + THROTTLE_WINDOW}},
        upsert=True,
        return_document=ReturnDocument.AFTER,
    )
    if doc["expiresAt"].replace(tzinfo=UTC) <= now:
        # An expired window that the TTL monitor has not removed yet starts afresh.
        await store.collection(LOGIN_THROTTLE).replace_one(
            {"_id": key}, {"_id": key, "failures": 1, "expiresAt": now + THROTTLE_WINDOW}
        )
        return 1
    return int(doc["failures"])


async def failures(store: Store, key: str) -> tuple[int, datetime | None]:
    """How many failures the counter holds in its live window, and when the window ends."""
    doc = await store.collection(LOGIN_THROTTLE).find_one({"_id": key})
    if doc is None:
        return 0, None
    expires = doc["expiresAt"].replace(tzinfo=UTC)
    if expires <= datetime.now(UTC):
        return 0, None
    return int(doc["failures"]), expires


async def clear_failures(store: Store, key: str) -> None:
    """Forget a counter (after a successful login)."""
    await store.collection(LOGIN_THROTTLE).delete_one({"_id": key})


async def describe_user(store: Store, user: AuthenticatedUser) -> dict[str, Any]:
    """The user, their account and organizations with roles, as /auth/me shows them."""
    record = await store.collection(USERS).find_one({"_id": user.id}) or {}
    organizations = await store.collection(ORGANIZATIONS).find(
        {"_id": {"$in": list(user.roles)}}
    ).sort("createdAt", ASCENDING).to_list(None)
    return {
        "id": user.id,
        "email": user.email,
        "displayName": record.get("displayName"),
        "accountId": user.account_id,
        "organizations": [
            {"id": org["_id"], "name": org["name"], "role": user.roles[org["_id"]]}
            for org in organizations
        ],
    }


async def find_account(store: Store, account_id: str) -> dict[str, Any] | None:
    """The account document, or None."""
    return await store.collection(ACCOUNTS).find_one({"_id": account_id})


async def organizations_of_account(store: Store, account_id: str) -> list[dict[str, Any]]:
    """The account's organizations, oldest first."""
    return await store.collection(ORGANIZATIONS).find(
        {"accountId": account_id}).sort("createdAt", ASCENDING).to_list(None)


async def users_of_account(store: Store, account_id: str) -> list[dict[str, Any]]:
    """The account's users, oldest first."""
    return await store.collection(USERS).find(
        {"accountId": account_id}).sort("createdAt", ASCENDING).to_list(None)


async def memberships_of_organizations(store: Store, organization_ids: list[str]
                                       ) -> list[dict[str, Any]]:
    """Every membership in these organizations."""
    return await store.collection(MEMBERSHIPS).find(
        {"organizationId": {"$in": organization_ids}}).to_list(None)


async def invoices_of_account(store: Store, account_id: str) -> list[dict[str, Any]]:
    """The account's invoices, oldest first."""
    return await store.collection(INVOICES).find(
        {"accountId": account_id}).sort("issuedAt", ASCENDING).to_list(None)


# Team: members, roles and sessions ------------------------------------------------------------


async def members_of_organization(store: Store, organization_id: str) -> list[dict[str, Any]]:
    """The organization's members, oldest first: user id, e-mail, name, role, last sign-in."""
    memberships = await store.collection(MEMBERSHIPS).find(
        {"organizationId": organization_id}).sort("createdAt", ASCENDING).to_list(None)
    users = {
        user["_id"]: user async for user in store.collection(USERS).find(
            {"_id": {"$in": [m["userId"] for m in memberships]}})
    }
    return [
        {"userId": m["userId"], "email": users[m["userId"]]["email"],
         "displayName": users[m["userId"]].get("displayName"), "role": m["role"],
         "memberSince": m["createdAt"],
         "lastSignInAt": users[m["userId"]].get("lastSignInAt")}
        for m in memberships if m["userId"] in users
    ]


async def find_membership(store: Store, organization_id: str, user_id: str, *,
                          session: Any = None) -> dict[str, Any] | None:
    """The user's membership of the organization, or None."""
    return await store.collection(MEMBERSHIPS).find_one(
        {"organizationId": organization_id, "userId": user_id}, session=session)


async def _keep_an_owner(store: Store, organization_id: str, session: Any) -> None:
    """Conflict when the organization would have no owner left. Writing the organization in the
    same transaction makes two owners demoting each other at once conflict instead of both
    passing the count."""
    await store.collection(ORGANIZATIONS).update_one(
        {"_id": organization_id}, {"$inc": {"ownershipChanges": 1}}, session=session)
    owners = await store.collection(MEMBERSHIPS).count_documents(
        {"organizationId": organization_id, "role": "owner"}, session=session)
    if owners == 0:
        raise Conflict("the organization's last owner cannot be removed or demoted; make "
                       "another member owner first", code="last_owner")


async def set_member_role(store: Store, organization_id: str, user_id: str, role: str, *,
                          session: Any) -> str | None:
    """Give a member a new role inside the caller's transaction; returns the old role, None
    when the user is not a member. Conflict when no owner would be left."""
    before = await store.collection(MEMBERSHIPS).find_one_and_update(
        {"organizationId": organization_id, "userId": user_id}, {"$set": {"role": role}},
        return_document=ReturnDocument.BEFORE, session=session)
    if before is None:
        return None
    if before["role"] == "owner" and role != "owner":
        await _keep_an_owner(store, organization_id, session)
    return before["role"]


async def remove_member(store: Store, organization_id: str, user_id: str, *, session: Any
                        ) -> str | None:
    """Remove a member inside the caller's transaction; returns their role, None when not a
    member. A user left in no organization is deleted, so their e-mail may be invited again.
    Conflict when no owner would be left."""
    removed = await store.collection(MEMBERSHIPS).find_one_and_delete(
        {"organizationId": organization_id, "userId": user_id}, session=session)
    if removed is None:
        return None
    if removed["role"] == "owner":
        await _keep_an_owner(store, organization_id, session)
    if await store.collection(MEMBERSHIPS).count_documents({"userId": user_id},
                                                           session=session) == 0:
        await store.collection(USERS).delete_one({"_id": user_id}, session=session)
    return removed["role"]


async def add_invited_member(store: Store, *, account_id: str, organization_id: str, email: str,
                             password_hash: str, display_name: str, role: str, session: Any
                             ) -> str:
    """Create the user an invitation names, with its role, inside the caller's transaction."""
    user_id = new_id()
    await _insert_member(store, session, user_id=user_id, account_id=account_id,
                         organization_id=organization_id, email=email,
                         password_hash=password_hash, display_name=display_name, role=role,
                         now=datetime.now(UTC))
    return user_id


async def revoke_user_sessions(store: Store, user_id: str, reason: str, *,
                               keep_family: str | None = None) -> int:
    """Revoke every live token family of the user but `keep_family`; their access tokens stop
    at once too (checked against revoked families). Returns how many were revoked."""
    families = await store.collection(REFRESH_TOKENS).distinct(
        "familyId", {"userId": user_id, "revokedAt": None})
    revoked = 0
    for family_id in families:
        if family_id != keep_family:
            await revoke_family(store, family_id, reason)
            revoked += 1
    return revoked


async def record_sign_in(store: Store, user_id: str, network_hash: str | None) -> None:
    """Note when the user signed in and, for a password sign-in, from which network
    (account-wide throttling spares networks the user has signed in from)."""
    update: dict[str, Any] = {"$set": {"lastSignInAt": datetime.now(UTC)}}
    if network_hash is not None:
        update["$addToSet"] = {"knownLoginNetworks": network_hash}
    await store.collection(USERS).update_one({"_id": user_id}, update)


async def set_password_hash(store: Store, user_id: str, password_hash: str, *,
                            session: Any = None) -> bool:
    """Replace the user's password hash; False when there is no such user."""
    result = await store.collection(USERS).update_one(
        {"_id": user_id}, {"$set": {"passwordHash": password_hash,
                                    "passwordChangedAt": datetime.now(UTC)}},
        session=session)
    return result.matched_count == 1


async def find_user(store: Store, user_id: str) -> dict[str, Any] | None:
    """The user document, or None."""
    return await store.collection(USERS).find_one({"_id": user_id})


async def find_organization(store: Store, organization_id: str) -> dict[str, Any] | None:
    """The organization document, or None."""
    return await store.collection(ORGANIZATIONS).find_one({"_id": organization_id})
