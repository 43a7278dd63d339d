"""Marks: a recording counts the rage and dead clicks, leads and errors that arrive during it,
folded in from the facts stored with them (derived/derivation.py), so a retry never counts
twice and a failure never counts.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from documents.recordings import MARKS_PENDING
from tasks.errors import error_job, process_error
from tests.recordings.kit import FakeClock, context, new_recording_id
from tests.support.app import Answer, Fetch, Tenant
from tests.tasks.support import RecordingNotifier, js_error

NONE = {"error": 0, "rage_click": 0, "dead_click": 0, "lead": 0}
CLICKS = [{"kind": "click", "selector": "#buy"}, {"kind": "rage_click", "selector": "#coupon"},
          {"kind": "dead_click", "selector": "h1"}, {"kind": "dead_click", "selector": "h2"},
          {"kind": "scroll_depth", "depth": 60}]


async def _post(fetch: Fetch, tenant: Tenant, kind: str, body: dict[str, Any]) -> Answer:
    return await fetch(f"/ingest/{kind}", "POST", json_body=body,
                       headers={"X-Service-Key": tenant.api_key})


async def _start(fetch: Fetch, tenant: Tenant, **fields: Any) -> str:
    recording_id = new_recording_id()
    answer = await _post(fetch, tenant, "recordings/start",
                         context(recordingId=recording_id, **fields))
    assert answer.code == 200, answer
    return recording_id


async def _marks(deps, recording_id: str) -> dict[str, int]:
    recording = await deps.store.collection("recordings").find_one({"_id": recording_id})
    return recording["marks"]


def _job(tenant: Tenant, **fields: Any) -> dict[str, Any]:
    """An error of the kit's visitor and session, as the worker gets it."""
    return error_job(tenant.site_id, js_error(**{
        **context(), "occurredAt": datetime.now(UTC).isoformat(), **fields}))


async def test_clicks_a_lead_and_an_error_during_a_recording_count_once_however_often_sent(
        fetch: Fetch, tenant: Tenant, deps):
    recording_id = await _start(fetch, tenant)
    someone_else = await _start(fetch, tenant, visitorId="visitor-2")
    batch = context(batchId="batch-1", interactions=CLICKS)
    lead = context(leadId="lead-1", email="ada@example.com")

    for _ in range(2):  # the second time as a retry of the same batch and the same lead
        assert (await _post(fetch, tenant, "recordings/interactions", batch)).code == 200
        assert (await _post(fetch, tenant, "leads", lead)).code == 200
    assert (await _post(fetch, tenant, "errors", js_error(
        **context(), occurredAt=datetime.now(UTC).isoformat()))).code == 200
    await deps.queue.join()
    await deps.derivation.fold()

    assert await _marks(deps, recording_id) == {
        "error": 1, "rage_click": 1, "dead_click": 2, "lead": 1}
    assert await _marks(deps, someone_else) == NONE


async def test_an_error_job_processed_twice_marks_its_recording_once(
        fetch: Fetch, tenant: Tenant, deps):
    recording_id = await _start(fetch, tenant)
    job = _job(tenant)

    for _ in range(2):
        await process_error(deps.store, job, notifier=RecordingNotifier(), bus=deps.bus,
                            metrics=deps.metrics)
    await deps.derivation.fold()

    assert (await _marks(deps, recording_id))["error"] == 1


async def test_what_happened_outside_the_recording_or_in_another_session_marks_nothing(
        fetch: Fetch, tenant: Tenant, deps):
    recording_id = await _start(fetch, tenant)
    earlier = (datetime.now(UTC) - timedelta(hours=2)).isoformat()

    await _post(fetch, tenant, "leads", context(email="ada@example.com", occurredAt=earlier))
    await _post(fetch, tenant, "leads", context(email="ada@example.com", sessionId="other-tab"))
    await _post(fetch, tenant, "recordings/interactions", context(interactions=[
        {"kind": "rage_click", "selector": "#coupon", "at": earlier}]))
    for job in (_job(tenant, occurredAt=earlier), _job(tenant, sessionId="other-tab")):
        await process_error(deps.store, job, notifier=RecordingNotifier(), bus=deps.bus,
                            metrics=deps.metrics)
    await deps.derivation.fold()

    assert await _marks(deps, recording_id) == NONE


