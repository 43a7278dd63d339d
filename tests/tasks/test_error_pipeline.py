"""The error pipeline on the embedded default: endpoint, in-process queue and process_error."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from config import Settings
from documents import visitors
from documents.store import DuplicateKeyError
from tasks.errors import error_job, process_error
from tasks.queue import ErrorPipeline, InProcessErrorQueue, RetryPolicy
from tests.support.app import Fetch, Tenant, all_documents_text
from tests.tasks.support import (
    ANONYMISED_IP,
    FULL_IP,
    OCCURRED_AT,
    FailingNotifier,
    RecordingNotifier,
    js_error,
    post_error,
)


@pytest.fixture
def settings_env(settings_env: dict[str, str]) -> dict[str, str]:
    """Backoff in milliseconds, so retry tests are quick."""
    return {**settings_env, "ERROR_RETRY_BASE_SECONDS": "0.01"}


@pytest.fixture
def notifier() -> RecordingNotifier:
    """Notifications, recorded."""
    return RecordingNotifier()


@pytest.fixture
async def queue(deps, settings: Settings, notifier: RecordingNotifier) -> InProcessErrorQueue:
    """The app's in-process queue, rebuilt with a recording notifier."""
    await deps.queue.close()
    pipeline = ErrorPipeline(deps.store, notifier=notifier, bus=deps.bus, metrics=deps.metrics,
                             policy=RetryPolicy(base_delay=settings.error_retry_base_seconds))
    queue = InProcessErrorQueue(pipeline)
    queue.start()
    deps.queue = queue
    return queue


@pytest.fixture
def events(deps) -> list[tuple[str, dict[str, Any]]]:
    """Every live event published on the app's bus."""
    seen: list[tuple[str, dict[str, Any]]] = []
    deps.bus.listen(lambda site_id, event: seen.append((site_id, event)))
    return seen


async def _only_error(deps) -> dict[str, Any]:
    records = await deps.store.collection("errors").find({}).to_list(None)
    assert len(records) == 1, records
    return records[0]


async def test_an_ingested_error_is_acknowledged_then_grouped_linked_and_announced(
        fetch: Fetch, tenant: Tenant, deps, queue, notifier, events):
    answer = await post_error(fetch, tenant)
    assert answer.code == 200, answer
    assert answer.json() == {"ok": True}
    await queue.join()
    record = await _only_error(deps)
    assert record["siteId"] == tenant.site_id
    assert record["occurrenceCount"] == 1 and record["status"] == "open"
    assert record["type"] == "TypeError" and record["source"] == "javascript"
    assert record["visitorId"] == "v-1" and record["sessionId"] == "s-1"
    assert record["wpUserId"] == "7" and record["ipAddress"] == ANONYMISED_IP
    assert record["context"]["email"] == "ann@example.com"
    assert record["firstSeen"] and record["lastSeen"] and "at renderCart" in record["lastStack"]
    link = await deps.store.collection("error_sessions").find_one({})
    assert (link["errorId"], link["sessionId"], link["visitorId"], link["siteId"]) == (
        record["_id"], "s-1", "v-1", tenant.site_id)
    occurrence = await deps.store.collection("error_occurrences").find_one({"visitorId": "v-1"})
    assert occurrence["errorId"] == record["_id"] and occurrence["type"] == "TypeError"
    assert occurrence["occurredAt"].isoformat().startswith(OCCURRED_AT[:19])
    assert [(site, reopened) for site, _, reopened in notifier.calls] == [(tenant.site_id, False)]
    assert len(events) == 1
    site_id, event = events[0]
    assert site_id == tenant.site_id and event["type"] == "new_error"
    assert event["id"] == record["_id"]
    assert event["error"]["new"] is True and event["error"]["reopened"] is False
    assert event["error"]["occurrenceCount"] == 1
    assert deps.metrics.value("ingest_items_total", kind="error", outcome="queued",
                              reason="") == 1


@pytest.mark.slow
async def test_three_hundred_identical_errors_on_five_workers_make_one_record_counting_300(
        deps, tenant: Tenant, queue, notifier, events):
    # 300 keep five workers racing on the one record (a thousand took 45 s on the wire).
    assert queue.concurrency == 5
    jobs = [error_job(tenant.site_id, js_error(sessionId=f"s-{n % 10}", ip=f"203.0.113.{n % 250}"))
            for n in range(300)]
    await asyncio.gather(*(queue.enqueue(job) for job in jobs))
    await queue.join()
    record = await _only_error(deps)
    assert record["occurrenceCount"] == 300
    assert await deps.store.collection("error_sessions").count_documents({}) == 10
    assert await deps.store.collection("error_occurrences").count_documents({}) == 300
    assert len(notifier.calls) == 1 and len(events) == 1
    assert await deps.store.collection("failed_jobs").count_documents({}) == 0


