"""The error outbox and its relay, without Redis: claims, backoff, releases and skipped copies."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import documents
from config.metrics import Metrics
from documents import error_outbox
from tasks.errors import error_job
from tasks.outbox import KEPT_MARK, MAX_RELAY_INTERVAL, ErrorOutbox, OutboxRelay
from tasks.queue import ErrorPipeline, RetryPolicy
from tests.support.app import Tenant
from tests.tasks.support import RecordingNotifier, js_error


@pytest.fixture
def outbox(store) -> ErrorOutbox:
    """An outbox on the test store with a 30-second relay delay."""
    return ErrorOutbox(store, relay_after_seconds=30)


@pytest.fixture
def pipeline(deps, outbox: ErrorOutbox) -> ErrorPipeline:
    """The Celery back-end's pipeline: it skips finished jobs and releases their entries."""
    return ErrorPipeline(deps.store, notifier=RecordingNotifier(), bus=deps.bus,
                         metrics=deps.metrics, policy=RetryPolicy(base_delay=0.01),
                         outbox=outbox)


class Broker:
    """Records what the relay sends; `up` says whether it takes it."""

    def __init__(self, *, up: bool = True) -> None:
        self.up = up
        self.sent: list[str] = []
        self.refused = 0

    async def send(self, job: dict[str, Any]) -> bool:
        """Take the job, or refuse it like an unreachable Redis."""
        if not self.up:
            self.refused += 1
            return False
        self.sent.append(job["jobId"])
        return True


async def _make_due(store, *job_ids: str) -> None:
    past = datetime.now(UTC) - timedelta(seconds=1)
    await store.collection("error_outbox").update_many(
        {"_id": {"$in": list(job_ids)}} if job_ids else {}, {"$set": {"relayAfter": past}})


async def _kept_jobs(outbox: ErrorOutbox, tenant: Tenant, count: int) -> list[dict[str, Any]]:
    """Jobs as the server keeps and sends them."""
    return [await outbox.keep(error_job(tenant.site_id, js_error())) for _ in range(count)]


async def test_a_kept_job_is_not_due_for_a_relay_before_the_delay(
        outbox: ErrorOutbox, tenant: Tenant, deps):
    (job,) = await _kept_jobs(outbox, tenant, 1)
    entry = await deps.store.collection("error_outbox").find_one({"_id": job["jobId"]})
    assert entry["job"] == job and entry["relayAttempts"] == 0
    assert entry["relayAfter"] - entry["receivedAt"] == timedelta(seconds=30)
    assert await outbox.claim_due() is None
    assert await outbox.depth() == 1


async def test_several_relays_claim_each_due_entry_once_per_period(
        outbox: ErrorOutbox, tenant: Tenant, store):
    jobs = await _kept_jobs(outbox, tenant, 40)
    await _make_due(store)
    # Two server processes relaying side by side, each with its own outbox object.
    brokers = [Broker(), Broker()]
    relays = [OutboxRelay(ErrorOutbox(store, relay_after_seconds=30), broker.send, Metrics(),
                          interval_seconds=1)
              for broker in brokers]
    counts = await asyncio.gather(*(relay.relay() for relay in relays),
                                  *(relay.relay() for relay in relays))
    sent = brokers[0].sent + brokers[1].sent
    assert sum(counts) == 40
    assert sorted(sent) == sorted(job["jobId"] for job in jobs), "an entry was sent twice"
    assert await asyncio.gather(*(relay.relay() for relay in relays)) == [0, 0]


async def test_each_relay_of_a_job_waits_twice_as_long_as_the_one_before(
        outbox: ErrorOutbox, tenant: Tenant, store):
    (job,) = await _kept_jobs(outbox, tenant, 1)
    for relays, wait in ((1, 60), (2, 120), (3, 240)):
        await _make_due(store)
        entry = await outbox.claim_due()
        assert entry is not None and entry["relayAttempts"] == relays
        stored = await store.collection("error_outbox").find_one({"_id": job["jobId"]})
        assert stored["relayAfter"] - stored["relayedAt"] == timedelta(seconds=wait)
    assert outbox.relay_delay(40) == MAX_RELAY_INTERVAL


async def test_a_relay_pass_stops_at_the_first_refusal_and_leaves_every_entry_kept(
        outbox: ErrorOutbox, tenant: Tenant, store, deps):
    await _kept_jobs(outbox, tenant, 5)
    await _make_due(store)
    broker = Broker(up=False)
    relay = OutboxRelay(outbox, broker.send, deps.metrics, interval_seconds=1)
    assert await relay.relay() == 0
    assert broker.refused == 1, "one probe per pass while the broker is down"
    assert await outbox.depth() == 5
    broker.up = True
    assert await relay.relay() == 4  # the probed entry waits for its backoff
    assert await outbox.depth() == 5, "sending is not finishing: entries go when processed"


