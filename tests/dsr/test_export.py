"""The access export: complete, reduced where the spec says, streamed, and audited."""

from __future__ import annotations

import json
import secrets

from privacy.subject_data import VISITOR_DATA
from tests.support.app import Fetch, Tenant
from tests.support.visitor_data import seed_visitor


def _export_path(tenant: Tenant, visitor_id: str) -> str:
    return f"/api/v1/sites/{tenant.site_id}/visitors/{visitor_id}/export.json"


async def test_the_export_holds_every_category_of_the_visitors_data(
        fetch: Fetch, tenant: Tenant, deps):
    seeded = await seed_visitor(fetch, tenant, deps)
    answer = await fetch(_export_path(tenant, seeded.visitor_id), token=tenant.token)
    assert answer.code == 200, answer
    assert answer.headers["Content-Disposition"].startswith("attachment;")
    export = answer.json()
    visitor = export["visitor"]
    assert visitor["visitorId"] == seeded.visitor_id
    assert visitor["ipAddressAnonymised"] == "198.51.100.0"
    for field in ("country", "browser", "os", "language", "timeZone", "firstSeen", "lastSeen"):
        assert field in visitor
    assert [p["url"] for p in export["pageviews"]] == ["https://shop.example/p/1",
                                                        "https://shop.example/cart"]
    assert export["leads"][0]["email"] == seeded.email
    assert {r["id"] for r in export["recordings"]} >= {seeded.recording_id}
    # What a recording keeps about the visitor for the recordings list is shown with it.
    recording = next(r for r in export["recordings"] if r["id"] == seeded.recording_id)
    assert recording["device"] == "desktop" and "country" in recording and "marks" in recording
    segment = export["recordingSegments"][0]
    assert segment["recordingId"] == seeded.recording_id and "name" in segment
    assert "data" not in json.dumps(segment)  # footage is described, never embedded
    assert {i["kind"] for i in export["interactions"]} == {"click", "scroll_depth"}
    assert export["surveyResponses"][0]["linkedBy"] == "session"
    assert export["consentDecisions"][0]["decision"] == "granted"
    assert len(export["chatTranscripts"]) == 2
    fault = export["faults"][0]
    assert fault["what"] == "TypeError: cart is undefined" and fault["when"]
    assert "occurrenceCount" not in json.dumps(export["faults"])
    assert "purposes" in export["information"] and "rights" in export["information"]
    assert seeded.full_ip not in answer.body.decode()


async def test_profiles_of_the_same_user_are_listed_separately_not_merged(
        fetch: Fetch, tenant: Tenant, deps):
    seeded = await seed_visitor(fetch, tenant, deps)
    await fetch("/ingest/visitors", "POST", headers={"X-Service-Key": tenant.api_key},
                json_body={"visitorId": "ada-phone", "wpUserId": 7, "language": "fr-FR"})
    export = (await fetch(_export_path(tenant, seeded.visitor_id), token=tenant.token)).json()
    assert [p["visitorId"] for p in export["linkedProfiles"]] == ["ada-phone"]
    assert export["visitor"]["visitorId"] == seeded.visitor_id
    assert export["visitor"]["language"] == "en-GB"
    assert export["manifest"]["linkedProfiles"] == 1


async def test_every_collection_holding_visitor_data_is_exported_or_says_why_not(
        fetch: Fetch, tenant: Tenant, deps):
    # Needles of this test's own: the store is shared, and another test's account or records
    # may hold ada@example.com or ada-1.
    own = secrets.token_hex(4)
    seeded = await seed_visitor(fetch, tenant, deps, f"ada-{own}",
                                email=f"ada-{own}@example.com")
    needles = (seeded.visitor_id, seeded.session_id, seeded.email)
    holding = set()
    for name in await deps.store.collection_names():
        async for doc in deps.store.collection(name).find({}):
            if any(needle in repr(doc) for needle in needles):
                holding.add(name)
    # Request log and audit trail hold digests and counts only, never these values.
    assert not holding & {"dsr_requests", "audit_log"}
    registered = {source.collection for source in VISITOR_DATA}
    assert holding <= registered, f"not in privacy.subject_data: {holding - registered}"
    export = (await fetch(_export_path(tenant, seeded.visitor_id), token=tenant.token)).json()
    manifest = export["manifest"]["collections"]
    assert set(manifest) == registered
    for name in holding:
        assert manifest[name] >= 1, f"{name} holds the visitor's data but the export shows none"
    for source in VISITOR_DATA:
        assert source.section in export, source.section


