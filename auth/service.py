"""Login, refresh-token rotation, logout and access-token checks for the dashboard.

Refresh tokens rotate: each use revokes the presented token and issues a child in the same
family. Presenting a revoked token again means it leaked, so the whole family is revoked,
except within a short grace after its rotation, which is two tabs refreshing at once.

Throttling counts failures per (account, IP), per IP and per account. The account-wide limit
applies only to networks the user has never logged in from, so an attacker hammering an account
cannot lock its owner out of their usual network (docs/decisions.md).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from auth.passwords import PasswordHasher
from auth.tokens import TokenIssuer
from documents import accounts
from documents.store import Store
from errors import RateLimited, Unauthenticated


@dataclass(frozen=True)
class TokenPair:
    """What a successful login or refresh hands back."""

    access_token: str
    access_expires_at: int
    refresh_token: str
    refresh_expires_at: int
    user_id: str


@dataclass(frozen=True)
class CheckedPassword:
    """A right password: whose, and the hash of the network it came from."""

    user_id: str
    network_hash: str | None


@dataclass(frozen=True)
class ThrottleLimits:
    """Failed logins allowed per 15-minute window."""

    per_pair: int
    per_ip: int
    per_account: int


def login_network(ip: str) -> str:
    """The network a login came from: /24 for IPv4, /48 for IPv6 (home routers renumber)."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return "unknown"
    prefix = 24 if address.version == 4 else 48
    return str(ipaddress.ip_network(f"{address}/{prefix}", strict=False))


class AuthService:
    """Issues, rotates and checks dashboard credentials."""

    def __init__(self, store: Store, issuer: TokenIssuer, passwords: PasswordHasher,
                 secret_key: bytes, limits: ThrottleLimits, refresh_days: int,
                 refresh_grace_seconds: int, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self.issuer = issuer
        self.passwords = passwords
        self._throttle_key = hashlib.sha256(
            b"visitor-service/throttle/v1\x00" + secret_key
        ).digest()
        self._limits = limits
        self._refresh_seconds = refresh_days * 86400
        self._grace_seconds = refresh_grace_seconds
        self._clock = clock

    def _counter(self, kind: str, *parts: str) -> str:
        # Counters are keyed by an HMAC so the throttle collection holds no e-mail or IP.
        digest = hmac.new(self._throttle_key, "\x00".join(parts).encode(), "sha256").hexdigest()
        return f"{kind}:{digest}"

    async def login(self, email: str, password: str, client_ip: str) -> TokenPair:
        """Check the credentials and open a new token family; Unauthenticated or RateLimited."""
        checked = await self.check_credentials(email, password, client_ip)
        return await self.complete_login(checked)

    async def check_credentials(self, email: str, password: str, client_ip: str
                                ) -> CheckedPassword:
        """Check the credentials without signing in (a second factor may come next);
        Unauthenticated or RateLimited."""
        email = accounts.normalise_email(email)
        network = login_network(client_ip)
        pair_key = self._counter("pair", email, client_ip)
        ip_key = self._counter("ip", client_ip)
        account_key = self._counter("account", email)
        network_hash = self._counter("net", email, network)

        user = await accounts.find_user_by_email(self._store, email)
        for key, limit, applies in (
            (ip_key, self._limits.per_ip, True),
            (pair_key, self._limits.per_pair, True),
            (account_key, self._limits.per_account,
             user is None or network_hash not in user.get("knownLoginNetworks", [])),
        ):
            if not applies:
                continue
            count, until = await accounts.failures(self._store, key)
            if count >= limit and until is not None:
                retry = max(1, int((until - datetime.now(UTC)).total_seconds()))
                raise RateLimited("too many failed logins; try again later", retry_after=retry,
                                  code="login_throttled")

        matched = await self.passwords.verify(password, user["passwordHash"] if user else None)
        if not matched or user is None:
            for key in (pair_key, ip_key, account_key):
                await accounts.count_failure(self._store, key)
            # One answer for unknown user and wrong password.
            raise Unauthenticated("e-mail or password is wrong", code="invalid_credentials")

        await accounts.clear_failures(self._store, pair_key)
        return CheckedPassword(user["_id"], network_hash)

    async def complete_login(self, checked: CheckedPassword) -> TokenPair:
        """Open a new token family for a user whose password (and second factor) was right."""
        await accounts.record_sign_in(self._store, checked.user_id, checked.network_hash)
        return await self._issue(checked.user_id, accounts.new_id(), parent_id=None)

    async def sign_in(self, user_id: str) -> TokenPair:
        """Open a new token family for a user who just proved who they are another way (an
        invitation accepted, a password reset)."""
        await accounts.record_sign_in(self._store, user_id, None)
        return await self._issue(user_id, accounts.new_id(), parent_id=None)

    async def _issue(self, user_id: str, family_id: str, parent_id: str | None) -> TokenPair:
        token_id = accounts.new_id()
        refresh, refresh_expires = self.issuer.issue_refresh(
            user_id, token_id, family_id, self._refresh_seconds
        )
        await accounts.store_refresh_token(
            self._store, token_id=token_id, family_id=family_id, user_id=user_id,
            expires_at=datetime.fromtimestamp(refresh_expires, UTC), parent_id=parent_id,
        )
        access, access_expires = self.issuer.issue_access(user_id, family_id)
        return TokenPair(access, access_expires, refresh, refresh_expires, user_id)

    async def refresh(self, refresh_token: str) -> TokenPair:
        """Rotate a refresh token; reuse outside the grace revokes the family (Unauthenticated)."""
        claims = self.issuer.verify_refresh(refresh_token)
        if await accounts.is_family_revoked(self._store, claims.family_id):
            raise Unauthenticated("session has ended", code="session_revoked")
        if await accounts.revoke_for_rotation(self._store, claims.token_id) is not None:
            return await self._issue(claims.user_id, claims.family_id, claims.token_id)
        record = await accounts.find_refresh_token(self._store, claims.token_id)
        if record is not None and record.get("revokedReason") == "rotated":
            rotated_at = record["revokedAt"].replace(tzinfo=UTC)
            age = datetime.now(UTC) - rotated_at
            if age.total_seconds() <= self._grace_seconds:
                return await self._issue(claims.user_id, claims.family_id, claims.token_id)
        await accounts.revoke_family(self._store, claims.family_id, "reuse")
        raise Unauthenticated("session has ended", code="session_revoked")

    async def logout(self, refresh_token: str) -> None:
        """Revoke the token's whole family; access tokens of the family stop working too."""
        claims = self.issuer.verify_refresh(refresh_token)
        await accounts.revoke_family(self._store, claims.family_id, "logout")

    async def logout_family(self, family_id: str) -> None:
        """Revoke a family known from an access token (logout without the refresh token)."""
        await accounts.revoke_family(self._store, family_id, "logout")

    async def authenticate(self, access_token: str) -> accounts.AuthenticatedUser:
        """The user behind a valid, unrevoked access token, or Unauthenticated."""
        claims = self.issuer.verify_access(access_token)
        if await accounts.is_family_revoked(self._store, claims.family_id):
            raise Unauthenticated("session has ended", code="session_revoked")
        user = await accounts.load_authenticated_user(self._store, claims.user_id,
                                                      claims.family_id)
        if user is None:
            raise Unauthenticated("invalid or expired token", code="invalid_token")
        return user
