"""Two-factor sign-in: TOTP codes (RFC 6238, pyotp) and single-use recovery codes.

Enrolling makes a secret, sealed at rest (AES-256-GCM, privacy/sealing.py) and shown once as an
otpauth URI and as text; a first code confirms it, and ten recovery codes, stored only as
HMACs, are shown once. A code is accepted within one step either side of now, and only for a
step later than the last accepted one, so a code seen over a shoulder works for nobody once
used. Failed codes are counted per user in the login throttle (CODE_FAILURES a window).

Signing in with a second factor is two requests: the password answers a short-lived signed
"second step" token, not a session; the token with a code (or a recovery code) answers the
token pair. An organization's owner may require a second factor: a member without one is then
asked to enrol at their next sign-in, with the same token, before getting a session.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jwt
import pyotp

from auth.passwords import PasswordHasher
from documents import accounts, audit, two_factor
from documents.accounts import AuthenticatedUser
from documents.store import Store
from errors import Conflict, Forbidden, InvalidInput, NotFound, RateLimited, Unauthenticated
from privacy.sealing import SecretSealer

#: The name authenticator apps show beside the account.
ISSUER_NAME = "Visitor Service"
#: How long the password's answer may wait for its code: time to open an app, not a session.
SECOND_STEP_SECONDS = 5 * 60
SECOND_STEP_AUDIENCE = "visitor-service-second-step"
#: The two kinds of second step: a code from an enrolled app, or an enrolment first.
CODE = "code"
ENROL = "enrol"
RECOVERY_CODE_COUNT = 10
#: Failed codes allowed per user in the login throttle's 15-minute window: a million codes
#: with three live at a time cannot be guessed in a few tries.
CODE_FAILURES = 5
#: Codes within this many 30-second steps of now are accepted: clocks drift and people type.
VALID_WINDOW = 1
_RECOVERY_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"


@dataclass(frozen=True)
class SecondStep:
    """What a right password answers when a second factor is needed."""

    kind: str
    token: str
    expires_at: int


@dataclass(frozen=True)
class SecondStepClaims:
    """Who a valid second-step token is for, and from which network the password came."""

    user_id: str
    kind: str
    network_hash: str | None


@dataclass(frozen=True)
class Enrolment:
    """A new secret waiting for its first code; shown once."""

    secret: str
    uri: str


def _sealing_purpose(user_id: str) -> str:
    # Bound to the user, so one user's sealed secret cannot be moved to another's document.
    return f"two-factor/totp/v1/{user_id}"


def _matching_step(secret: str, code: str, now: float) -> int | None:
    """The time step whose code `code` is, within VALID_WINDOW of now, or None."""
    code = "".join(code.split())
    if not (len(code) == 6 and code.isdigit()):
        return None
    totp = pyotp.TOTP(secret)
    current = totp.timecode(int(now))
    found = None
    for step in range(current - VALID_WINDOW, current + VALID_WINDOW + 1):
        # Every step compared in constant time, none skipped, so timing says nothing.
        if hmac.compare_digest(totp.generate_otp(step), code):
            found = step
    return found


def _new_recovery_code() -> str:
    half = [secrets.choice(_RECOVERY_ALPHABET) for _ in range(10)]
    return "".join(half[:5]) + "-" + "".join(half[5:])


class TwoFactor:
    """Enrols, checks and turns off second factors, and holds organizations' requirement."""

    def __init__(self, store: Store, sealer: SecretSealer, passwords: PasswordHasher,
                 secret_key: bytes, issuer: str, clock: Callable[[], float] = time.time
                 ) -> None:
        self._store = store
        self._sealer = sealer
        self._passwords = passwords
        self._issuer = issuer
        self._clock = clock
        # Purpose-bound subkeys: a second-step token is no access token, and recovery-code
        # digests open nothing else.
        self._token_key = hashlib.sha256(b"visitor-service/second-step/v1\x00" + secret_key
                                         ).digest()
        self._recovery_key = hashlib.sha256(b"visitor-service/recovery-code/v1\x00" +
                                            secret_key).digest()
        self._throttle_key = hashlib.sha256(b"visitor-service/code-throttle/v1\x00" +
                                            secret_key).digest()

    # Second-step tokens -------------------------------------------------------------------

    async def second_step_for(self, user_id: str) -> str | None:
        """CODE for an enrolled user, ENROL for one an organization requires it of, else None
        (the password alone signs in)."""
        state = await two_factor.find(self._store, user_id)
        if state is not None and state.get("secret"):
            return CODE
        if await self._required_by(user_id):
            return ENROL
        return None

    async def _required_by(self, user_id: str) -> list[str]:
        user = await accounts.load_authenticated_user(self._store, user_id, "")
        if user is None:
            return []
        return await two_factor.requiring(self._store, list(user.roles))

    def challenge(self, user_id: str, kind: str, network_hash: str | None) -> SecondStep:
        """A second-step token for the user, valid SECOND_STEP_SECONDS."""
        now = int(self._clock())
        expires = now + SECOND_STEP_SECONDS
        token = jwt.encode({
            "iss": self._issuer, "aud": SECOND_STEP_AUDIENCE, "sub": user_id, "iat": now,
            "exp": expires, "typ": "second_step", "kind": kind, "net": network_hash,
            "jti": uuid.uuid4().hex,
        }, self._token_key, algorithm="HS256")
        return SecondStep(kind, token, expires)

    def read_challenge(self, token: str, kind: str) -> SecondStepClaims:
        """The claims of a valid second-step token of `kind`, or Unauthenticated."""
        try:
            claims = jwt.decode(token, self._token_key, algorithms=["HS256"],
                                audience=SECOND_STEP_AUDIENCE, issuer=self._issuer, leeway=0,
                                options={"require": ["exp", "iat", "iss", "aud", "sub", "typ",
                                                     "kind"]})
        except jwt.PyJWTError:
            raise Unauthenticated("the sign-in has expired; enter the password again",
                                  code="second_step_expired") from None
        if claims.get("typ") != "second_step" or claims.get("kind") != kind:
            raise Unauthenticated("the sign-in has expired; enter the password again",
                                  code="second_step_expired")
        if int(claims["exp"]) <= int(self._clock()):
            raise Unauthenticated("the sign-in has expired; enter the password again",
                                  code="second_step_expired")
        network = claims.get("net")
        return SecondStepClaims(str(claims["sub"]), kind,
                                network if isinstance(network, str) else None)

    # Enrolment ----------------------------------------------------------------------------

    async def begin(self, user_id: str) -> Enrolment:
        """A new secret for the user, kept sealed until a first code confirms it; Conflict when
        two-factor is on already (turn it off first)."""
        user = await accounts.find_user(self._store, user_id)
        if user is None:
            raise NotFound("no such user")
        secret = pyotp.random_base32()
        sealed = self._sealer.seal(secret, _sealing_purpose(user_id))
        if not await two_factor.start_enrolment(self._store, user_id, user["accountId"], sealed):
            raise Conflict("two-factor sign-in is on already", code="two_factor_on")
        uri = pyotp.TOTP(secret).provisioning_uri(name=user["email"], issuer_name=ISSUER_NAME)
        return Enrolment(secret, uri)

    async def confirm(self, user_id: str, code: str) -> list[str]:
        """Turn two-factor on with a first code of the pending secret; the recovery codes,
        shown once. Unauthenticated for a wrong code, Conflict with no enrolment pending."""
        state = await two_factor.find(self._store, user_id)
        if state is None or not state.get("pendingSecret") or state.get("secret"):
            raise Conflict("start the enrolment first", code="no_enrolment")
        await self._check_throttle(user_id)
        secret = self._sealer.open(state["pendingSecret"], _sealing_purpose(user_id))
        step = _matching_step(secret, code, self._clock())
        if step is None:
            await self._count_failure(user_id)
            raise Unauthenticated("the code is not right; check the device's time",
                                  code="invalid_code")
        codes = [_new_recovery_code() for _ in range(RECOVERY_CODE_COUNT)]
        if not await two_factor.confirm_enrolment(self._store, user_id, state["pendingSecret"],
                                                  step, [self._digest(c) for c in codes]):
            raise Conflict("start the enrolment again", code="no_enrolment")
        await self._audit(user_id, "account.two_factor_enabled")
        return codes

    # Checking -----------------------------------------------------------------------------

    async def verify(self, user_id: str, *, code: str | None = None,
                     recovery_code: str | None = None) -> None:
        """Accept one code or one recovery code of the user, once; Unauthenticated otherwise,
        RateLimited after CODE_FAILURES."""
        await self._check_throttle(user_id)
        state = await two_factor.find(self._store, user_id)
        if state is None or not state.get("secret"):
            raise Unauthenticated("two-factor sign-in is not on", code="invalid_code")
        if recovery_code is not None:
            left = await two_factor.use_recovery_code(self._store, user_id,
                                                      self._digest(recovery_code))
            if left is None:
                await self._count_failure(user_id)
                raise Unauthenticated("the recovery code is not right or was used",
                                      code="invalid_code")
            await self._audit(user_id, "account.recovery_code_used", {"left": left})
            return
        if code is None:
            raise InvalidInput("a code or a recovery code is required", field="code")
        secret = self._sealer.open(state["secret"], _sealing_purpose(user_id))
        step = _matching_step(secret, code, self._clock())
        if step is None:
            await self._count_failure(user_id)
            raise Unauthenticated("the code is not right; check the device's time",
                                  code="invalid_code")
        if not await two_factor.use_step(self._store, user_id, step):
            await self._count_failure(user_id)
            raise Unauthenticated("this code was used already; wait for the next one",
                                  code="code_used")
        await accounts.clear_failures(self._store, self._counter(user_id))

    def _digest(self, recovery_code: str) -> str:
        normal = "".join(recovery_code.lower().split()).replace("-", "")
        return hmac.new(self._recovery_key, normal.encode("utf-8"), "sha256").hexdigest()

    def _counter(self, user_id: str) -> str:
        return "code:" + hmac.new(self._throttle_key, user_id.encode(), "sha256").hexdigest()

    async def _check_throttle(self, user_id: str) -> None:
        count, until = await accounts.failures(self._store, self._counter(user_id))
        if count >= CODE_FAILURES and until is not None:
            raise RateLimited("too many wrong codes; try again later",
                              retry_after=max(1, int(until.timestamp() - self._clock())),
                              code="code_throttled")

    async def _count_failure(self, user_id: str) -> None:
        await accounts.count_failure(self._store, self._counter(user_id))

    # Signed-in management -----------------------------------------------------------------

    async def status(self, user: AuthenticatedUser) -> dict[str, Any]:
        """Whether the user has two-factor on, how many recovery codes are left, and which of
        their organizations require it (with whether they may change that)."""
        state = await two_factor.find(self._store, user.id) or {}
        enabled = bool(state.get("secret"))
        required = set(await two_factor.requiring(self._store, list(user.roles)))
        organizations = await accounts.describe_user(self._store, user)
        return {
            "enabled": enabled,
            "enabledAt": state.get("enabledAt") if enabled else None,
            "recoveryCodesLeft": len(state.get("recoveryCodes", [])) if enabled else 0,
            "organizations": [
                {"id": org["id"], "name": org["name"], "required": org["id"] in required,
                 "canChange": org["role"] == "owner"}
                for org in organizations["organizations"]],
        }

    async def _check_password(self, user_id: str, password: str) -> None:
        record = await accounts.find_user(self._store, user_id)
        if not await self._passwords.verify(password, record["passwordHash"] if record else None):
            raise Forbidden("the password is not right", code="wrong_password")

    async def disable(self, user: AuthenticatedUser, password: str, *, code: str | None = None,
                      recovery_code: str | None = None) -> None:
        """Turn two-factor off with the password and a code; Conflict while an organization of
        the user requires it."""
        await self._check_password(user.id, password)
        await self.verify(user.id, code=code, recovery_code=recovery_code)
        if await two_factor.requiring(self._store, list(user.roles)):
            raise Conflict("an organization you belong to requires two-factor sign-in",
                           code="two_factor_required")
        await two_factor.remove(self._store, user.id)
        await self._audit(user.id, "account.two_factor_disabled")

    async def renew_recovery_codes(self, user: AuthenticatedUser, password: str, code: str
                                   ) -> list[str]:
        """Ten new recovery codes, the old ones dead; the password and a code required."""
        await self._check_password(user.id, password)
        await self.verify(user.id, code=code)
        codes = [_new_recovery_code() for _ in range(RECOVERY_CODE_COUNT)]
        if not await two_factor.replace_recovery_codes(self._store, user.id,
                                                       [self._digest(c) for c in codes]):
            raise Conflict("two-factor sign-in is not on", code="two_factor_off")
        await self._audit(user.id, "account.recovery_codes_renewed")
        return codes

    async def require(self, owner: AuthenticatedUser, organization_id: str, required: bool
                      ) -> None:
        """Require a second factor of the organization's members, or stop; owners only."""
        role = owner.role_in(organization_id)
        if role is None:
            raise NotFound("no such organization")
        if role != "owner":
            raise Forbidden("only an owner sets what sign-in requires", code="owner_required")
        await two_factor.set_requirement(self._store, organization_id, required, owner.id)
        await audit.record(self._store, action="organization.two_factor_required"
                           if required else "organization.two_factor_optional",
                           actor_user_id=owner.id, account_id=owner.account_id,
                           organization_id=organization_id)

    async def _audit(self, user_id: str, action: str, details: dict[str, Any] | None = None
                     ) -> None:
        user = await accounts.find_user(self._store, user_id)
        await audit.record(self._store, action=action, actor_user_id=user_id,
                           account_id=user["accountId"] if user else None, organization_id=None,
                           details=details)