async def test_the_same_job_processed_twice_counts_once(deps, tenant: Tenant, notifier):
    job = error_job(tenant.site_id, js_error())
    for _ in range(2):
        await process_error(deps.store, job, notifier=notifier, bus=deps.bus,
                            metrics=deps.metrics)
    record = await _only_error(deps)
    assert record["occurrenceCount"] == 1
    assert await deps.store.collection("error_occurrences").count_documents({}) == 1
    assert await deps.store.collection("error_sessions").count_documents({}) == 1
    other = error_job(tenant.site_id, js_error())
    await process_error(deps.store, other, notifier=notifier, bus=deps.bus, metrics=deps.metrics)
    assert (await _only_error(deps))["occurrenceCount"] == 2


async def test_a_job_that_loses_the_race_to_create_the_record_still_counts_once(
        deps, tenant: Tenant, notifier, faults):
    await process_error(deps.store, error_job(tenant.site_id, js_error()), notifier=notifier,
                        bus=deps.bus, metrics=deps.metrics)
    # What a concurrent first insert looks like on a real server: the upsert collides.
    faults.fail("errors", "find_one_and_update",
                      error=lambda: DuplicateKeyError("E11000 duplicate key", 11000))
    await process_error(deps.store, error_job(tenant.site_id, js_error()), notifier=notifier,
                        bus=deps.bus, metrics=deps.metrics)
    assert (await _only_error(deps))["occurrenceCount"] == 2
    assert len(notifier.calls) == 1


async def test_a_store_that_fails_twice_then_recovers_counts_the_error_once(
        fetch: Fetch, tenant: Tenant, deps, queue, faults):
    faults.record_calls = True
    faults.fail("errors", "find_one_and_update", times=2)
    assert (await post_error(fetch, tenant)).json() == {"ok": True}
    await queue.join()
    assert (await _only_error(deps))["occurrenceCount"] == 1
    assert faults.calls.count(("errors", "find_one_and_update")) == 3
    assert deps.metrics.value("error_jobs_total", outcome="retried") == 2
    assert deps.metrics.value("error_jobs_total", outcome="processed") == 1
    assert await deps.store.collection("failed_jobs").count_documents({}) == 0


async def test_a_store_that_stays_down_puts_the_job_in_failed_jobs_after_exactly_four_attempts(
        fetch: Fetch, tenant: Tenant, deps, queue, faults, caplog):
    caplog.set_level(logging.WARNING)
    faults.record_calls = True
    faults.fail("errors", "find_one_and_update", times=100)
    assert (await post_error(fetch, tenant)).json() == {"ok": True}
    await queue.join()
    failed = await deps.store.collection("failed_jobs").find({}).to_list(None)
    assert len(failed) == 1
    assert failed[0]["attempts"] == 4
    assert faults.calls.count(("errors", "find_one_and_update")) == 4
    assert "InjectedFault" in failed[0]["reason"]
    assert failed[0]["job"]["error"]["type"] == "TypeError"
    assert failed[0]["_id"] == failed[0]["job"]["jobId"]
    assert await deps.store.collection("errors").count_documents({}) == 0
    assert deps.metrics.value("error_jobs_total", outcome="failed") == 1


async def test_a_job_that_cannot_even_be_kept_is_counted_and_logged_by_id_only(
        fetch: Fetch, tenant: Tenant, deps, queue, faults, caplog):
    """Logs outlive erasure: the last-resort line names the job, never what the visitor sent."""
    caplog.set_level(logging.DEBUG)
    faults.fail("errors", "find_one_and_update", times=100)
    faults.fail("failed_jobs", None, times=100)
    body = js_error(message="cart of ada@example.com is undefined",
                    context={"user": {"email": "ada@example.com"}})
    assert (await post_error(fetch, tenant, body)).json() == {"ok": True}
    await queue.join()
    lost = deps.metrics.value("error_jobs_total", outcome="lost")
    kept = deps.metrics.value("error_jobs_total", outcome="left_in_outbox")
    assert lost + kept == 1
    assert "could not be stored" in caplog.text
    # Every attribute of every record: the JSON-lines formatter writes the `extra` fields too.
    everything = repr([vars(record) for record in caplog.records])
    assert "ada@example.com" not in everything and "cart of" not in everything


async def test_a_failure_that_is_not_temporary_goes_to_failed_jobs_at_once(
        tenant: Tenant, deps, queue, faults):
    faults.fail("errors", "find_one_and_update", error=lambda: ValueError("bad document"))
    await queue.enqueue(error_job(tenant.site_id, js_error()))
    await queue.join()
    failed = await deps.store.collection("failed_jobs").find_one({})
    assert failed["attempts"] == 1 and failed["reason"] == "ValueError: bad document"
    assert deps.metrics.value("error_jobs_total", outcome="retried") == 0


