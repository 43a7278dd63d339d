"""Passwords after sign-up: changing one, and resetting a forgotten one by a single-use link.

A change needs the current password and signs every other session out. A reset link is valid
RESET_LIFETIME, works once, and is stored only as an HMAC (documents/account_links.py); using it
signs every session out. Asking for one gets the same answer whether or not the address has an
account, and is limited per address and per client address, counted for unknown addresses too,
so the limit says nothing either. Without a mail server an owner asks for a member's link from
the team page and passes it on, and the operator's CLI prints one for anybody.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from auth.passwords import PasswordHasher
from auth.team import Mailer
from documents import account_links, accounts, audit
from documents.accounts import AuthenticatedUser
from documents.store import Store
from errors import Forbidden, NotFound, RateLimited

RESET_LIFETIME = timedelta(minutes=30)
#: Reset requests allowed per address and per client address in the login throttle's window
#: (15 minutes): enough for a person who mistyped, too few to flood an inbox.
RESETS_PER_ADDRESS = 3
RESETS_PER_CLIENT = 10


@dataclass(frozen=True)
class IssuedReset:
    """A reset link made for an owner or the operator to pass on; `link` is None when mailed."""

    link: str | None
    expires_at: datetime
    emailed: bool


class PasswordRecovery:
    """Changes and resets passwords."""

    def __init__(self, store: Store, passwords: PasswordHasher,
                 signer: account_links.LinkSigner, mailer: Mailer, secret_key: bytes,
                 public_url: str) -> None:
        self._store = store
        self._passwords = passwords
        self._signer = signer
        self._mailer = mailer
        self._public_url = public_url
        self._throttle_key = hashlib.sha256(
            b"visitor-service/reset-throttle/v1\x00" + secret_key).digest()

    def _counter(self, kind: str, value: str) -> str:
        # Keyed by an HMAC, so the throttle collection holds no address.
        digest = hmac.new(self._throttle_key, value.encode(), "sha256").hexdigest()
        return f"{kind}:{digest}"

    async def change(self, user: AuthenticatedUser, current: str, new: str) -> None:
        """Set a new password after checking the current one; other sessions end."""
        record = await accounts.find_user(self._store, user.id)
        if not await self._passwords.verify(current, record["passwordHash"] if record else None):
            raise Forbidden("the current password is not right", code="wrong_password")
        password_hash = await self._passwords.hash(new)
        await self._set(user.id, user.account_id, password_hash, "account.password_changed",
                        actor=user.id, keep_family=user.token_family)

    async def _set(self, user_id: str, account_id: str, password_hash: str, action: str, *,
                   actor: str | None, keep_family: str | None = None,
                   used_link: str | None = None) -> None:
        async def write(session: Any) -> None:
            if used_link is not None:
                link = await account_links.use_link(self._store, account_links.PASSWORD_RESET,
                                                    used_link, session=session)
                if link is None or link["userId"] != user_id:
                    raise NotFound("this reset link is unknown, used or expired",
                                   code="invalid_link")
            await accounts.set_password_hash(self._store, user_id, password_hash,
                                             session=session)
            await account_links.revoke_user_links(self._store, account_links.PASSWORD_RESET,
                                                  user_id, session=session)
            await audit.record(self._store, action=action, actor_user_id=actor,
                               account_id=account_id, organization_id=None,
                               details={"userId": user_id}, session=session)

        await self._store.transaction(write)
        await accounts.revoke_user_sessions(self._store, user_id, "password_changed",
                                            keep_family=keep_family)

    async def request_reset(self, email: str, client_ip: str) -> None:
        """Mail a reset link when the address has an account and a mail server is set; the
        caller answers the same either way. RateLimited past either limit."""
        email = accounts.normalise_email(email)
        for key, limit in ((self._counter("reset-address", email), RESETS_PER_ADDRESS),
                           (self._counter("reset-client", client_ip), RESETS_PER_CLIENT)):
            count = await accounts.count_failure(self._store, key)
            if count > limit:
                _, until = await accounts.failures(self._store, key)
                retry = max(1, int(((until or datetime.now(UTC)) - datetime.now(UTC))
                                   .total_seconds()))
                raise RateLimited("too many reset requests; try again later",
                                  retry_after=retry, code="reset_throttled")
        user = await accounts.find_user_by_email(self._store, email)
        if user is None or not self._mailer.configured:
            return
        await self._issue(user, created_by=None, mail=True)

    async def _issue(self, user: dict[str, Any], *, created_by: str | None, mail: bool
                     ) -> IssuedReset:
        token = self._signer.new_token()
        link = await account_links.create_link(
            self._store, kind=account_links.PASSWORD_RESET,
            token_digest=self._signer.digest(token), lifetime=RESET_LIFETIME,
            account_id=user["accountId"], organization_id=None, email=user["email"],
            user_id=user["_id"], created_by=created_by)
        url = f"{self._public_url}/app/reset#{token}"
        if not mail:
            return IssuedReset(url, link["expiresAt"], False)
        minutes = int(RESET_LIFETIME.total_seconds() // 60)
        await self._mailer.send(
            kind=account_links.PASSWORD_RESET, account_id=user["accountId"], to=user["email"],
            subject="Reset your Visitor Service password",
            text=("Someone, probably you, asked to reset the password of this address on "
                  f"Visitor Service.\n\nTo choose a new one, open this link (it works once, "
                  f"within {minutes} minutes):\n\n{url}\n\nIf it was not you, ignore this "
                  "mail: your password stays as it is.\n"))
        return IssuedReset(None, link["expiresAt"], True)

    async def reset(self, token: str, new: str) -> None:
        """Set a new password with a reset link; every session of the user ends."""
        digest = self._signer.digest(token)
        link = await account_links.find_live_link(self._store, account_links.PASSWORD_RESET,
                                                  digest)
        if link is None:
            raise NotFound("this reset link is unknown, used or expired", code="invalid_link")
        password_hash = await self._passwords.hash(new)
        await self._set(link["userId"], link["accountId"], password_hash,
                        "account.password_reset", actor=link["userId"], used_link=digest)

    async def reset_for_member(self, owner: AuthenticatedUser, organization_id: str,
                               member_id: str) -> IssuedReset:
        """A reset link for a member, mailed when a mail server is set, else for the owner to
        pass on; only owners may ask."""
        role = owner.role_in(organization_id)
        if role is None:
            raise NotFound("no such organization")
        if role != "owner":
            raise Forbidden("only an owner resets a member's password", code="owner_required")
        if await accounts.find_membership(self._store, organization_id, member_id) is None:
            raise NotFound("no such member")
        user = await accounts.find_user(self._store, member_id)
        if user is None:
            raise NotFound("no such member")
        issued = await self._issue(user, created_by=owner.id, mail=self._mailer.configured)
        await audit.record(self._store, action="team.password_reset_issued",
                           actor_user_id=owner.id, account_id=owner.account_id,
                           organization_id=organization_id,
                           details={"userId": member_id, "emailed": issued.emailed})
        return issued

    async def reset_by_operator(self, email: str) -> IssuedReset:
        """A reset link for any user, printed by the operator's command line."""
        user = await accounts.find_user_by_email(self._store, email)
        if user is None:
            raise NotFound(f"no user {email}", code="no_such_user")
        issued = await self._issue(user, created_by=None, mail=False)
        await audit.record(self._store, action="account.password_reset_issued",
                           actor_user_id=None, account_id=user["accountId"],
                           organization_id=None,
                           details={"userId": user["_id"], "by": "operator"})
        return issued
