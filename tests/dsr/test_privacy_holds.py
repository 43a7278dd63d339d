"""The list of restricted and objecting visitors: what it shows, to whom, and how it changes."""

from __future__ import annotations

from datetime import datetime

from documents import accounts
from tests.support.app import TEST_PASSWORD, Fetch, Tenant


def _holds_path(tenant: Tenant) -> str:
    return f"/api/v1/sites/{tenant.site_id}/privacy-holds"


async def _visitor(fetch: Fetch, tenant: Tenant, visitor_id: str) -> None:
    """A visitor with a lead, so there is a name and an e-mail the list must not show."""
    headers = {"X-Service-Key": tenant.api_key}
    for path, body in (("/ingest/visitors", {"visitorId": visitor_id}),
                       ("/ingest/leads", {"visitorId": visitor_id, "name": f"Name of {visitor_id}",
                                          "email": f"{visitor_id}@example.com"})):
        answer = await fetch(path, "POST", headers=headers, json_body=body)
        assert answer.code == 200, answer


async def _switch(fetch: Fetch, tenant: Tenant, visitor_id: str, kind: str, on: bool) -> None:
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/{visitor_id}/{kind}", "PUT",
                         token=tenant.token, json_body={"on": on})
    assert answer.code == 200, answer


async def _holds(fetch: Fetch, tenant: Tenant) -> list[dict]:
    answer = await fetch(_holds_path(tenant), token=tenant.token)
    assert answer.code == 200, answer
    return answer.json()["items"]


async def test_restricted_and_objecting_visitors_are_listed_with_when_each_was_set(
        fetch: Fetch, tenant: Tenant):
    for visitor_id in ("anna", "bert", "carl", "dora"):
        await _visitor(fetch, tenant, visitor_id)
    await _switch(fetch, tenant, "bert", "restriction", True)
    await _switch(fetch, tenant, "carl", "objection", True)
    await _switch(fetch, tenant, "dora", "restriction", True)
    await _switch(fetch, tenant, "dora", "objection", True)

    answer = await fetch(_holds_path(tenant), token=tenant.token)
    holds = answer.json()["items"]
    # Newest hold first; anna, who is neither, is not listed.
    assert [(h["visitorId"], h["restricted"], h["objected"]) for h in holds] == [
        ("dora", True, True), ("carl", False, True), ("bert", True, False)]
    for hold in holds:
        assert set(hold) == {"visitorId", "restricted", "restrictedAt", "objected", "objectedAt"}
        for flag in ("restricted", "objected"):
            at = hold[f"{flag}At"]
            assert (at is not None) == hold[flag], hold
            if at is not None:
                assert datetime.fromisoformat(at).tzinfo is not None
    dora = holds[0]
    assert dora["objectedAt"] >= dora["restrictedAt"]
    # Only ids, flags and times: nothing from the profile or the leads.
    assert "Name of" not in answer.body.decode() and "@example.com" not in answer.body.decode()


async def test_a_lifted_hold_leaves_the_list_and_a_repeated_one_keeps_its_first_time(
        fetch: Fetch, tenant: Tenant, deps):
    await _visitor(fetch, tenant, "bert")
    await _switch(fetch, tenant, "bert", "restriction", True)
    [first] = await _holds(fetch, tenant)
    await _switch(fetch, tenant, "bert", "restriction", True)
    assert await _holds(fetch, tenant) == [first]

    await _switch(fetch, tenant, "bert", "restriction", False)
    assert await _holds(fetch, tenant) == []
    profile = await deps.store.collection("visitors").find_one({"visitorId": "bert"})
    assert profile["restricted"] is False and "restrictedAt" not in profile
    # Back in the dashboard's visitors list.
    listed = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors", token=tenant.token)
    assert [v["visitorId"] for v in listed.json()["items"]] == ["bert"]


async def test_a_hold_set_before_times_were_recorded_is_listed_without_a_time(
        fetch: Fetch, tenant: Tenant, deps):
    await _visitor(fetch, tenant, "bert")
    await deps.store.collection("visitors").update_one({"visitorId": "bert"},
                                                       {"$set": {"restricted": True}})
    assert await _holds(fetch, tenant) == [{"visitorId": "bert", "restricted": True,
                                            "restrictedAt": None, "objected": False,
                                            "objectedAt": None}]


async def test_a_viewer_is_refused_and_another_organization_sees_no_such_site(
        fetch: Fetch, tenant: Tenant, make_tenant, deps, test_password_hash: str):
    await _visitor(fetch, tenant, "bert")
    await _switch(fetch, tenant, "bert", "restriction", True)
    await accounts.add_member(deps.store, organization_id=tenant.organization_id,
                              email="viewer@example.com", password_hash=test_password_hash,
                              display_name="Viewer", role="viewer")
    viewer = (await fetch("/auth/login", "POST", json_body={
        "email": "viewer@example.com", "password": TEST_PASSWORD})).json()["accessToken"]
    refused = await fetch(_holds_path(tenant), token=viewer)
    assert (refused.code, refused.error_code) == (403, "role_required")

    intruder = await make_tenant("intruder")
    hidden = await fetch(_holds_path(tenant), token=intruder.token)
    assert hidden.code == 404
    assert "bert" not in hidden.body.decode()
    # The intruder's own site has no holds: one organization's holds never leak into another's.
    own = await fetch(f"/api/v1/sites/{intruder.site_id}/privacy-holds", token=intruder.token)
    assert own.json() == {"items": []}
