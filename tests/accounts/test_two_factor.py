"""Two-factor sign-in (issue 43 point 2): an authenticator app enrolled with a first code, a
code after the password (a short-lived second-step token, not a session), each code and each
recovery code working once, turning it off with the password and a code, and an owner
requiring it of the organization. Codes are computed here with pyotp, as an app would."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qs, urlparse

import pyotp

from tests.accounts.test_team import NEW_PASSWORD, add_member, invite, token_of
from tests.support.app import TEST_PASSWORD, Fetch, Tenant, all_documents_text


async def login(fetch: Fetch, email: str, password: str = TEST_PASSWORD) -> Any:
    return await fetch("/auth/login", "POST", json_body={"email": email, "password": password})


def code_at(secret: str, steps_ahead: int = 0) -> str:
    """The app's code `steps_ahead` 30-second steps from now (a later step than one used)."""
    return pyotp.TOTP(secret).at(time.time() + 30 * steps_ahead)


async def enrol(fetch: Fetch, token: str) -> tuple[str, list[str]]:
    """Turn two-factor on for the token's user; the secret and the recovery codes."""
    setup = await fetch("/auth/two-factor/setup", "POST", token=token)
    assert setup.code == 201, setup
    secret = setup.json()["secret"]
    confirmed = await fetch("/auth/two-factor/confirm", "POST", token=token,
                            json_body={"code": code_at(secret)})
    assert confirmed.code == 200, confirmed
    return secret, confirmed.json()["recoveryCodes"]


async def second_step(fetch: Fetch, email: str, **proof: str) -> Any:
    asked = await login(fetch, email)
    assert asked.code == 200 and asked.json()["secondStep"] == "code", asked
    return await fetch("/auth/login/two-factor", "POST",
                       json_body={"token": asked.json()["secondStepToken"], **proof})


async def test_enrolment_shows_the_secret_once_keeps_it_sealed_and_needs_a_first_code(
        fetch: Fetch, tenant: Tenant, deps):
    setup = await fetch("/auth/two-factor/setup", "POST", token=tenant.token)
    assert setup.code == 201
    secret = setup.json()["secret"]
    uri = urlparse(setup.json()["otpauthUri"])
    assert uri.scheme == "otpauth" and uri.netloc == "totp"
    assert parse_qs(uri.query)["secret"] == [secret]
    assert parse_qs(uri.query)["issuer"] == ["Visitor Service"]
    # Sealed at rest: the database alone does not hold the secret.
    assert secret not in await all_documents_text(deps.store)

    wrong = await fetch("/auth/two-factor/confirm", "POST", token=tenant.token,
                        json_body={"code": "000000" if code_at(secret) != "000000" else "111111"})
    assert wrong.code == 401 and wrong.error_code == "invalid_code"
    status = (await fetch("/auth/two-factor", token=tenant.token)).json()
    assert status["enabled"] is False

    confirmed = await fetch("/auth/two-factor/confirm", "POST", token=tenant.token,
                            json_body={"code": code_at(secret)})
    assert confirmed.code == 200
    codes = confirmed.json()["recoveryCodes"]
    assert len(codes) == len(set(codes)) == 10
    dump = await all_documents_text(deps.store)
    assert secret not in dump and not any(code in dump for code in codes)
    status = (await fetch("/auth/two-factor", token=tenant.token)).json()
    assert status["enabled"] is True and status["recoveryCodesLeft"] == 10
    again = await fetch("/auth/two-factor/setup", "POST", token=tenant.token)
    assert again.code == 409 and again.error_code == "two_factor_on"
    export = (await fetch("/auth/me/export.json", token=tenant.token)).json()
    assert "account.two_factor_enabled" in [e["action"] for e in export["auditTrail"]]
    assert secret not in str(export)
    owner = next(u for u in export["users"] if u["email"] == tenant.email)
    assert owner["twoFactor"]["recoveryCodesLeft"] == 10


async def test_the_password_alone_gives_a_second_step_not_a_session_and_a_code_works_once(
        fetch: Fetch, tenant: Tenant):
    secret, _ = await enrol(fetch, tenant.token)
    asked = await login(fetch, tenant.email)
    assert asked.code == 200
    body = asked.json()
    assert body["secondStep"] == "code" and "accessToken" not in body
    assert "svc_refresh" not in asked.headers.get("Set-Cookie", "")
    # The second-step token opens nothing by itself.
    assert (await fetch("/auth/me", token=body["secondStepToken"])).code == 401
    assert (await fetch("/auth/refresh", "POST",
                        json_body={"refreshToken": body["secondStepToken"]})).code == 401

    wrong = await fetch("/auth/login/two-factor", "POST", json_body={
        "token": body["secondStepToken"], "code": "12345"})
    assert wrong.code == 401 and wrong.error_code == "invalid_code"
    # The enrolment used this step's code; the app's next one signs in.
    code = code_at(secret, 1)
    signed_in = await fetch("/auth/login/two-factor", "POST",
                            json_body={"token": body["secondStepToken"], "code": code})
    assert signed_in.code == 200, signed_in
    assert (await fetch("/auth/me", token=signed_in.json()["accessToken"])).code == 200

    # The same code, replayed within its window, is refused, and so is an older one.
    replayed = await second_step(fetch, tenant.email, code=code)
    assert replayed.code == 401 and replayed.error_code == "code_used"
    older = await second_step(fetch, tenant.email, code=code_at(secret))
    assert older.code == 401


async def test_a_forged_or_foreign_second_step_token_is_refused(fetch: Fetch, tenant: Tenant):
    secret, _ = await enrol(fetch, tenant.token)
    for token in (tenant.token, "not.a.token"):
        answer = await fetch("/auth/login/two-factor", "POST",
                             json_body={"token": token, "code": code_at(secret, 1)})
        assert answer.code == 401 and answer.error_code == "second_step_expired"


