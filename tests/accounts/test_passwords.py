"""Passwords after sign-up (issue 43 point 2): a change needs the current one and signs other
sessions out; a forgotten one is reset by a single-use link valid 30 minutes, asked for with the
same answer for any address, limited per address and per client; without a mail server an owner
gets a member's link and the operator's CLI anybody's."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.accounts.test_team import NEW_PASSWORD, add_member, member_id
from tests.support.app import TEST_PASSWORD, Fetch, Tenant, all_documents_text
from tests.support.mail import Mailbox, link_in, running_smtp_server

CHANGED_PASSWORD = "seven owls argue about jam"
#: The `visitor-service` console script installed beside this Python.
CONSOLE_SCRIPT = Path(sys.executable).with_name("visitor-service")


@pytest.fixture
def smtp_server() -> Iterator[tuple[Mailbox, int]]:
    with running_smtp_server() as server_:
        yield server_


@pytest.fixture
def settings_env(settings_env: dict[str, str], request: pytest.FixtureRequest
                 ) -> dict[str, str]:
    """X-Forwarded-For believed (requests "from" several clients), and SMTP_URL at the local
    SMTP server when the test asks for one."""
    env = {**settings_env, "TRUSTED_PROXIES": "127.0.0.0/8"}
    if "smtp_server" in request.fixturenames:
        _, port = request.getfixturevalue("smtp_server")
        env["SMTP_URL"] = f"smtp+plain://127.0.0.1:{port}"
    if "hung_smtp" in request.fixturenames:
        env["SMTP_URL"] = f"smtp+plain://127.0.0.1:{request.getfixturevalue('hung_smtp').port}"
        env["NOTIFY_MAX_ATTEMPTS"] = "1"  # released, it fails once and is done
    return env


class HungSmtp:
    """A mail server that takes connections and says nothing until `release`."""

    def __init__(self) -> None:
        self.released = asyncio.Event()
        self.connections = 0
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> HungSmtp:
        async def hold(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            await self.released.wait()
            writer.close()

        self.server = await asyncio.start_server(hold, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        self.released.set()
        assert self.server is not None
        self.server.close()


@pytest.fixture
async def hung_smtp() -> Any:
    server = await HungSmtp().start()
    yield server
    await server.close()


async def login(fetch: Fetch, email: str, password: str) -> Any:
    return await fetch("/auth/login", "POST", json_body={"email": email, "password": password})


async def ask_reset(fetch: Fetch, email: str, client: str = "198.51.100.1") -> Any:
    return await fetch("/auth/password-reset/request", "POST", json_body={"email": email},
                       headers={"X-Forwarded-For": client})


async def reset(fetch: Fetch, link: str, password: str = CHANGED_PASSWORD) -> Any:
    path, _, token = link.partition("#")
    assert path.endswith("/app/reset") and token
    return await fetch("/auth/password-reset/confirm", "POST",
                       json_body={"token": token, "password": password})


async def still_signed_in(fetch: Fetch, pair: dict[str, Any]) -> bool:
    me = await fetch("/auth/me", token=pair["accessToken"])
    refreshed = await fetch("/auth/refresh", "POST",
                            json_body={"refreshToken": pair["refreshToken"]})
    assert (me.code == 200) == (refreshed.code == 200), (me, refreshed)
    return me.code == 200


async def test_a_password_change_needs_the_current_one_and_signs_other_sessions_out(
        fetch: Fetch, tenant: Tenant):
    other = (await login(fetch, tenant.email, TEST_PASSWORD)).json()
    wrong = await fetch("/auth/password", "POST", token=tenant.token, json_body={
        "currentPassword": "not it", "newPassword": CHANGED_PASSWORD})
    assert wrong.code == 403 and wrong.error_code == "wrong_password"
    weak = await fetch("/auth/password", "POST", token=tenant.token, json_body={
        "currentPassword": TEST_PASSWORD, "newPassword": "password123"})
    assert weak.code == 422 and weak.error_code == "password_too_common"

    changed = await fetch("/auth/password", "POST", token=tenant.token, json_body={
        "currentPassword": TEST_PASSWORD, "newPassword": CHANGED_PASSWORD})
    assert changed.code == 204
    assert not await still_signed_in(fetch, other)
    assert (await fetch("/auth/me", token=tenant.token)).code == 200
    assert (await login(fetch, tenant.email, TEST_PASSWORD)).code == 401
    assert (await login(fetch, tenant.email, CHANGED_PASSWORD)).code == 200
    export = (await fetch("/auth/me/export.json", token=tenant.token)).json()
    assert "account.password_changed" in [e["action"] for e in export["auditTrail"]]


async def test_asking_for_a_reset_answers_the_same_for_a_known_and_an_unknown_address(
        fetch: Fetch, tenant: Tenant, deps):
    known = await ask_reset(fetch, tenant.email)
    unknown = await ask_reset(fetch, "nobody-here@example.com")
    assert known.code == unknown.code == 202
    assert known.body == unknown.body
    # Without a mail server no link is made at all.
    assert await deps.store.collection("account_links").count_documents({}) == 0


async def test_a_known_address_is_answered_without_waiting_for_the_mail(
        fetch: Fetch, tenant: Tenant, deps, hung_smtp: HungSmtp):
    # The mail server holds every connection: an answer that waited for the mail would come
    # only once an attempt had ended (by its timeout), logged. It comes with the delivery
    # still unattempted, as the unknown address's does (no telling who has an account by how
    # long the answer takes).
    known = await ask_reset(fetch, tenant.email)
    [delivery] = await deps.store.collection("account_mail_deliveries").find({}).to_list(None)
    assert (delivery["status"], delivery["attempts"]) == ("pending", 0)
    unknown = await ask_reset(fetch, "nobody-here@example.com")
    assert (known.code, known.body) == (unknown.code, unknown.body)
    assert known.code == 202
    for _ in range(100):  # the mail's delivery started beside the answer, and waits
        if hung_smtp.connections:
            break
        await asyncio.sleep(0.02)
    assert hung_smtp.connections == 1 and not hung_smtp.released.is_set()
    hung_smtp.released.set()  # the delivery fails now, and is logged so


async def test_reset_requests_are_limited_per_address_and_per_client(fetch: Fetch,
                                                                     tenant: Tenant):
    for client in ("198.51.100.1", "198.51.100.2", "198.51.100.3"):
        assert (await ask_reset(fetch, tenant.email, client)).code == 202
    limited = await ask_reset(fetch, tenant.email, "198.51.100.4")
    assert limited.code == 429 and limited.error_code == "reset_throttled"
    assert int(limited.headers["Retry-After"]) > 0
    # An unknown address is limited alike, so the limit tells nothing either.
    for client in ("198.51.100.1", "198.51.100.2", "198.51.100.3"):
        assert (await ask_reset(fetch, "ghost@example.com", client)).code == 202
    assert (await ask_reset(fetch, "ghost@example.com", "198.51.100.4")).code == 429

    # One client asking for many addresses is stopped too.
    answers = [(await ask_reset(fetch, f"user{n}@example.com", "203.0.113.9")).code
               for n in range(11)]
    assert answers == [202] * 10 + [429]


async def test_a_mailed_reset_link_works_once_and_signs_every_session_out(
        fetch: Fetch, tenant: Tenant, deps, smtp_server: tuple[Mailbox, int]):
    mailbox, _ = smtp_server
    assert (await ask_reset(fetch, tenant.email)).code == 202
    assert (await ask_reset(fetch, "nobody-here@example.com")).code == 202
    message = await mailbox.wait_for(tenant.email)
    link = link_in(message)
    assert link.partition("#")[2] not in await all_documents_text(deps.store)

    assert (await reset(fetch, link, "password123")).code == 422  # the link is still unused
    assert (await reset(fetch, link)).code == 204
    assert not await still_signed_in(fetch, {"accessToken": tenant.token,
                                             "refreshToken": tenant.refresh_token})
    assert (await login(fetch, tenant.email, CHANGED_PASSWORD)).code == 200
    again = await reset(fetch, link, "another fine password here")
    assert again.code == 404 and again.error_code == "invalid_link"
    await asyncio.sleep(0.2)
    assert [m["To"] for m in mailbox.messages] == [tenant.email]


async def test_an_expired_reset_link_is_refused(fetch: Fetch, tenant: Tenant, deps,
                                                smtp_server: tuple[Mailbox, int]):
    mailbox, _ = smtp_server
    await ask_reset(fetch, tenant.email)
    link = link_in(await mailbox.wait_for(tenant.email))
    await deps.store.collection("account_links").update_many(
        {}, {"$set": {"expiresAt": datetime.now(UTC) - timedelta(seconds=1)}})
    late = await reset(fetch, link)
    assert late.code == 404 and late.error_code == "invalid_link"
    assert (await login(fetch, tenant.email, TEST_PASSWORD)).code == 200


async def test_without_mail_an_owner_gets_a_members_reset_link_and_an_admin_does_not(
        fetch: Fetch, tenant: Tenant):
    admin = await add_member(fetch, tenant, "forgetful@example.com", "admin")
    forgetful = await member_id(fetch, tenant, "forgetful@example.com")
    path = f"/api/v1/organizations/{tenant.organization_id}/members/{forgetful}/password-reset"
    refused = await fetch(f"/api/v1/organizations/{tenant.organization_id}/members/"
                          f"{tenant.user_id}/password-reset", "POST", token=admin["accessToken"])
    assert refused.code == 403
    issued = await fetch(path, "POST", token=tenant.token)
    assert issued.code == 201 and issued.json()["emailed"] is False
    assert (await reset(fetch, issued.json()["link"])).code == 204
    assert not await still_signed_in(fetch, admin)
    assert (await login(fetch, "forgetful@example.com", NEW_PASSWORD)).code == 401
    assert (await login(fetch, "forgetful@example.com", CHANGED_PASSWORD)).code == 200


async def test_the_operator_cli_prints_a_reset_link_for_a_locked_out_owner(
        fetch: Fetch, tenant: Tenant, deps, settings_env: dict[str, str]):
    # The console script as an operator runs it, in a process of its own.
    command = await asyncio.create_subprocess_exec(
        str(CONSOLE_SCRIPT), "reset-password", "--email", tenant.email,
        env={**os.environ, **settings_env, "LOG_LEVEL": "WARNING"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(command.communicate(), 60)
    if deps.store.embedded:
        # The embedded store lives only inside a running server: the command says so.
        assert command.returncode == 2 and b"MONGODB_URI" in err
        return
    assert command.returncode == 0, err
    link = json.loads(out.decode().strip().splitlines()[-1])["link"]
    assert (await reset(fetch, link)).code == 204
    assert (await login(fetch, tenant.email, CHANGED_PASSWORD)).code == 200
