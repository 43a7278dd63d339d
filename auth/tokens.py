"""JSON Web Tokens for the dashboard: one pinned algorithm, typed, audience-bound.

Rules: HS256 only (so `none` and algorithm confusion are refused by PyJWT), `iss`, `aud`, `exp`
and `iat` required and checked, a `typ` claim separating access from refresh tokens, and the
header's `kid` never read (an attacker-chosen key id must not choose our key).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jwt

from errors import Unauthenticated

ALGORITHM = "HS256"
AUDIENCE = "visitor-service-dashboard"
#: Access tokens live 15 minutes (spec §5, §8).
ACCESS_TOKEN_SECONDS = 15 * 60
ACCESS = "access"
REFRESH = "refresh"


@dataclass(frozen=True)
class RefreshClaims:
    """What a verified refresh token says."""

    user_id: str
    token_id: str
    family_id: str
    expires_at: int


@dataclass(frozen=True)
class AccessClaims:
    """What a verified access token says."""

    user_id: str
    token_id: str
    family_id: str
    expires_at: int


class TokenIssuer:
    """Issues and verifies tokens with a key derived from the service secret."""

    def __init__(self, secret_key: bytes, issuer: str, clock: Callable[[], float] = time.time
                 ) -> None:
        # A purpose-bound subkey: the same SECRET_KEY also peppers API-key hashes.
        self._key = hashlib.sha256(b"visitor-service/jwt/v1\x00" + secret_key).digest()
        self.issuer = issuer
        self._clock = clock

    def _encode(self, claims: dict[str, Any]) -> str:
        return jwt.encode(claims, self._key, algorithm=ALGORITHM)

    def issue_access(self, user_id: str, family_id: str) -> tuple[str, int]:
        """A new access token and its expiry (unix seconds)."""
        now = int(self._clock())
        expires = now + ACCESS_TOKEN_SECONDS
        token = self._encode({
            "iss": self.issuer, "aud": AUDIENCE, "sub": user_id, "iat": now, "exp": expires,
            "typ": ACCESS, "jti": uuid.uuid4().hex, "fam": family_id,
        })
        return token, expires

    def issue_refresh(self, user_id: str, token_id: str, family_id: str, lifetime_seconds: int
                      ) -> tuple[str, int]:
        """A new refresh token and its expiry (unix seconds)."""
        now = int(self._clock())
        expires = now + lifetime_seconds
        token = self._encode({
            "iss": self.issuer, "aud": AUDIENCE, "sub": user_id, "iat": now, "exp": expires,
            "typ": REFRESH, "jti": token_id, "fam": family_id,
        })
        return token, expires

    def _decode(self, token: str, expected_type: str) -> dict[str, Any]:
        try:
            claims = jwt.decode(
                token,
                self._key,
                algorithms=[ALGORITHM],
                audience=AUDIENCE,
                issuer=self.issuer,
                leeway=0,
                options={"require": ["exp", "iat", "iss", "aud", "sub", "typ", "jti", "fam"]},
            )
        except jwt.PyJWTError:
            raise Unauthenticated("invalid or expired token", code="invalid_token") from None
        if claims.get("typ") != expected_type:
            raise Unauthenticated("invalid or expired token", code="invalid_token")
        if int(claims["iat"]) > int(self._clock()) + 60:
            raise Unauthenticated("invalid or expired token", code="invalid_token")
        if int(claims["exp"]) <= int(self._clock()):
            raise Unauthenticated("invalid or expired token", code="invalid_token")
        return claims

    def verify_access(self, token: str) -> AccessClaims:
        """The claims of a valid access token, or Unauthenticated."""
        claims = self._decode(token, ACCESS)
        return AccessClaims(str(claims["sub"]), str(claims["jti"]), str(claims["fam"]),
                            int(claims["exp"]))

    def verify_refresh(self, token: str) -> RefreshClaims:
        """The claims of a valid refresh token, or Unauthenticated."""
        claims = self._decode(token, REFRESH)
        return RefreshClaims(str(claims["sub"]), str(claims["jti"]), str(claims["fam"]),
                             int(claims["exp"]))
