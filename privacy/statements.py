"""Signed product statements: the shop server vouches "a visitor viewed product P on page U at T".

The shop plugin signs each statement with a key derived from the site API key; this module derives
that key, signs (for tests and tooling) and verifies. The full specification, test vectors and
reference signers for the plugin side live in ``docs/product-statements.md``.

Key: HKDF-SHA256(ikm = API key as UTF-8, salt = ``visitor-service/product-statement/v1``,
info = ``product-statement-signing``, length = 32).

Canonical form (the bytes that are MACed), UTF-8 encoded::

    "v1\\n" + productId + "\\n" + pageUrl + "\\n" + decimal(issuedAt) + "\\n" + nonce

Neither productId nor pageUrl may contain a line feed, issuedAt is a non-negative integer written
in plain decimal and the nonce is base64url, so the five lines split back unambiguously.

Token form::

    "v1." + b64url(JSON {"n": nonce, "p": productId, "t": issuedAt, "u": pageUrl})
          + "." + b64url(HMAC-SHA256(key, canonical form))

b64url is URL-safe base64 without padding. The JSON is only the transport: the MAC covers the
canonical form, so any JSON spelling of the same four fields verifies.

Replay detection is deliberately not here: it needs shared storage. A verified statement's nonce
must be recorded by the caller, and a nonce seen twice must be rejected.
"""

import base64
import binascii
import hashlib
import hmac
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

STATEMENT_VERSION = "v1"
KEY_SALT = b"visitor-service/product-statement/v1"
KEY_INFO = b"product-statement-signing"
KEY_BYTES = 32
NONCE_BYTES = 16
MAX_PRODUCT_ID_CHARS = 128
MAX_PAGE_URL_CHARS = 4096
MAX_ISSUED_AT = 2**63 - 1
MAX_TOKEN_CHARS = 8192
DEFAULT_MAX_AGE_SECONDS = 600
FUTURE_SKEW_SECONDS = 60

Rejection = Literal["malformed", "bad_signature", "expired", "from_future", "url_mismatch"]

_URLSAFE_B64_UNPADDED = re.compile(r"[A-Za-z0-9_-]+")
_PAYLOAD_KEYS = frozenset({"n", "p", "t", "u"})


@dataclass(frozen=True, slots=True)
class ProductStatement:
    """One attested product view; construction validates every field (raises ValueError)."""

    product_id: str
    page_url: str
    issued_at: int
    nonce: str

    def __post_init__(self) -> None:
        _check_text_field("productId", self.product_id, MAX_PRODUCT_ID_CHARS)
        _check_text_field("pageUrl", self.page_url, MAX_PAGE_URL_CHARS)
        # bool is an int subclass, and JSON true must not pass as a timestamp.
        if type(self.issued_at) is not int or not 0 <= self.issued_at <= MAX_ISSUED_AT:
            raise ValueError("issuedAt must be an integer number of seconds in [0, 2**63 - 1]")
        if not isinstance(self.nonce, str):
            raise ValueError("nonce must be text")
        # A non-canonical spelling of the same 16 bytes would dodge the caller's replay check.
        decoded = _b64decode_canonical(self.nonce)
        if decoded is None or len(decoded) != NONCE_BYTES:
            raise ValueError(f"nonce must be {NONCE_BYTES} bytes in unpadded base64url")


@dataclass(frozen=True, slots=True)
class StatementCheck:
    """Outcome of verify_statement: the statement when accepted, otherwise the rejection reason."""

    statement: ProductStatement | None
    rejection: Rejection | None

    @property
    def accepted(self) -> bool:
        """True when the statement passed every check (replay excepted)."""
        return self.rejection is None


def _check_text_field(name: str, value: object, max_chars: int) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be text")
    if not 1 <= len(value) <= max_chars:
        raise ValueError(f"{name} must be 1 to {max_chars} characters long")
    if "\n" in value:
        raise ValueError(f"{name} must not contain a line feed")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"{name} is not valid Unicode text") from error


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64decode_canonical(text: str) -> bytes | None:
    if not _URLSAFE_B64_UNPADDED.fullmatch(text):
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error:
        return None
    return raw if _b64encode(raw) == text else None


