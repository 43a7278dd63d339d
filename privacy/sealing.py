"""Authenticated encryption of stored secrets (webhook secrets, SMTP passwords) under a master key.

Sealed text format: ``v1.<nonce>.<ciphertext>`` where both parts are URL-safe base64 without
padding; ``nonce`` is 12 random bytes and ``ciphertext`` is the AES-256-GCM output including its
16-byte tag. The caller-chosen ``purpose`` is bound as associated data, so a secret sealed for one
purpose cannot be opened (or replayed) as another.
"""

import base64
import binascii
import os
import re

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

MASTER_KEY_BYTES = 32
NONCE_BYTES = 12
GCM_TAG_BYTES = 16
SEALED_FORMAT_VERSION = "v1"

_URLSAFE_B64_UNPADDED = re.compile(r"[A-Za-z0-9_-]+")


class SealedSecretError(ValueError):
    """A sealed secret could not be opened: tampered, wrong purpose, wrong key or bad format."""


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _decode(text: str) -> bytes:
    # Strict decoding keeps one sealed value to one spelling; the lenient stdlib decoder would
    # silently skip foreign characters.
    if not _URLSAFE_B64_UNPADDED.fullmatch(text):
        raise SealedSecretError("sealed secret is not valid base64")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as error:
        raise SealedSecretError("sealed secret is not valid base64") from error
    if _encode(raw) != text:
        raise SealedSecretError("sealed secret is not canonical base64")
    return raw


class SecretSealer:
    """Seals and opens secrets with AES-256-GCM under one master key."""

    __slots__ = ("_aead",)

    def __init__(self, master_key: bytes) -> None:
        if not isinstance(master_key, bytes) or len(master_key) != MASTER_KEY_BYTES:
            raise ValueError(f"the master key must be exactly {MASTER_KEY_BYTES} bytes")
        self._aead = AESGCM(master_key)

    def __repr__(self) -> str:
        return "SecretSealer(<master key hidden>)"

    def seal(self, plaintext: str, purpose: str) -> str:
        """Encrypt plaintext bound to purpose, with a fresh random nonce every call."""
        if not purpose:
            raise ValueError("a purpose is required so sealed secrets cannot be swapped")
        nonce = os.urandom(NONCE_BYTES)
        ciphertext = self._aead.encrypt(nonce, plaintext.encode("utf-8"), purpose.encode("utf-8"))
        return f"{SEALED_FORMAT_VERSION}.{_encode(nonce)}.{_encode(ciphertext)}"

    def open(self, sealed: str, purpose: str) -> str:
        """Decrypt a sealed secret; raise SealedSecretError unless intact and sealed for purpose."""
        if not isinstance(sealed, str) or not isinstance(purpose, str):
            raise SealedSecretError("sealed secret and purpose must be text")
        parts = sealed.split(".")
        if len(parts) != 3 or parts[0] != SEALED_FORMAT_VERSION:
            raise SealedSecretError("sealed secret has an unknown format")
        nonce = _decode(parts[1])
        ciphertext = _decode(parts[2])
        if len(nonce) != NONCE_BYTES or len(ciphertext) < GCM_TAG_BYTES:
            raise SealedSecretError("sealed secret has the wrong length")
        try:
            associated_data = purpose.encode("utf-8")
            plaintext = self._aead.decrypt(nonce, ciphertext, associated_data)
            return plaintext.decode("utf-8")
        except (InvalidTag, UnicodeError) as error:
            raise SealedSecretError(
                "sealed secret was tampered with or sealed for another key or purpose"
            ) from error
