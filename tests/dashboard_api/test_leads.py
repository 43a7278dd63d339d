"""Leads in the dashboard data API: the list and rectification (GDPR Art. 16)."""

from __future__ import annotations

from tests.support.app import Fetch, Tenant, all_documents_text


def _leads(tenant: Tenant, rest: str = "") -> str:
    return f"/api/v1/sites/{tenant.site_id}/leads{rest}"


async def _two_leads(ingest) -> None:
    await ingest("leads", {"visitorId": "v-1", "leadId": "lead-old", "email": "old@example.com",
                           "name": "Old Name", "occurredAt": "2026-01-01T10:00:00Z",
                           "fields": {"company": "Acme"}})
    await ingest("leads", {"visitorId": "v-1", "leadId": "lead-new", "email": "ada@example.com",
                           "name": "Ada Byron", "phone": "+44 1", "fields": {"company": "Acme"},
                           "occurredAt": "2026-01-02T10:00:00Z"})


async def test_leads_are_listed_newest_first_with_a_cursor(fetch: Fetch, tenant: Tenant, ingest,
                                                           viewer_token: str):
    await _two_leads(ingest)
    first = (await fetch(_leads(tenant, "?limit=1"), token=viewer_token)).json()
    assert [lead["id"] for lead in first["items"]] == ["lead-new"]
    second = (await fetch(_leads(tenant, f"?limit=1&cursor={first['nextCursor']}"),
                          token=viewer_token)).json()
    assert [lead["id"] for lead in second["items"]] == ["lead-old"]
    assert second["nextCursor"] is None


async def test_rectifying_a_lead_changes_it_and_audits_field_names_only(
        fetch: Fetch, tenant: Tenant, deps, ingest):
    await _two_leads(ingest)
    answer = await fetch(_leads(tenant, "/lead-new"), "PATCH", token=tenant.token, json_body={
        "name": "Ada Lovelace", "phone": "+44 2", "fields": {"company": "Analytical Engines",
                                                             "note": None}})
    assert answer.code == 200, answer
    lead = answer.json()
    assert (lead["name"], lead["phone"]) == ("Ada Lovelace", "+44 2")
    assert lead["fields"] == {"company": "Analytical Engines"}
    assert lead["changedFields"] == ["name", "phone", "fields.company"]
    entry = await deps.store.collection("audit_log").find_one({"action": "lead.rectified"})
    assert entry["details"]["fields"] == ["name", "phone", "fields.company"]
    audit_text = repr(await deps.store.collection("audit_log").find({}).to_list(None))
    for value in ("Ada Lovelace", "+44 2", "Analytical Engines"):
        assert value not in audit_text
    stored = await deps.store.collection("leads").find_one({"_id": "lead-new"})
    assert stored["name"] == "Ada Lovelace" and stored["rectifiedAt"]


async def test_rectification_is_logged_as_a_completed_data_subject_request(
        fetch: Fetch, tenant: Tenant, deps, ingest):
    await _two_leads(ingest)
    answer = await fetch(_leads(tenant, "/lead-old"), "PATCH", token=tenant.token,
                         json_body={"email": "Fixed@Example.com"})
    assert answer.code == 200, answer
    log = (await fetch("/api/v1/requests", token=tenant.token)).json()
    assert [(r["type"], r["status"]) for r in log] == [("rectification", "completed")]
    assert log[0]["id"] == answer.json()["requestId"] and log[0]["completedAt"]
    assert "fixed@example.com" not in await _request_log_text(deps)
    profile = await deps.store.collection("visitors").find_one(
        {"_id": f"{tenant.site_id}:v-1"})
    assert sorted(profile["emails"]) == ["ada@example.com", "fixed@example.com"]


async def _request_log_text(deps) -> str:
    return repr(await deps.store.collection("dsr_requests").find({}).to_list(None))


async def test_renaming_the_latest_lead_renames_the_visitor_but_an_older_one_does_not(
        fetch: Fetch, tenant: Tenant, deps, ingest):
    await _two_leads(ingest)

    async def display_name() -> str:
        answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/v-1", token=tenant.token)
        return answer.json()["displayName"]

    assert await display_name() == "Ada Byron"
    await fetch(_leads(tenant, "/lead-old"), "PATCH", token=tenant.token,
                json_body={"name": "Someone Else"})
    assert await display_name() == "Ada Byron"
    await fetch(_leads(tenant, "/lead-new"), "PATCH", token=tenant.token,
                json_body={"name": "Ada Lovelace"})
    assert await display_name() == "Ada Lovelace"


async def test_a_viewer_cannot_rectify_and_an_unknown_lead_is_not_found(
        fetch: Fetch, tenant: Tenant, deps, ingest, viewer_token: str):
    await _two_leads(ingest)
    denied = await fetch(_leads(tenant, "/lead-new"), "PATCH", token=viewer_token,
                         json_body={"name": "Viewer Was Here"})
    assert denied.code == 403
    assert "Viewer Was Here" not in await all_documents_text(deps.store)
    missing = await fetch(_leads(tenant, "/no-such-lead"), "PATCH", token=tenant.token,
                          json_body={"name": "x"})
    assert missing.code == 404
    empty = await fetch(_leads(tenant, "/lead-new"), "PATCH", token=tenant.token, json_body={})
    assert empty.code == 422
