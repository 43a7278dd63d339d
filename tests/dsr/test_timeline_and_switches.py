"""The session timeline, and the restriction and objection switches."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

from tests.support.app import Fetch, Tenant
from tests.support.visitor_data import seed_visitor

ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}")


async def _recording(deps, tenant: Tenant, visitor_id: str, started: datetime, minutes: float,
                     url: str) -> str:
    recording_id = str(uuid.uuid4())
    await deps.store.collection("recordings").insert_one({
        "_id": recording_id, "siteId": tenant.site_id, "visitorId": visitor_id,
        "sessionId": "s", "status": "ended", "startedAt": started,
        "lastActivityAt": started + timedelta(minutes=minutes),
        "endedAt": started + timedelta(minutes=minutes), "pages": [{"url": url, "at": started}]})
    return recording_id


async def test_sessions_are_listed_oldest_first_across_visits_and_days(
        fetch: Fetch, tenant: Tenant, deps):
    await fetch("/ingest/visitors", "POST", headers={"X-Service-Key": tenant.api_key},
                json_body={"visitorId": "v1"})
    day = datetime(2026, 11, 1, 9, tzinfo=UTC)
    # Inserted out of order on purpose.
    late = await _recording(deps, tenant, "v1", day + timedelta(days=2), 3, "https://s/c")
    early = await _recording(deps, tenant, "v1", day, 1.5, "https://s/a")
    middle = await _recording(deps, tenant, "v1", day + timedelta(hours=5), 30, "https://s/b")
    answer = await fetch(f"/dashboard/visitors/{tenant.site_id}:v1/sessions", token=tenant.token)
    assert answer.code == 200, answer
    sessions = answer.json()
    assert [s["id"] for s in sessions] == [early, middle, late]
    assert [s["duration"] for s in sessions] == [90.0, 1800.0, 180.0]
    assert [s["pageUrl"] for s in sessions] == ["https://s/a", "https://s/b", "https://s/c"]
    for session in sessions:
        assert uuid.UUID(session["id"])
        assert ISO.match(session["startedAt"])
        assert isinstance(session["duration"], float)


async def test_another_organization_cannot_list_the_sessions(
        fetch: Fetch, tenant: Tenant, make_tenant, deps):
    await fetch("/ingest/visitors", "POST", headers={"X-Service-Key": tenant.api_key},
                json_body={"visitorId": "v1"})
    await _recording(deps, tenant, "v1", datetime(2026, 11, 1, tzinfo=UTC), 1, "https://s/")
    intruder = await make_tenant("intruder")
    answer = await fetch(f"/dashboard/visitors/{tenant.site_id}:v1/sessions",
                         token=intruder.token)
    assert answer.code == 404


async def test_a_restricted_visitor_is_kept_but_new_ingest_is_dropped(
        fetch: Fetch, tenant: Tenant, deps):
    seeded = await seed_visitor(fetch, tenant, deps)
    path = f"/api/v1/sites/{tenant.site_id}/visitors/{seeded.visitor_id}/restriction"
    answer = await fetch(path, "PUT", token=tenant.token, json_body={"on": True})
    assert answer.code == 200, answer
    before = await deps.store.collection("pageview_buckets").find_one(
        {"visitorId": seeded.visitor_id})
    profile_before = await deps.store.collection("visitors").find_one(
        {"visitorId": seeded.visitor_id})
    dropped = await fetch("/ingest/pageviews", "POST", headers={"X-Service-Key": tenant.api_key},
                          json_body={"visitorId": seeded.visitor_id, "url": "https://s/x"})
    assert dropped.json() == {"ok": True, "dropped": "restricted"}
    after = await deps.store.collection("pageview_buckets").find_one(
        {"visitorId": seeded.visitor_id})
    assert after == before
    # The write that found the hold was undone whole: no count, no recent page, no last seen.
    assert await deps.store.collection("visitors").find_one(
        {"visitorId": seeded.visitor_id}) == profile_before
    # Hidden from the dashboard's session list, still there for data-subject operations.
    sessions = await fetch(f"/dashboard/visitors/{tenant.site_id}:{seeded.visitor_id}/sessions",
                           token=tenant.token)
    assert sessions.code == 404
    export = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/{seeded.visitor_id}"
                         "/export.json", token=tenant.token)
    assert export.code == 200 and export.json()["visitor"]["restricted"] is True
    profile = await deps.store.collection("visitors").find_one({"visitorId": seeded.visitor_id})
    assert profile["restricted"] is True
    log = (await fetch("/api/v1/requests", token=tenant.token)).json()
    assert any(e["type"] == "restriction" and e["status"] == "completed" for e in log)
    assert await deps.store.collection("audit_log").find_one(
        {"action": "visitor.restriction_set", "siteId": tenant.site_id})


async def test_an_objection_drops_new_ingest_and_can_be_lifted(
        fetch: Fetch, tenant: Tenant, deps):
    seeded = await seed_visitor(fetch, tenant, deps)
    path = f"/api/v1/sites/{tenant.site_id}/visitors/{seeded.visitor_id}/objection"
    assert (await fetch(path, "PUT", token=tenant.token, json_body={"on": True})).code == 200
    body = {"visitorId": seeded.visitor_id, "email": "new@example.com"}
    dropped = await fetch("/ingest/leads", "POST", headers={"X-Service-Key": tenant.api_key},
                          json_body=body)
    assert dropped.json() == {"ok": True, "dropped": "objected"}
    assert await deps.store.collection("leads").count_documents({"email": "new@example.com"}) == 0
    assert (await fetch(path, "PUT", token=tenant.token, json_body={"on": False})).code == 200
    stored = await fetch("/ingest/leads", "POST", headers={"X-Service-Key": tenant.api_key},
                         json_body=body)
    assert "id" in stored.json()
    assert await deps.store.collection("audit_log").find_one({"action": "visitor.objection_lifted"})


async def test_a_switch_for_an_unknown_visitor_is_404(fetch: Fetch, tenant: Tenant):
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/nobody/restriction", "PUT",
                         token=tenant.token, json_body={"on": True})
    assert answer.code == 404