async def test_a_malformed_job_is_kept_in_failed_jobs_not_dropped(tenant: Tenant, deps, queue):
    await queue.enqueue({"jobId": "j-1", "siteId": tenant.site_id, "error": {}})
    await queue.join()
    failed = await deps.store.collection("failed_jobs").find_one({"_id": "j-1"})
    assert failed["attempts"] == 1 and failed["reason"].startswith("KeyError")


async def test_a_resolved_error_that_occurs_again_is_reopened_and_announced_once(
        fetch: Fetch, tenant: Tenant, deps, queue, notifier, events):
    await post_error(fetch, tenant)
    await queue.join()
    record = await _only_error(deps)
    await deps.store.collection("errors").update_one({"_id": record["_id"]},
                                                     {"$set": {"status": "resolved"}})
    notifier.calls.clear()
    events.clear()
    answers = await asyncio.gather(*(post_error(fetch, tenant) for _ in range(5)))
    assert all(answer.json() == {"ok": True} for answer in answers)
    await queue.join()
    record = await _only_error(deps)
    assert record["status"] == "open" and record["reopenedAt"]
    assert record["occurrenceCount"] == 6
    assert [reopened for _, _, reopened in notifier.calls] == [True]
    assert len(events) == 1
    assert events[0][1]["error"]["reopened"] is True and events[0][1]["error"]["new"] is False


async def test_a_failing_notification_neither_fails_nor_retries_the_job(
        tenant: Tenant, deps, events):
    pipeline = ErrorPipeline(deps.store, notifier=FailingNotifier(), bus=deps.bus,
                             metrics=deps.metrics, policy=RetryPolicy(base_delay=0.01))
    await pipeline.run(error_job(tenant.site_id, js_error()))
    assert (await _only_error(deps))["occurrenceCount"] == 1
    assert len(events) == 1
    assert deps.metrics.value("error_jobs_total", outcome="processed") == 1
    assert deps.metrics.value("error_jobs_total", outcome="retried") == 0


@pytest.mark.parametrize("body", [
    js_error(gpc=True),
    js_error(url="https://shop.example/account/secret"),
])
async def test_gpc_or_an_excluded_url_is_acknowledged_and_nothing_is_queued(
        fetch: Fetch, make_tenant, deps, queue, body):
    tenant = await make_tenant(settings={"excludedUrls": [
        {"pattern": "https://shop.example/account/*", "scope": "all"}]})
    answer = await post_error(fetch, tenant, body)
    assert answer.code == 200, answer
    assert answer.json() == {"ok": True}
    await queue.join()
    assert await deps.store.collection("errors").count_documents({}) == 0
    assert await deps.store.collection("error_occurrences").count_documents({}) == 0
    assert deps.metrics.total("ingest_items_total", kind="error", outcome="dropped") == 1
    assert deps.metrics.total("ingest_items_total", kind="error", outcome="queued") == 0


async def test_a_restricted_visitors_error_is_acknowledged_and_not_stored(
        fetch: Fetch, tenant: Tenant, deps, queue):
    await deps.store.collection("visitors").insert_one(
        {"_id": visitors.profile_id(tenant.site_id, "v-1"), "siteId": tenant.site_id,
         "visitorId": "v-1", "restricted": True})
    answer = await post_error(fetch, tenant)
    assert answer.json() == {"ok": True}
    await queue.join()
    assert await deps.store.collection("errors").count_documents({}) == 0
    assert deps.metrics.value("ingest_items_total", kind="error", outcome="dropped",
                              reason="restricted") == 1


async def test_the_full_ip_address_is_stored_in_no_collection(
        fetch: Fetch, tenant: Tenant, deps, queue, faults):
    full_v6 = "2001:db8:abcd:12:3456:789a:bcde:f012"
    await post_error(fetch, tenant)
    await post_error(fetch, tenant, js_error(ip=full_v6, context={"peer": full_v6}))
    await queue.join()  # the first two are processed before the store starts failing
    faults.fail("errors", "find_one_and_update", times=100)
    await post_error(fetch, tenant, js_error(message="Other", type="RangeError"))
    await queue.join()
    text = await all_documents_text(deps.store)
    assert await deps.store.collection("failed_jobs").count_documents({}) == 1
    assert ANONYMISED_IP in text and "2001:db8:abcd::" in text
    assert FULL_IP not in text and full_v6 not in text


