"""Erasure: every category goes (errors anonymised), all or nothing, with a receipt."""

from __future__ import annotations

import pytest

from tests.support.app import Fetch, Tenant, all_documents_text
from tests.support.faulty_store import FaultPlan, InjectedFault
from tests.support.visitor_data import SeededVisitor, seed_visitor


async def _snapshot(store) -> dict[str, list]:
    return {name: await store.collection(name).find({}).sort("_id", 1).to_list(None)
            for name in await store.collection_names()}


def _erase_path(tenant: Tenant, visitor_id: str) -> str:
    return f"/api/v1/sites/{tenant.site_id}/visitors/{visitor_id}/data"


async def test_erasure_removes_every_trace_and_answers_a_receipt(
        fetch: Fetch, tenant: Tenant, deps):
    seeded = await seed_visitor(fetch, tenant, deps)
    other = await seed_visitor(fetch, tenant, deps, "bob-2", email="bob@example.com",
                               name="Bob Builder", phone="+44 20 7946 1111", wp_user_id=None)
    answer = await fetch(_erase_path(tenant, seeded.visitor_id), "DELETE", token=tenant.token)
    assert answer.code == 200, answer
    receipt = answer.json()
    assert receipt["counts"]["visitorProfile"] == 1
    assert receipt["counts"]["pageviews"] == 1  # one bucket
    for category in ("leads", "chatTranscripts", "surveyResponses", "recordings",
                     "recordingSegments", "heatmapImages", "errorSessionLinks",
                     "errorOccurrences", "interactions",
                     "consentDecisions"):
        assert receipt["counts"][category] >= 1, category
    assert receipt["counts"]["recordings"] == 2
    assert receipt["counts"]["chatTranscripts"] == 2
    assert receipt["legacyFootage"] == [seeded.legacy_path]
    assert receipt["requestId"] and receipt["completedAt"]
    # The receipt itself carries no personal data.
    for value in (seeded.visitor_id, seeded.session_id, seeded.email):
        assert value not in answer.body.decode().replace(seeded.legacy_path, "")

    text = await all_documents_text(deps.store)
    for value in (seeded.visitor_id, seeded.session_id, seeded.email, seeded.recording_id,
                  "Ada Lovelace", "+44 20 7946 0000"):
        assert value not in text, value
    # The other visitor is untouched.
    assert other.visitor_id in text and other.email in text
    # Both hit the same fault; the aggregate names only its latest visitor, Bob, so nothing of
    # Ada's was left in it to anonymise, and it still counts both occurrences.
    error = await deps.store.collection("errors").find_one({"message": "cart is undefined"})
    assert error["occurrenceCount"] == 2 and error["visitorId"] == "bob-2"
    assert receipt["counts"]["errorRecordsAnonymised"] == 0


async def test_the_erased_errors_are_anonymised_not_deleted(fetch: Fetch, tenant: Tenant, deps):
    seeded = await seed_visitor(fetch, tenant, deps)
    await fetch(_erase_path(tenant, seeded.visitor_id), "DELETE", token=tenant.token)
    error = await deps.store.collection("errors").find_one({"message": "cart is undefined"})
    assert error is not None and error["occurrenceCount"] == 1
    assert error["visitorId"] is None and error["sessionId"] is None
    assert error["wpUserId"] is None and error["ipAddress"] is None
    assert error["context"] == {"release": "1.2.3"}


async def test_after_erasure_the_export_is_404_and_new_ingest_starts_afresh(
        fetch: Fetch, tenant: Tenant, deps):
    seeded = await seed_visitor(fetch, tenant, deps)
    await fetch(_erase_path(tenant, seeded.visitor_id), "DELETE", token=tenant.token)
    export = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/{seeded.visitor_id}"
                         "/export.json", token=tenant.token)
    assert export.code == 404
    again = await fetch(_erase_path(tenant, seeded.visitor_id), "DELETE", token=tenant.token)
    assert again.code == 404
    await fetch("/ingest/pageviews", "POST", headers={"X-Service-Key": tenant.api_key},
                json_body={"visitorId": seeded.visitor_id, "url": "https://shop.example/"})
    profile = await deps.store.collection("visitors").find_one({"visitorId": seeded.visitor_id})
    assert profile["displayName"] == f"Visitor #{seeded.visitor_id}"
    assert profile["counts"] == {"pageviews": 1}
    assert "wpUserId" not in profile and "emails" not in profile


async def test_the_dashboard_erase_button_path_erases_too(fetch: Fetch, tenant: Tenant, deps):
    seeded = await seed_visitor(fetch, tenant, deps)
    answer = await fetch(f"/dashboard/visitors/{tenant.site_id}:{seeded.visitor_id}/data",
                         "DELETE", token=tenant.token)
    assert answer.code == 200
    assert await deps.store.collection("visitors").count_documents(
        {"visitorId": seeded.visitor_id}) == 0