async def test_a_click_that_arrives_before_the_segment_covering_it_marks_the_running_recording(
        fetch: Fetch, tenant: Tenant, deps):
    clock = FakeClock()
    deps.recordings.clock = clock
    clock.advance(-60)
    running = await _start(fetch, tenant)
    ended = await _start(fetch, tenant, visitorId="visitor-2")
    assert (await _post(fetch, tenant, "recordings/end",
                        context(visitorId="visitor-2", recordingId=ended))).code == 200

    # A minute after either recording's last activity: the running one may still grow over
    # it, the ended one cannot.
    for visitor in ("visitor-1", "visitor-2"):
        await _post(fetch, tenant, "recordings/interactions", context(
            visitorId=visitor, interactions=[{"kind": "dead_click", "selector": "h1"}]))
    await deps.derivation.fold()

    assert (await _marks(deps, running))["dead_click"] == 1
    assert (await _marks(deps, ended))["dead_click"] == 0


#: Where a fold can fail on the way to a mark, and what is then still waiting: in the fold's
#: transaction, the facts; adding the folded marks to their recording, the pending marks.
MARK_STEPS = {"folding": (MARKS_PENDING, "insert_one", "unfolded_facts"),
              "adding": ("recordings", "update_one", MARKS_PENDING)}


@pytest.mark.parametrize("step", sorted(MARK_STEPS))
@pytest.mark.parametrize("kind", ["recordings/interactions", "leads"])
async def test_a_fold_that_fails_at_a_mark_counts_nothing_and_the_next_counts_once(
        fetch: Fetch, tenant: Tenant, deps, kind: str, step: str, faults):
    failing, operation, waiting = MARK_STEPS[step]
    recording_id = await _start(fetch, tenant)
    body = context(batchId="batch-1", interactions=CLICKS) if kind != "leads" else context(
        leadId="lead-1", email="ada@example.com")
    for _ in range(2):  # a retried request
        assert (await _post(fetch, tenant, kind, body)).code == 200
    faults.fail(failing, operation)

    # The site's pass fails and is counted; the next pass tries again.
    await deps.derivation.fold()
    assert deps.metrics.value("derivation_site_failures_total") == 1

    assert await _marks(deps, recording_id) == NONE
    assert await deps.store.collection(waiting).count_documents({}) == 1
    faults.clear()
    await deps.derivation.fold()
    await deps.derivation.fold()
    marks = await _marks(deps, recording_id)
    assert sum(marks.values()) == (1 if kind == "leads" else 3)


async def test_a_fold_that_fails_at_an_error_mark_counts_nothing_and_the_next_counts_once(
        fetch: Fetch, tenant: Tenant, deps, faults):
    recording_id = await _start(fetch, tenant)
    job = _job(tenant)
    for _ in range(2):  # a job processed twice is kept, and recorded for the fold, once
        await process_error(deps.store, job, notifier=RecordingNotifier(), bus=deps.bus,
                            metrics=deps.metrics)
    assert await deps.store.collection("unfolded_facts").count_documents({}) == 1
    faults.fail("recordings", "update_one")

    # The site's pass fails and is counted; the next pass tries again.
    await deps.derivation.fold()
    assert deps.metrics.value("derivation_site_failures_total") == 1

    assert await deps.store.collection("error_occurrences").count_documents({}) == 1
    assert (await _marks(deps, recording_id))["error"] == 0
    faults.clear()
    await deps.derivation.fold()
    await deps.derivation.fold()
    assert (await _marks(deps, recording_id))["error"] == 1
