"""Errors in the dashboard data API: list, detail and audited status changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from documents import error_records
from tests.support.app import Fetch, Tenant

START = datetime(2026, 3, 1, 12, tzinfo=UTC)


async def _count_error(store, site_id: str, n: int, *, visitor_id: str = "v-1") -> str:
    occurrence = error_records.Occurrence(
        job_id=f"job-{n}", site_id=site_id, fingerprint=f"fp-{n}", type="TypeError",
        message=f"fault {n}", source="javascript", occurred_at=START + timedelta(hours=n),
        visitor_id=visitor_id, session_id="s-1", wp_user_id=None, ip_address=None,
        context={"release": "1.0"}, stack=f"at f{n}.js:1:1")
    await error_records.record_occurrence(store, occurrence)
    counted = await error_records.count_occurrence(store, occurrence,
                                                   START + timedelta(hours=n))
    return counted.error["_id"]


def _errors(tenant: Tenant, rest: str = "") -> str:
    return f"/api/v1/sites/{tenant.site_id}/errors{rest}"


async def test_errors_are_listed_by_last_seen_and_filtered_by_status(
        fetch: Fetch, tenant: Tenant, deps, viewer_token: str):
    ids = [await _count_error(deps.store, tenant.site_id, n) for n in range(3)]
    resolve = await fetch(_errors(tenant, f"/{ids[1]}"), "PATCH", token=tenant.token,
                          json_body={"status": "resolved"})
    assert resolve.code == 200, resolve
    everything = (await fetch(_errors(tenant, "?limit=2"), token=viewer_token)).json()
    assert [e["id"] for e in everything["items"]] == [ids[2], ids[1]]
    rest = (await fetch(_errors(tenant, f"?limit=2&cursor={everything['nextCursor']}"),
                        token=viewer_token)).json()
    assert [e["id"] for e in rest["items"]] == [ids[0]] and rest["nextCursor"] is None
    open_only = (await fetch(_errors(tenant, "?status=open"), token=viewer_token)).json()
    assert [e["id"] for e in open_only["items"]] == [ids[2], ids[0]]
    assert (await fetch(_errors(tenant, "?status=closed"), token=viewer_token)).code == 422


async def test_the_detail_has_counts_status_stack_and_context(fetch: Fetch, tenant: Tenant,
                                                              deps):
    error_id = await _count_error(deps.store, tenant.site_id, 4)
    detail = (await fetch(_errors(tenant, f"/{error_id}"), token=tenant.token)).json()
    assert detail["occurrenceCount"] == 1 and detail["status"] == "open"
    assert (detail["type"], detail["message"]) == ("TypeError", "fault 4")
    assert detail["lastStack"] == "at f4.js:1:1" and detail["context"] == {"release": "1.0"}
    assert detail["firstSeen"].startswith("2026-03-01T16:00:00")


async def test_a_status_change_is_audited_with_from_and_to(fetch: Fetch, tenant: Tenant, deps):
    error_id = await _count_error(deps.store, tenant.site_id, 0)
    for status in ("ignored", "open"):
        answer = await fetch(_errors(tenant, f"/{error_id}"), "PATCH", token=tenant.token,
                             json_body={"status": status})
        assert answer.code == 200 and answer.json()["status"] == status
    entries = await deps.store.collection("audit_log").find(
        {"action": "error.status_changed"}).sort("at", 1).to_list(None)
    assert [(e["details"]["from"], e["details"]["to"]) for e in entries] == [
        ("open", "ignored"), ("ignored", "open")]
    assert entries[0]["actorUserId"] == tenant.user_id


async def test_a_viewer_may_read_errors_but_not_change_their_status(
        fetch: Fetch, tenant: Tenant, deps, viewer_token: str):
    error_id = await _count_error(deps.store, tenant.site_id, 0)
    assert (await fetch(_errors(tenant, f"/{error_id}"), token=viewer_token)).code == 200
    answer = await fetch(_errors(tenant, f"/{error_id}"), "PATCH", token=viewer_token,
                         json_body={"status": "resolved"})
    assert answer.code == 403
    stored = await deps.store.collection("errors").find_one({"_id": error_id})
    assert stored["status"] == "open"


async def test_an_unknown_status_or_error_is_refused(fetch: Fetch, tenant: Tenant, deps):
    error_id = await _count_error(deps.store, tenant.site_id, 0)
    bad = await fetch(_errors(tenant, f"/{error_id}"), "PATCH", token=tenant.token,
                      json_body={"status": "deleted"})
    assert bad.code == 422
    missing = await fetch(_errors(tenant, "/00000000-0000-4000-8000-000000000000"), "PATCH",
                          token=tenant.token, json_body={"status": "resolved"})
    assert missing.code == 404
