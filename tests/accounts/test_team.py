"""The team of an organization (issue 43 point 1): invitations by a single-use link, roles, the
last owner kept, removal that ends sessions at once, every change audited and exported."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support.app import Fetch, Tenant, all_documents_text
from tests.support.mail import Mailbox, link_in, running_smtp_server

NEW_PASSWORD = "a kettle sings on tuesdays"


def _team(organization_id: str, path: str = "") -> str:
    return f"/api/v1/organizations/{organization_id}{path}"


async def invite(fetch: Fetch, tenant: Tenant, email: str, role: str,
                 token: str | None = None) -> Any:
    return await fetch(_team(tenant.organization_id, "/invitations"), "POST",
                       token=token or tenant.token, json_body={"email": email, "role": role})


def token_of(link: str) -> str:
    """The token a link carries in its fragment (never sent to a server in a URL)."""
    path, _, token = link.partition("#")
    assert path.endswith("/app/invite") and token
    return token


async def accept(fetch: Fetch, token: str, password: str = NEW_PASSWORD) -> Any:
    return await fetch("/auth/invitations/accept", "POST",
                       json_body={"token": token, "password": password,
                                  "displayName": "New member"})


async def add_member(fetch: Fetch, tenant: Tenant, email: str, role: str) -> dict[str, Any]:
    """Invite and accept; the new member's token pair."""
    invited = await invite(fetch, tenant, email, role)
    assert invited.code == 201, invited
    accepted = await accept(fetch, token_of(invited.json()["link"]))
    assert accepted.code == 200, accepted
    return accepted.json()


async def member_id(fetch: Fetch, tenant: Tenant, email: str) -> str:
    team = (await fetch(_team(tenant.organization_id, "/team"), token=tenant.token)).json()
    return next(m["userId"] for m in team["members"] if m["email"] == email)


async def test_an_owner_invites_a_viewer_who_sets_a_password_and_appears_with_a_last_sign_in(
        fetch: Fetch, tenant: Tenant, deps):
    invited = await invite(fetch, tenant, "Colleague@Example.com", "viewer")
    assert invited.code == 201, invited
    answer = invited.json()
    assert answer["emailed"] is False
    token = token_of(answer["link"])
    # Only the token's digest is stored; the link opens nothing from the database alone.
    assert token not in await all_documents_text(deps.store)

    details = await fetch("/auth/invitations/details", "POST", json_body={"token": token})
    assert details.json()["email"] == "colleague@example.com"
    assert details.json()["role"] == "viewer"
    assert details.json()["organizationName"] == "shop org"

    pair = (await accept(fetch, token)).json()
    me = (await fetch("/auth/me", token=pair["accessToken"])).json()
    assert me["organizations"] == [{"id": tenant.organization_id, "name": "shop org",
                                    "role": "viewer"}]
    # The password is the one chosen: a normal sign-in works with it.
    login = await fetch("/auth/login", "POST",
                        json_body={"email": "colleague@example.com", "password": NEW_PASSWORD})
    assert login.code == 200

    team = (await fetch(_team(tenant.organization_id, "/team"), token=tenant.token)).json()
    assert team["invitations"] == []
    new = next(m for m in team["members"] if m["email"] == "colleague@example.com")
    assert new["role"] == "viewer" and new["lastSignInAt"] is not None
    # A viewer sees the team too, but may not change it.
    assert (await fetch(_team(tenant.organization_id, "/team"),
                        token=pair["accessToken"])).code == 200
    refused = await invite(fetch, tenant, "other@example.com", "viewer", pair["accessToken"])
    assert refused.code == 403


async def test_a_used_link_and_an_expired_link_are_refused(fetch: Fetch, tenant: Tenant, deps):
    used = token_of((await invite(fetch, tenant, "first@example.com", "viewer")).json()["link"])
    assert (await accept(fetch, used)).code == 200
    again = await accept(fetch, used)
    assert again.code == 404 and again.error_code == "invalid_link"

    expired = token_of((await invite(fetch, tenant, "late@example.com", "admin")).json()["link"])
    await deps.store.collection("account_links").update_many(
        {"email": "late@example.com"},
        {"$set": {"expiresAt": datetime.now(UTC) - timedelta(seconds=1)}})
    late = await accept(fetch, expired)
    assert late.code == 404 and late.error_code == "invalid_link"
    details = await fetch("/auth/invitations/details", "POST", json_body={"token": expired})
    assert details.code == 404
    unknown = await accept(fetch, "not-a-token")
    assert unknown.code == 404 and unknown.body == late.body