async def test_a_full_in_process_queue_answers_503_and_keeps_nothing(
        fetch: Fetch, tenant: Tenant, deps):
    await deps.queue.close()
    pipeline = ErrorPipeline(deps.store, notifier=RecordingNotifier(), bus=deps.bus,
                             metrics=deps.metrics)
    # No workers: nothing drains it, so the second job finds it full.
    deps.queue = InProcessErrorQueue(pipeline, capacity=1, concurrency=0, drain_seconds=0.01)
    deps.queue.start()
    assert (await post_error(fetch, tenant)).code == 200
    answer = await post_error(fetch, tenant)
    assert answer.code == 503 and int(answer.headers["Retry-After"]) > 0
    assert answer.error_code == "queue_unavailable"
    assert deps.metrics.value("ingest_items_total", kind="error", outcome="dropped",
                              reason="queue_unavailable") == 1


def _key(tenant: Tenant) -> dict[str, str]:
    return {"X-Service-Key": tenant.api_key}


async def test_a_missing_or_wrong_key_is_refused_with_401(fetch: Fetch, tenant: Tenant, deps):
    missing = await fetch("/ingest/errors", "POST", json_body=js_error())
    wrong = await fetch("/ingest/errors", "POST", json_body=js_error(),
                        headers={"X-Service-Key": "sk_wrong"})
    assert (missing.code, missing.error_code) == (401, "missing_key")
    assert (wrong.code, wrong.error_code) == (401, "invalid_key")
    assert await deps.store.collection("failed_jobs").count_documents({}) == 0


async def test_malformed_json_is_refused_with_400(fetch: Fetch, tenant: Tenant):
    answer = await fetch("/ingest/errors", "POST", body=b"{not json",
                         headers={**_key(tenant), "Content-Type": "application/json"})
    assert answer.code == 400 and answer.error_code == "malformed_request"


@pytest.mark.parametrize(("body", "field"), [
    (js_error(debug=True), "debug"),
    (js_error(frames=[{"file": "a.js", "line": 1, "locals": {}}]), "frames.0.locals"),
    ({k: v for k, v in js_error().items() if k != "message"}, "message"),
    (js_error(source="python"), "source"),
    (js_error(gpc="yes"), "gpc"),
    (js_error(consent="maybe"), "consent"),
    (js_error(stack="x" * 40_000), "stack"),
    (js_error(context={"blob": "x" * 70_000}), "context"),
])
async def test_a_schema_violation_is_refused_with_422_naming_the_field(
        fetch: Fetch, tenant: Tenant, deps, queue, body, field):
    answer = await post_error(fetch, tenant, body)
    assert answer.code == 422, answer
    assert answer.json()["error"]["field"] == field
    await queue.join()
    assert await deps.store.collection("errors").count_documents({}) == 0


async def test_a_body_over_the_limit_is_refused_with_413(fetch: Fetch, tenant: Tenant, deps):
    answer = await post_error(fetch, tenant, js_error(stack="x" * 300_000))
    assert answer.code == 413 and answer.error_code == "payload_too_large"


async def test_every_acknowledged_error_is_stored_or_dropped_with_a_reason_none_lost(
        fetch: Fetch, tenant: Tenant, deps, queue):
    """The account of the error pipeline, hostile jobs included: acknowledged = stored +
    dropped by reason; what could not be stored is refused before the answer."""
    await deps.store.collection("visitors").insert_one({
        "_id": f"{tenant.site_id}:v-held", "siteId": tenant.site_id, "visitorId": "v-held",
        "restricted": True})
    raw = [
        json.dumps(js_error()),
        json.dumps(js_error(message="other", type="RangeError", context={"$where": "1"})),
        json.dumps(js_error(visitorId="v-held")),  # restricted: dropped, counted
        json.dumps(js_error(gpc=True)),
        json.dumps(js_error(context={"n": "__BIG__"})).replace('"__BIG__"', "1" + "0" * 30),
        json.dumps(js_error(message="__S__")).replace("__S__", "\\udc00"),
        json.dumps(js_error(context={"blob": "x" * 70_000})),
        json.dumps(js_error(stack="at a.js:1:1\n" * 2000)),
    ]
    acknowledged = 0
    for body in raw:
        answer = await fetch("/ingest/errors", "POST", body=body, headers={
            "Content-Type": "application/json", "X-Service-Key": tenant.api_key})
        assert answer.code in (200, 413, 422), answer
        acknowledged += answer.code == 200
    await queue.join()
    processed = deps.metrics.value("error_jobs_total", outcome="processed")
    dropped = deps.metrics.total("ingest_items_total", kind="error", outcome="dropped")
    assert acknowledged == 5  # three are refused at the door: too big, too large a number,
    # a lone surrogate; the long stack is within limits
    assert processed + dropped == acknowledged, (processed, dropped, acknowledged)
    for outcome in ("lost", "failed", "left_in_outbox"):
        assert deps.metrics.value("error_jobs_total", outcome=outcome) == 0, outcome
    assert await deps.store.collection("failed_jobs").count_documents({}) == 0