async def test_erasure_is_recorded_in_the_request_log_and_audit_trail(
        fetch: Fetch, tenant: Tenant, deps):
    seeded = await seed_visitor(fetch, tenant, deps)
    receipt = (await fetch(_erase_path(tenant, seeded.visitor_id), "DELETE",
                           token=tenant.token)).json()
    log = (await fetch("/api/v1/requests", token=tenant.token)).json()
    entry = next(e for e in log if e["id"] == receipt["requestId"])
    assert entry["type"] == "erasure" and entry["status"] == "completed"
    assert entry["completedAt"] and entry["dueAt"] > entry["receivedAt"]
    audit = await deps.store.collection("audit_log").find_one({"action": "visitor.erased"})
    assert audit["details"]["requestId"] == receipt["requestId"]
    assert audit["actorUserId"] == tenant.user_id


async def _erasure_steps(fetch: Fetch, tenant: Tenant, faults: FaultPlan, seeded: SeededVisitor
                         ) -> list[tuple[str, str]]:
    """The write operations an erasure performs, in order, learnt from a dry run's calls."""
    faults.record_calls = True
    faults.calls.clear()
    faults.fail("audit_log", "insert_one", error=lambda: InjectedFault("dry run"))
    await fetch(_erase_path(tenant, seeded.visitor_id), "DELETE", token=tenant.token)
    writes = [call for call in faults.calls
              if call[1] in {"delete_many", "update_one", "delete_one", "insert_one"}
              and call[0] not in {"dsr_requests"}]
    faults.clear()
    faults.record_calls = False
    return writes


async def test_a_fault_at_any_erasure_step_leaves_every_collection_as_it_was(
        fetch: Fetch, tenant: Tenant, deps, faults):
    seeded = await seed_visitor(fetch, tenant, deps)
    steps = await _erasure_steps(fetch, tenant, faults, seeded)
    assert len(steps) >= 15
    for index, (collection, operation) in enumerate(steps):
        before = await _snapshot(deps.store)
        before.pop("dsr_requests", None)
        skip = sum(1 for c in steps[:index] if c == (collection, operation))
        faults.fail(collection, operation, skip=skip)
        answer = await fetch(_erase_path(tenant, seeded.visitor_id), "DELETE",
                             token=tenant.token)
        faults.clear()
        assert answer.code == 503, (index, collection, operation, answer)
        after = await _snapshot(deps.store)
        after.pop("dsr_requests", None)
        assert after == before, f"step {index}: {operation} on {collection} left changes"
    final = await fetch(_erase_path(tenant, seeded.visitor_id), "DELETE", token=tenant.token)
    assert final.code == 200


@pytest.mark.parametrize("role_path", ["api", "dashboard"])
async def test_another_organization_cannot_erase_or_even_see_the_visitor(
        fetch: Fetch, tenant: Tenant, make_tenant, deps, role_path: str):
    seeded = await seed_visitor(fetch, tenant, deps)
    intruder = await make_tenant("intruder")
    path = (_erase_path(tenant, seeded.visitor_id) if role_path == "api"
            else f"/dashboard/visitors/{tenant.site_id}:{seeded.visitor_id}/data")
    answer = await fetch(path, "DELETE", token=intruder.token)
    assert answer.code == 404
    assert await deps.store.collection("visitors").count_documents(
        {"visitorId": seeded.visitor_id}) == 1


async def test_erasure_deletes_the_visitors_error_jobs_still_waiting_in_the_outbox(
        fetch: Fetch, tenant: Tenant, deps):
    """On the Celery back-end an accepted error waits in `error_outbox` until a worker finishes
    it; the job holds what the shop sent, so erasure must not leave it behind."""
    from datetime import UTC, datetime

    from documents import error_outbox
    from tasks.errors import error_job

    seeded = await seed_visitor(fetch, tenant, deps)
    now = datetime.now(UTC)
    for visitor_id, session_id in ((seeded.visitor_id, "s-other"), ("v-else", seeded.session_id),
                                   ("bob-2", "s-bob")):
        job = error_job(tenant.site_id, {
            "visitorId": visitor_id, "sessionId": session_id, "source": "javascript",
            "type": "TypeError", "message": "still queued", "url": "https://shop.example/"})
        await error_outbox.keep_job(deps.store, job, now=now, relay_after=now)
    answer = await fetch(_erase_path(tenant, seeded.visitor_id), "DELETE", token=tenant.token)
    assert answer.code == 200, answer
    assert answer.json()["counts"]["pendingErrorJobs"] == 2
    left = await deps.store.collection("error_outbox").find({}).to_list(None)
    assert [entry["job"]["error"]["visitorId"] for entry in left] == ["bob-2"]
