"""Signing in: login, refresh rotation with reuse detection, logout, throttling."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.app import TEST_PASSWORD, Fetch, Tenant


@pytest.fixture
def settings_env(settings_env: dict[str, str]) -> dict[str, str]:
    """Believe X-Forwarded-For from the test client, so tests can log in "from" addresses."""
    return {**settings_env, "TRUSTED_PROXIES": "127.0.0.0/8"}


async def _login(fetch: Fetch, email: str, password: str = TEST_PASSWORD, ip: str | None = None):
    headers = {"X-Forwarded-For": ip} if ip else None
    return await fetch("/auth/login", "POST", json_body={"email": email, "password": password},
                       headers=headers)


async def test_the_owner_logs_in_and_sees_themselves(fetch: Fetch, tenant: Tenant):
    me = await fetch("/auth/me", token=tenant.token)
    assert me.code == 200
    assert me.json()["email"] == tenant.email
    assert me.json()["organizations"][0]["role"] == "owner"


async def test_login_sets_an_httponly_strict_refresh_cookie(fetch: Fetch, tenant: Tenant):
    answer = await _login(fetch, tenant.email)
    cookie = answer.headers["Set-Cookie"]
    assert cookie.startswith("svc_refresh=")
    for flag in ("HttpOnly", "Secure", "SameSite=Strict", "Path=/auth"):
        assert flag in cookie


async def test_unknown_user_and_wrong_password_get_the_same_answer(fetch: Fetch, tenant: Tenant):
    wrong = await _login(fetch, tenant.email, "not the password")
    unknown = await _login(fetch, "nobody@example.com", "not the password")
    assert wrong.code == unknown.code == 401
    assert wrong.body == unknown.body


async def test_a_password_over_72_bytes_is_refused_with_a_clear_422(fetch: Fetch, tenant: Tenant):
    answer = await _login(fetch, tenant.email, "é" * 40)  # 80 bytes in UTF-8
    assert answer.code == 422
    assert answer.error_code == "password_too_long"


async def test_refresh_rotates_and_the_old_token_is_revoked_at_once(
        fetch: Fetch, tenant: Tenant, deps):
    first = await fetch("/auth/refresh", "POST", json_body={"refreshToken": tenant.refresh_token})
    assert first.code == 200
    new_pair = first.json()
    assert new_pair["refreshToken"] != tenant.refresh_token
    record = await deps.store.collection("refresh_tokens").find_one(
        {"_id": deps.auth.issuer.verify_refresh(tenant.refresh_token).token_id})
    assert record["revokedReason"] == "rotated"
    assert (await fetch("/auth/me", token=new_pair["accessToken"])).code == 200


async def test_reusing_a_rotated_token_after_the_grace_revokes_the_whole_family(
        fetch: Fetch, tenant: Tenant, deps, monkeypatch):
    monkeypatch.setattr(deps.auth, "_grace_seconds", 0)
    rotated = await fetch("/auth/refresh", "POST",
                          json_body={"refreshToken": tenant.refresh_token})
    assert rotated.code == 200
    await asyncio.sleep(1.1)
    reuse = await fetch("/auth/refresh", "POST", json_body={"refreshToken": tenant.refresh_token})
    assert reuse.code == 401
    # The child issued by the legitimate rotation is dead too, and so are access tokens.
    child = await fetch("/auth/refresh", "POST",
                        json_body={"refreshToken": rotated.json()["refreshToken"]})
    assert child.code == 401
    assert (await fetch("/auth/me", token=rotated.json()["accessToken"])).code == 401


async def test_two_tabs_refreshing_together_both_stay_signed_in(fetch: Fetch, tenant: Tenant):
    one, two = await asyncio.gather(
        fetch("/auth/refresh", "POST", json_body={"refreshToken": tenant.refresh_token}),
        fetch("/auth/refresh", "POST", json_body={"refreshToken": tenant.refresh_token}),
    )
    assert one.code == two.code == 200
    for answer in (one, two):
        again = await fetch("/auth/refresh", "POST",
                            json_body={"refreshToken": answer.json()["refreshToken"]})
        assert again.code == 200


async def test_refresh_works_from_the_cookie_alone(fetch: Fetch, tenant: Tenant):
    answer = await fetch("/auth/refresh", "POST",
                         headers={"Cookie": f"svc_refresh={tenant.refresh_token}"})
    assert answer.code == 200


async def test_logout_revokes_the_refresh_token_and_its_access_tokens(
        fetch: Fetch, tenant: Tenant):
    out = await fetch("/auth/logout", "POST", json_body={"refreshToken": tenant.refresh_token})
    assert out.code == 204
    assert (await fetch("/auth/refresh", "POST",
                        json_body={"refreshToken": tenant.refresh_token})).code == 401
    assert (await fetch("/auth/me", token=tenant.token)).code == 401


async def test_a_refresh_token_cannot_be_used_as_an_access_token(fetch: Fetch, tenant: Tenant):
    assert (await fetch("/auth/me", token=tenant.refresh_token)).code == 401


async def test_an_access_token_cannot_be_used_to_refresh(fetch: Fetch, tenant: Tenant):
    answer = await fetch("/auth/refresh", "POST", json_body={"refreshToken": tenant.token})
    assert answer.code == 401


async def test_failed_logins_from_one_address_throttle_that_address_not_the_owner(
        fetch: Fetch, tenant: Tenant, deps):
    # The owner has logged in from their usual network before.
    assert (await _login(fetch, tenant.email, ip="198.51.100.7")).code == 200
    attacker = "203.0.113.66"
    for _ in range(deps.settings.login_failures_per_account):
        await _login(fetch, tenant.email, "guess", ip=attacker)
    blocked = await _login(fetch, tenant.email, TEST_PASSWORD, ip=attacker)
    assert blocked.code == 429
    assert int(blocked.headers["Retry-After"]) > 0
    # Even the right password from the attacker's address is refused, but the owner's is not.
    owner = await _login(fetch, tenant.email, ip="198.51.100.8")
    assert owner.code == 200