async def test_the_relay_loop_sends_overdue_jobs_and_exposes_the_outbox_depth(
        outbox: ErrorOutbox, tenant: Tenant, store, deps):
    jobs = await _kept_jobs(outbox, tenant, 3)
    await _make_due(store, jobs[0]["jobId"])
    broker = Broker()
    relay = OutboxRelay(outbox, broker.send, deps.metrics, interval_seconds=0.01)
    relay.start()
    try:
        for _ in range(500):
            if broker.sent and deps.metrics.gauge_value("error_outbox_depth") == 3:
                break
            await asyncio.sleep(0.01)
    finally:
        await relay.close()
    assert broker.sent == [jobs[0]["jobId"]]
    assert "# TYPE error_outbox_depth gauge\nerror_outbox_depth 3\n" in deps.metrics.render()


async def test_a_processed_job_releases_its_entry_and_a_later_copy_is_skipped(
        pipeline: ErrorPipeline, outbox: ErrorOutbox, tenant: Tenant, deps):
    (job,) = await _kept_jobs(outbox, tenant, 1)
    await pipeline.run(job)
    assert await outbox.depth() == 0
    await pipeline.run(job)  # a relayed or redelivered copy
    record = await deps.store.collection("errors").find_one({})
    assert record["occurrenceCount"] == 1
    assert deps.metrics.value("error_jobs_total", outcome="processed") == 1
    assert deps.metrics.value("error_jobs_total", outcome="already_finished") == 1


async def test_a_copy_of_a_job_counted_long_ago_is_skipped_beyond_the_recent_jobs_window(
        pipeline: ErrorPipeline, outbox: ErrorOutbox, tenant: Tenant, deps, monkeypatch):
    monkeypatch.setattr("documents.error_records.RECENT_JOBS", 3)
    jobs = await _kept_jobs(outbox, tenant, 5)
    for job in jobs:
        await pipeline.run(job)
    await pipeline.run(jobs[0])  # its id has left recentJobIds; the outbox still knows
    record = await deps.store.collection("errors").find_one({})
    assert record["occurrenceCount"] == 5 and jobs[0]["jobId"] not in record["recentJobIds"]


async def test_a_job_that_fails_for_good_releases_its_entry_once_stored_in_failed_jobs(
        pipeline: ErrorPipeline, outbox: ErrorOutbox, tenant: Tenant, deps, faults):
    faults.fail("errors", "find_one_and_update", error=lambda: ValueError("bad document"))
    (job,) = await _kept_jobs(outbox, tenant, 1)
    await pipeline.run(job)
    assert await deps.store.collection("failed_jobs").count_documents({"_id": job["jobId"]}) == 1
    assert await outbox.depth() == 0


async def test_a_failed_job_that_cannot_be_stored_stays_in_the_outbox_for_the_relay(
        pipeline: ErrorPipeline, outbox: ErrorOutbox, tenant: Tenant, deps, faults):
    faults.fail("errors", "find_one_and_update", error=lambda: ValueError("bad document"))
    faults.fail("failed_jobs", "update_one")
    (job,) = await _kept_jobs(outbox, tenant, 1)
    await pipeline.run(job)
    assert await outbox.depth() == 1
    assert deps.metrics.value("error_jobs_total", outcome="left_in_outbox") == 1
    assert deps.metrics.value("error_jobs_total", outcome="lost") == 0


async def test_a_failed_release_is_logged_and_the_stale_copy_is_counted_once(
        pipeline: ErrorPipeline, outbox: ErrorOutbox, tenant: Tenant, deps, faults, caplog):
    caplog.set_level(logging.WARNING)
    faults.fail("error_outbox", "delete_one")
    (job,) = await _kept_jobs(outbox, tenant, 1)
    await pipeline.run(job)
    assert "could not be removed from the outbox" in caplog.text
    assert await outbox.depth() == 1
    await pipeline.run(job)  # relayed because its entry stayed
    record = await deps.store.collection("errors").find_one({})
    assert record["occurrenceCount"] == 1
    assert await outbox.depth() == 0


async def test_a_job_sent_without_the_outbox_is_processed_not_taken_for_finished(
        pipeline: ErrorPipeline, tenant: Tenant, deps):
    # What a server of the previous version puts on the queue during an upgrade.
    job = error_job(tenant.site_id, js_error())
    assert KEPT_MARK not in job
    await pipeline.run(job)
    record = await deps.store.collection("errors").find_one({})
    assert record is not None and record["occurrenceCount"] == 1
    assert deps.metrics.value("error_jobs_total", outcome="already_finished") == 0


async def test_start_up_ensures_the_index_the_relay_claims_by():
    assert error_outbox.INDEXES[0] in documents.declared_indexes()
    assert error_outbox.INDEXES[0].keys == (("relayAfter", 1),)