async def test_everything_erasure_would_touch_is_in_the_export(
        fetch: Fetch, tenant: Tenant, deps):
    """The export and erasure walk the same table: what one counts, the other shows."""
    seeded = await seed_visitor(fetch, tenant, deps)
    export = (await fetch(_export_path(tenant, seeded.visitor_id), token=tenant.token)).json()
    erased = (await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/{seeded.visitor_id}/data",
                          "DELETE", token=tenant.token)).json()
    shown = {source.category: export["manifest"]["collections"][source.collection]
             for source in VISITOR_DATA}
    for category, count in erased["counts"].items():
        if count:
            assert shown[category] >= 1, f"erasure touched {category}, the export showed none"
    assert export["heatmapImages"][0]["fromYourRecordings"] == [seeded.recording_id]


async def test_a_visitor_with_only_a_consent_decision_is_exported_not_404(
        fetch: Fetch, tenant: Tenant):
    key = {"X-Service-Key": tenant.api_key}
    consent = await fetch("/ingest/consents", "POST", headers=key, json_body={
        "visitorId": "consent-only", "decision": "denied", "signal": "banner"})
    assert consent.code == 200, consent
    export = await fetch(_export_path(tenant, "consent-only"), token=tenant.token)
    assert export.code == 200, export
    body = export.json()
    assert body["visitor"] == {"visitorId": "consent-only", "profileHeld": False}
    assert [d["decision"] for d in body["consentDecisions"]] == ["denied"]


async def test_an_unknown_visitor_is_404_and_the_request_is_logged_as_failed(
        fetch: Fetch, tenant: Tenant):
    answer = await fetch(_export_path(tenant, "nobody"), token=tenant.token)
    assert answer.code == 404
    log = (await fetch("/api/v1/requests", token=tenant.token)).json()
    assert log[0]["type"] == "access" and log[0]["status"] == "failed"


async def test_the_export_is_logged_with_its_due_date_and_completed(
        fetch: Fetch, tenant: Tenant, deps):
    seeded = await seed_visitor(fetch, tenant, deps)
    export = (await fetch(_export_path(tenant, seeded.visitor_id), token=tenant.token)).json()
    log = (await fetch("/api/v1/requests", token=tenant.token)).json()
    entry = next(e for e in log if e["id"] == export["requestId"])
    assert entry["type"] == "access" and entry["status"] == "completed"
    assert entry["dueAt"][:7] > entry["receivedAt"][:7] or entry["dueAt"][:4] > \
        entry["receivedAt"][:4]
    assert await deps.store.collection("audit_log").find_one(
        {"action": "visitor.exported", "details.requestId": export["requestId"]})


async def test_a_viewer_cannot_export_or_erase(fetch: Fetch, tenant: Tenant, deps,
                                              test_password_hash):
    from documents import accounts
    from tests.support.app import TEST_PASSWORD

    seeded = await seed_visitor(fetch, tenant, deps)
    await accounts.add_member(deps.store, organization_id=tenant.organization_id,
                              email="viewer@example.com", password_hash=test_password_hash,
                              display_name="Viewer", role="viewer")
    token = (await fetch("/auth/login", "POST", json_body={
        "email": "viewer@example.com", "password": TEST_PASSWORD})).json()["accessToken"]
    assert (await fetch(_export_path(tenant, seeded.visitor_id), token=token)).code == 403
    erase = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/{seeded.visitor_id}/data",
                        "DELETE", token=token)
    assert erase.code == 403


def test_one_month_later_clamps_to_the_end_of_the_month():
    from datetime import UTC, datetime

    from documents.requests import one_month_later

    assert one_month_later(datetime(2026, 1, 31, 12, tzinfo=UTC)) == datetime(
        2026, 2, 28, 12, tzinfo=UTC)
    assert one_month_later(datetime(2026, 12, 15, tzinfo=UTC)) == datetime(2027, 1, 15,
                                                                          tzinfo=UTC)


async def test_the_request_log_writes_its_dates_as_rfc_3339(fetch: Fetch, tenant: Tenant):
    import re

    await fetch(_export_path(tenant, "nobody"), token=tenant.token)
    entry = (await fetch("/api/v1/requests", token=tenant.token)).json()[0]
    rfc3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
    for field in ("receivedAt", "dueAt"):
        assert rfc3339.match(entry[field]), (field, entry[field])
