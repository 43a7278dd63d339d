"""New passwords: commonly used ones are refused (NIST SP 800-63B), long ones named, strong
ones of any composition accepted (issue 28: `aaaaaaaaaa` and `password123` were accepted)."""

from __future__ import annotations

import pytest

from auth.passwords import PasswordHasher, check_new_password
from errors import InvalidInput


@pytest.mark.parametrize("password", [
    "password123", "aaaaaaaaaa", "qwertyuiop", "1234567890", "iloveyou12", "Passw0rd!!",
    "summer2024!", "letmein2025", "abcdefghij", "0987654321",
])
def test_a_commonly_used_password_is_refused_with_a_hint(password: str):
    with pytest.raises(InvalidInput) as refused:
        check_new_password(password)
    assert refused.value.code == "password_too_common"
    assert refused.value.field == "password"
    assert "guess" in refused.value.message


@pytest.mark.parametrize("password", [
    "correct horse battery staple", "k7Gp2xQ9wLm", "shopowner2026", "blue mug on the shelf",
])
def test_an_uncommon_password_is_accepted_whatever_its_characters(password: str):
    assert check_new_password(password) == password.encode()


def test_length_rules_come_first():
    with pytest.raises(InvalidInput) as short:
        check_new_password("abc")
    assert short.value.code == "password_too_short"
    with pytest.raises(InvalidInput) as long:
        check_new_password("x" * 73)
    assert long.value.code == "password_too_long"


async def test_the_hasher_refuses_a_common_password(passwords: PasswordHasher):
    with pytest.raises(InvalidInput):
        await passwords.hash("password123")
    assert (await passwords.hash("blue mug on the shelf")).startswith("$2b$")