def derive_statement_key(api_key: str) -> bytes:
    """Derive the 32-byte statement signing key from a site API key with HKDF-SHA256."""
    if not api_key:
        raise ValueError("an API key is required to derive the statement key")
    hkdf = HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=KEY_SALT, info=KEY_INFO)
    return hkdf.derive(api_key.encode("utf-8"))


def canonical_bytes(statement: ProductStatement) -> bytes:
    """Return the exact bytes that are MACed for a statement."""
    lines = (
        STATEMENT_VERSION,
        statement.product_id,
        statement.page_url,
        str(statement.issued_at),
        statement.nonce,
    )
    return "\n".join(lines).encode("utf-8")


def _mac(key: bytes, statement: ProductStatement) -> bytes:
    return hmac.new(key, canonical_bytes(statement), hashlib.sha256).digest()


def sign_statement(
    key: bytes, product_id: str, page_url: str, issued_at: int, nonce: str | None = None
) -> str:
    """Sign a product statement and return its token; a fresh random nonce is used by default."""
    if nonce is None:
        nonce = _b64encode(os.urandom(NONCE_BYTES))
    statement = ProductStatement(
        product_id=product_id, page_url=page_url, issued_at=issued_at, nonce=nonce
    )
    payload = {
        "n": statement.nonce,
        "p": statement.product_id,
        "t": statement.issued_at,
        "u": statement.page_url,
    }
    payload_json = json.dumps(payload, separators=(",", ":"), sort_keys=True)
    encoded_payload = _b64encode(payload_json.encode("utf-8"))
    return f"{STATEMENT_VERSION}.{encoded_payload}.{_b64encode(_mac(key, statement))}"


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate key in statement payload")
    return dict(pairs)


def _parse_token(token: object) -> tuple[ProductStatement, bytes] | None:
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS:
        return None
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != STATEMENT_VERSION:
        return None
    payload_bytes = _b64decode_canonical(parts[1])
    mac = _b64decode_canonical(parts[2])
    if payload_bytes is None or mac is None or len(mac) != hashlib.sha256().digest_size:
        return None
    try:
        payload_text = payload_bytes.decode("utf-8")
        payload = json.loads(payload_text, object_pairs_hook=_reject_duplicate_keys)
        if not isinstance(payload, dict) or payload.keys() != _PAYLOAD_KEYS:
            return None
        statement = ProductStatement(
            product_id=payload["p"],
            page_url=payload["u"],
            issued_at=payload["t"],
            nonce=payload["n"],
        )
    except (ValueError, RecursionError):
        return None
    return statement, mac


def _without_fragment(url: str) -> str:
    return url.split("#", 1)[0]


def verify_statement(
    token: str,
    keys: Sequence[bytes],
    now: int,
    max_age_seconds: int = DEFAULT_MAX_AGE_SECONDS,
    page_url: str | None = None,
) -> StatementCheck:
    """Check a token's format, signature (against every key), age and page; never raises on it.

    Replay is not detected here: the caller must record ``statement.nonce`` of every accepted
    statement and reject a nonce it has already seen.
    """
    if not keys:
        raise ValueError("at least one statement key is required")
    if max_age_seconds < 0:
        raise ValueError("max_age_seconds must not be negative")
    parsed = _parse_token(token)
    if parsed is None:
        return StatementCheck(statement=None, rejection="malformed")
    statement, presented_mac = parsed
    # Every key is tried, so timing does not reveal whether the current or previous key matched.
    matched = False
    for key in keys:
        matched |= hmac.compare_digest(_mac(key, statement), presented_mac)
    if not matched:
        return StatementCheck(statement=None, rejection="bad_signature")
    if statement.issued_at - now > FUTURE_SKEW_SECONDS:
        return StatementCheck(statement=None, rejection="from_future")
    if now - statement.issued_at > max_age_seconds:
        return StatementCheck(statement=None, rejection="expired")
    # The browser's URL may carry a fragment the shop server never saw when it signed.
    if page_url is not None and _without_fragment(page_url) != _without_fragment(
        statement.page_url
    ):
        return StatementCheck(statement=None, rejection="url_mismatch")
    return StatementCheck(statement=statement, rejection=None)
