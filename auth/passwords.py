"""Password hashing with bcrypt (the BCRYPT_ROUNDS setting, 12 by default), run off the event
loop.

bcrypt only reads the first 72 bytes and bcrypt 5 raises on longer input, so a longer password
is refused with a clear error instead of being silently truncated or pre-hashed (decision
recorded in docs/decisions.md).

A new password must not be a commonly used one (NIST SP 800-63B, 5.1.1.2): zxcvbn, Dropbox's
estimator, matches it against lists of common passwords, words, names, keyboard patterns,
repeats, sequences and dates, and a password it expects to fall within 10^8 guesses is refused
with its own hint. No composition rules (digits, symbols), which SP 800-63B advises against.
"""

from __future__ import annotations

import asyncio

import bcrypt
from zxcvbn import zxcvbn

from errors import InvalidInput

MAX_PASSWORD_BYTES = 72
MIN_PASSWORD_CHARS = 10
#: zxcvbn's score 3, "safely unguessable": at least 10^8 guesses. Below it are the common
#: passwords, the common ones with a digit or a year added, repeats and keyboard walks.
MIN_PASSWORD_SCORE = 3


def check_password_rules(password: str) -> bytes:
    """The UTF-8 bytes of an acceptable password, or InvalidInput saying what is wrong."""
    encoded = password.encode("utf-8")
    if len(encoded) > MAX_PASSWORD_BYTES:
        raise InvalidInput(
            f"password is longer than {MAX_PASSWORD_BYTES} bytes",
            field="password",
            code="password_too_long",
        )
    return encoded


def check_new_password(password: str) -> bytes:
    """Like `check_password_rules`, plus the minimum length for passwords being set."""
    encoded = check_password_rules(password)
    if len(password) < MIN_PASSWORD_CHARS:
        raise InvalidInput(
            f"password must have at least {MIN_PASSWORD_CHARS} characters",
            field="password",
            code="password_too_short",
        )
    estimate = zxcvbn(password)
    if estimate["score"] < MIN_PASSWORD_SCORE:
        hint = estimate["feedback"]["warning"] or "It is too easy to guess."
        raise InvalidInput(
            f"password is too common or too easy to guess: {hint} A few unrelated words "
            "make a strong one.",
            field="password",
            code="password_too_common",
        )
    return encoded


class PasswordHasher:
    """Hashes new passwords at one bcrypt cost and checks passwords in constant time, also for
    unknown users (against a dummy hash)."""

    def __init__(self, rounds: int) -> None:
        # Verifying unknown users against a real hash of the same cost keeps "no such user"
        # and "wrong password" indistinguishable by timing.
        self.rounds = rounds
        self._dummy_hash = bcrypt.hashpw(b"dummy-password-never-matches", bcrypt.gensalt(rounds))

    async def hash(self, password: str) -> str:
        """A bcrypt hash of a new password, computed in a worker thread."""
        encoded = check_new_password(password)
        hashed = await asyncio.to_thread(bcrypt.hashpw, encoded, bcrypt.gensalt(self.rounds))
        return hashed.decode("ascii")

    async def verify(self, password: str, stored_hash: str | None) -> bool:
        """True when `password` matches `stored_hash`; always costs one bcrypt check."""
        encoded = check_password_rules(password)
        target = stored_hash.encode("ascii") if stored_hash else self._dummy_hash
        matched = await asyncio.to_thread(bcrypt.checkpw, encoded, target)
        return bool(matched) and stored_hash is not None