async def test_a_weak_password_is_refused_and_leaves_the_link_unused(fetch: Fetch,
                                                                     tenant: Tenant):
    token = token_of((await invite(fetch, tenant, "weak@example.com", "viewer")).json()["link"])
    weak = await accept(fetch, token, "password123")
    assert weak.code == 422 and weak.error_code == "password_too_common"
    assert (await accept(fetch, token)).code == 200


async def test_a_new_invitation_of_the_same_address_replaces_the_old_and_a_revoked_one_dies(
        fetch: Fetch, tenant: Tenant):
    first = token_of((await invite(fetch, tenant, "twice@example.com", "viewer")).json()["link"])
    second = await invite(fetch, tenant, "twice@example.com", "admin")
    assert (await accept(fetch, first)).code == 404
    team = (await fetch(_team(tenant.organization_id, "/team"), token=tenant.token)).json()
    assert [(i["email"], i["role"]) for i in team["invitations"]] == [
        ("twice@example.com", "admin")]
    revoked = await fetch(_team(tenant.organization_id,
                                f"/invitations/{second.json()['invitation']['id']}"),
                          "DELETE", token=tenant.token)
    assert revoked.code == 204
    assert (await accept(fetch, token_of(second.json()["link"]))).code == 404


async def test_roles_that_may_not_be_given_are_refused(fetch: Fetch, tenant: Tenant):
    admin = await add_member(fetch, tenant, "admin@example.com", "admin")
    # An admin invites admins and viewers, never owners.
    assert (await invite(fetch, tenant, "v@example.com", "viewer",
                         admin["accessToken"])).code == 201
    as_owner = await invite(fetch, tenant, "o@example.com", "owner", admin["accessToken"])
    assert as_owner.code == 403 and as_owner.error_code == "owner_required"
    assert (await invite(fetch, tenant, "x@example.com", "superuser")).code == 422
    # Nor may an admin demote or remove the owner.
    owner_path = _team(tenant.organization_id, f"/members/{tenant.user_id}")
    assert (await fetch(owner_path, "PATCH", token=admin["accessToken"],
                        json_body={"role": "viewer"})).code == 403
    assert (await fetch(owner_path, "DELETE", token=admin["accessToken"])).code == 403
    # An address that already has an account is not invited again.
    taken = await invite(fetch, tenant, tenant.email, "viewer")
    assert taken.code == 409 and taken.error_code == "email_taken"


async def test_the_last_owner_can_be_neither_demoted_nor_removed(fetch: Fetch, tenant: Tenant):
    owner_path = _team(tenant.organization_id, f"/members/{tenant.user_id}")
    demoted = await fetch(owner_path, "PATCH", token=tenant.token, json_body={"role": "admin"})
    assert demoted.code == 409 and demoted.error_code == "last_owner"
    removed = await fetch(owner_path, "DELETE", token=tenant.token)
    assert removed.code == 409 and removed.error_code == "last_owner"
    me = (await fetch("/auth/me", token=tenant.token)).json()
    assert me["organizations"][0]["role"] == "owner"

    # With a second owner, the first may step down.
    await add_member(fetch, tenant, "second-owner@example.com", "owner")
    assert (await fetch(owner_path, "PATCH", token=tenant.token,
                        json_body={"role": "admin"})).code == 204
    me = (await fetch("/auth/me", token=tenant.token)).json()
    assert me["organizations"][0]["role"] == "admin"


