"""Tests for sealing stored secrets with AES-256-GCM."""

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from privacy.sealing import SealedSecretError, SecretSealer

MASTER_KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
SMTP_PASSWORD = "correct-horse-battery-staple"

# Lone surrogates cannot be encoded as UTF-8, so they are not text anyone can store.
storable_text = st.text(alphabet=st.characters(codec="utf-8"))


def _decode_part(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _flip_one_bit(text: str, index: int) -> str:
    version, nonce, ciphertext = text.split(".")
    raw = bytearray(_decode_part(ciphertext))
    raw[index % len(raw)] ^= 0x01
    flipped = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode("ascii")
    return f"{version}.{nonce}.{flipped}"


@given(storable_text, storable_text.filter(bool))
def test_a_sealed_secret_opens_to_the_original_text(plaintext: str, purpose: str) -> None:
    sealer = SecretSealer(MASTER_KEY)
    assert sealer.open(sealer.seal(plaintext, purpose), purpose) == plaintext


def test_sealed_text_has_the_documented_shape() -> None:
    version, nonce, ciphertext = SecretSealer(MASTER_KEY).seal(SMTP_PASSWORD, "smtp").split(".")
    assert version == "v1"
    assert len(_decode_part(nonce)) == 12
    assert len(_decode_part(ciphertext)) == len(SMTP_PASSWORD.encode()) + 16
    assert "=" not in nonce + ciphertext


def test_sealing_the_same_text_twice_gives_different_results() -> None:
    sealer = SecretSealer(MASTER_KEY)
    first = sealer.seal(SMTP_PASSWORD, "smtp")
    second = sealer.seal(SMTP_PASSWORD, "smtp")
    assert first != second
    assert first.split(".")[1] != second.split(".")[1]


def test_the_plaintext_never_appears_in_the_sealed_text() -> None:
    sealed = SecretSealer(MASTER_KEY).seal(SMTP_PASSWORD, "smtp")
    assert SMTP_PASSWORD not in sealed
    for part in sealed.split(".")[1:]:
        assert SMTP_PASSWORD.encode() not in _decode_part(part)


def test_a_secret_sealed_for_one_purpose_cannot_be_opened_for_another() -> None:
    sealer = SecretSealer(MASTER_KEY)
    sealed_webhook_secret = sealer.seal(SMTP_PASSWORD, "webhook-secret")
    with pytest.raises(SealedSecretError):
        sealer.open(sealed_webhook_secret, "smtp-password")


def test_a_secret_sealed_under_another_key_cannot_be_opened() -> None:
    sealed = SecretSealer(OTHER_KEY).seal(SMTP_PASSWORD, "smtp")
    with pytest.raises(SealedSecretError):
        SecretSealer(MASTER_KEY).open(sealed, "smtp")


@given(st.integers(min_value=0))
def test_flipping_any_ciphertext_bit_makes_opening_fail(index: int) -> None:
    sealer = SecretSealer(MASTER_KEY)
    tampered = _flip_one_bit(sealer.seal(SMTP_PASSWORD, "smtp"), index)
    with pytest.raises(SealedSecretError):
        sealer.open(tampered, "smtp")


def test_a_changed_nonce_makes_opening_fail() -> None:
    sealer = SecretSealer(MASTER_KEY)
    version, _, ciphertext = sealer.seal(SMTP_PASSWORD, "smtp").split(".")
    other_nonce = base64.urlsafe_b64encode(bytes(12)).rstrip(b"=").decode()
    with pytest.raises(SealedSecretError):
        sealer.open(f"{version}.{other_nonce}.{ciphertext}", "smtp")


@pytest.mark.parametrize(
    "sealed",
    [
        "",
        "v1",
        "v1..",
        "v2.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA",
        "v1.AAAAAAAAAAAAAAAA.AAAA",
        "v1.AAAA.AAAAAAAAAAAAAAAAAAAAAA",
        "v1.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA.extra",
        "v1.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAA*",
        "v1.AAAAAAAAAAAAAAAA=.AAAAAAAAAAAAAAAAAAAAAA",
        "plain text password",
    ],
)
def test_badly_formatted_sealed_text_is_refused(sealed: str) -> None:
    with pytest.raises(SealedSecretError):
        SecretSealer(MASTER_KEY).open(sealed, "smtp")


def test_sealed_secret_error_is_a_value_error() -> None:
    assert issubclass(SealedSecretError, ValueError)


@pytest.mark.parametrize("master_key", [b"", bytes(16), bytes(31), bytes(33), "x" * 32])
def test_a_master_key_that_is_not_32_bytes_is_refused(master_key: bytes) -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        SecretSealer(master_key)


def test_sealing_without_a_purpose_is_refused() -> None:
    with pytest.raises(ValueError, match="purpose"):
        SecretSealer(MASTER_KEY).seal(SMTP_PASSWORD, "")


def test_the_sealer_does_not_show_its_key_when_printed() -> None:
    key_text = repr(MASTER_KEY)
    assert key_text not in repr(SecretSealer(MASTER_KEY))
    assert MASTER_KEY.hex() not in repr(SecretSealer(MASTER_KEY))