async def test_a_recovery_code_signs_in_once(fetch: Fetch, tenant: Tenant):
    _, codes = await enrol(fetch, tenant.token)
    first = await second_step(fetch, tenant.email, recoveryCode=codes[0].upper())
    assert first.code == 200, first
    again = await second_step(fetch, tenant.email, recoveryCode=codes[0])
    assert again.code == 401 and again.error_code == "invalid_code"
    status = (await fetch("/auth/two-factor", token=tenant.token)).json()
    assert status["recoveryCodesLeft"] == 9


async def test_wrong_codes_are_limited_per_user(fetch: Fetch, tenant: Tenant):
    secret, _ = await enrol(fetch, tenant.token)
    answers = [(await second_step(fetch, tenant.email, code="000000")).code for _ in range(5)]
    assert answers == [401] * 5 or code_at(secret) == "000000"
    limited = await second_step(fetch, tenant.email, code=code_at(secret, 1))
    assert limited.code == 429 and limited.error_code == "code_throttled"


async def test_turning_it_off_needs_the_password_and_a_code(fetch: Fetch, tenant: Tenant):
    secret, codes = await enrol(fetch, tenant.token)
    wrong = await fetch("/auth/two-factor/disable", "POST", token=tenant.token,
                        json_body={"password": "not it", "code": code_at(secret, 1)})
    assert wrong.code == 403 and wrong.error_code == "wrong_password"
    no_code = await fetch("/auth/two-factor/disable", "POST", token=tenant.token,
                          json_body={"password": TEST_PASSWORD, "code": "99999x"})
    assert no_code.code == 401
    off = await fetch("/auth/two-factor/disable", "POST", token=tenant.token,
                      json_body={"password": TEST_PASSWORD, "code": code_at(secret, 1)})
    assert off.code == 204
    direct = await login(fetch, tenant.email)
    assert direct.code == 200 and "accessToken" in direct.json()
    # The old recovery codes died with it.
    status = (await fetch("/auth/two-factor", token=tenant.token)).json()
    assert status == {**status, "enabled": False, "recoveryCodesLeft": 0}
    assert codes


async def test_an_owner_requires_it_and_a_member_enrols_at_the_next_sign_in(
        fetch: Fetch, tenant: Tenant):
    await add_member(fetch, tenant, "admin@example.com", "admin")
    admin = (await login(fetch, "admin@example.com", NEW_PASSWORD)).json()
    path = f"/api/v1/organizations/{tenant.organization_id}/two-factor"
    refused = await fetch(path, "PUT", token=admin["accessToken"], json_body={"required": True})
    assert refused.code == 403 and refused.error_code == "owner_required"
    assert (await fetch(path, "PUT", token=tenant.token,
                        json_body={"required": True})).code == 204
    status = (await fetch("/auth/two-factor", token=tenant.token)).json()
    assert status["organizations"] == [{"id": tenant.organization_id, "name": status[
        "organizations"][0]["name"], "required": True, "canChange": True}]

    # A session already open goes on; the next sign-in asks for an enrolment first.
    assert (await fetch("/auth/me", token=admin["accessToken"])).code == 200
    asked = await login(fetch, "admin@example.com", NEW_PASSWORD)
    assert asked.json()["secondStep"] == "enrol" and "accessToken" not in asked.json()
    token = asked.json()["secondStepToken"]
    # An enrolment token is not a code token.
    assert (await fetch("/auth/login/two-factor", "POST",
                        json_body={"token": token, "code": "123456"})).code == 401
    setup = await fetch("/auth/login/two-factor/setup", "POST", json_body={"token": token})
    assert setup.code == 201
    secret = setup.json()["secret"]
    done = await fetch("/auth/login/two-factor/confirm", "POST",
                       json_body={"token": token, "code": code_at(secret)})
    assert done.code == 200, done
    assert len(done.json()["recoveryCodes"]) == 10
    session = done.json()["accessToken"]
    assert (await fetch("/auth/me", token=session)).code == 200

    # While the organization requires it, it stays on.
    kept = await fetch("/auth/two-factor/disable", "POST", token=session, json_body={
        "password": NEW_PASSWORD, "code": code_at(secret, 1)})
    assert kept.code == 409 and kept.error_code == "two_factor_required"
    # A new member invited meanwhile enrols before getting a session.
    invited = await invite(fetch, tenant, "viewer@example.com", "viewer")
    accepted = await fetch("/auth/invitations/accept", "POST", json_body={
        "token": token_of(invited.json()["link"]), "password": NEW_PASSWORD})
    assert accepted.code == 200 and accepted.json()["secondStep"] == "enrol"
    assert "accessToken" not in accepted.json()

    assert (await fetch(path, "PUT", token=tenant.token,
                        json_body={"required": False})).code == 204
    owner = await login(fetch, tenant.email)
    assert "accessToken" in owner.json()


async def test_a_removed_members_second_factor_goes_with_them(fetch: Fetch, tenant: Tenant,
                                                              deps):
    from tests.accounts.test_team import member_id

    pair = await add_member(fetch, tenant, "leaving-2fa@example.com", "viewer")
    await enrol(fetch, pair["accessToken"])
    leaving = await member_id(fetch, tenant, "leaving-2fa@example.com")
    assert await deps.store.collection("two_factor").count_documents({"_id": leaving}) == 1
    removed = await fetch(f"/api/v1/organizations/{tenant.organization_id}/members/{leaving}",
                          "DELETE", token=tenant.token)
    assert removed.code == 204, removed
    assert await deps.store.collection("two_factor").count_documents({"_id": leaving}) == 0