async def test_a_removed_member_is_signed_out_at_once(fetch: Fetch, tenant: Tenant):
    pair = await add_member(fetch, tenant, "leaving@example.com", "admin")
    # A second session of theirs, from a normal sign-in.
    login = (await fetch("/auth/login", "POST", json_body={
        "email": "leaving@example.com", "password": NEW_PASSWORD})).json()
    leaving = await member_id(fetch, tenant, "leaving@example.com")
    removed = await fetch(_team(tenant.organization_id, f"/members/{leaving}"), "DELETE",
                          token=tenant.token)
    assert removed.code == 204
    for session in (pair, login):
        assert (await fetch("/auth/refresh", "POST",
                            json_body={"refreshToken": session["refreshToken"]})).code == 401
        assert (await fetch("/auth/me", token=session["accessToken"])).code == 401
    assert (await fetch("/auth/login", "POST", json_body={
        "email": "leaving@example.com", "password": NEW_PASSWORD})).code == 401
    team = (await fetch(_team(tenant.organization_id, "/team"), token=tenant.token)).json()
    assert "leaving@example.com" not in [m["email"] for m in team["members"]]


async def test_every_team_change_is_audited_and_in_the_account_export(fetch: Fetch,
                                                                       tenant: Tenant):
    await add_member(fetch, tenant, "audited@example.com", "viewer")
    audited = await member_id(fetch, tenant, "audited@example.com")
    path = _team(tenant.organization_id, f"/members/{audited}")
    assert (await fetch(path, "PATCH", token=tenant.token,
                        json_body={"role": "admin"})).code == 204
    assert (await fetch(path, "DELETE", token=tenant.token)).code == 204

    export = (await fetch("/auth/me/export.json", token=tenant.token)).json()
    actions = [entry["action"] for entry in export["auditTrail"]]
    for action in ("team.member_invited", "team.invitation_accepted", "team.role_changed",
                   "team.member_removed"):
        assert action in actions, actions
    changed = next(e for e in export["auditTrail"] if e["action"] == "team.role_changed")
    assert changed["details"] == {"userId": audited, "from": "viewer", "to": "admin"}
    assert [(i["email"], i["role"], i["usedAt"] is not None)
            for i in export["invitations"]] == [("audited@example.com", "viewer", True)]
    assert "tokenDigest" not in repr(export)


async def test_another_organizations_owner_sees_and_changes_nothing(fetch: Fetch, make_tenant):
    victim = await make_tenant("victim")
    intruder = await make_tenant("intruder")
    for method, path, body in (
            ("GET", "/team", None),
            ("POST", "/invitations", {"email": "spy@example.com", "role": "owner"}),
            ("PATCH", f"/members/{victim.user_id}", {"role": "viewer"}),
            ("DELETE", f"/members/{victim.user_id}", None)):
        answer = await fetch(_team(victim.organization_id, path), method,
                             token=intruder.token, json_body=body)
        assert answer.code == 404, (method, path, answer)


@pytest.fixture
def smtp_server() -> Iterator[tuple[Mailbox, int]]:
    with running_smtp_server() as server:
        yield server


@pytest.fixture
def settings_env(settings_env: dict[str, str], request: pytest.FixtureRequest
                 ) -> dict[str, str]:
    """SMTP_URL at the local SMTP server when the test asks for one."""
    if "smtp_server" not in request.fixturenames:
        return settings_env
    _, port = request.getfixturevalue("smtp_server")
    return {**settings_env, "SMTP_URL": f"smtp+plain://127.0.0.1:{port}?from=team@service.example"}


async def test_with_a_mail_server_the_invitation_is_mailed_and_the_link_not_shown(
        fetch: Fetch, tenant: Tenant, deps, smtp_server: tuple[Mailbox, int]):
    mailbox, _ = smtp_server
    invited = await invite(fetch, tenant, "mailed@example.com", "admin")
    assert invited.code == 201
    assert invited.json()["emailed"] is True and "link" not in invited.json()
    message = await mailbox.wait_for("mailed@example.com")
    assert message["From"] == "team@service.example"
    assert "shop org" in message["Subject"]
    assert (await accept(fetch, token_of(link_in(message)))).code == 200
    delivery = await deps.store.collection("account_mail_deliveries").find_one({})
    assert delivery["status"] == "sent" and delivery["kind"] == "invitation"
    # The delivery log keeps neither the address nor the link.
    assert "mailed@example.com" not in repr(delivery)
