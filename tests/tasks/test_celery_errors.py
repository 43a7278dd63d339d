"""The Celery back-end for real: a redis-server, a Celery worker, and the test's own store.

The worker's task threads hand each job's coroutine to the test's event loop, which owns the
embedded store, so every store call stays on one thread (see tasks/celery_app.py). Every job
goes through the MongoDB outbox first (tasks/outbox.py); Redis faults proper are in
tests/hardening/test_redis_faults.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis

from tasks.celery_app import TASK_NAME, CeleryErrorQueue, TaskConsumer, make_celery_app
from tasks.errors import error_job
from tasks.outbox import KEPT_MARK
from tasks.queue import QUEUE_NAME, ErrorPipeline, RetryPolicy
from tests.support.app import Fetch, Tenant, all_documents_text
from tests.support.celery_worker import running_worker
from tests.support.processes import free_port
from tests.tasks.support import (
    ANONYMISED_IP,
    FULL_IP,
    RecordingNotifier,
    eventually,
    js_error,
    post_error,
)

pytestmark = pytest.mark.slow

BROKER_PASSWORD = "broker-s3cret"


@pytest.fixture
def settings_env(settings_env: dict[str, str], redis_url: str) -> dict[str, str]:
    """The app sends errors to Celery over the real redis-server, which starts empty."""
    redis.Redis.from_url(redis_url).flushdb()
    return {**settings_env, "REDIS_URL": redis_url, "ERROR_RETRY_BASE_SECONDS": "0.01"}


@pytest.fixture
def notifier() -> RecordingNotifier:
    """Notifications, recorded."""
    return RecordingNotifier()


@pytest.fixture
async def celery_worker(deps, redis_url: str, notifier: RecordingNotifier
                        ) -> AsyncIterator[Any]:
    """A real Celery worker (5 threads) consuming errors-ingest, writing to the test store."""
    loop = asyncio.get_running_loop()

    def run_on_test_loop(coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=30)

    pipeline = ErrorPipeline(deps.store, notifier=notifier, bus=deps.bus, metrics=deps.metrics,
                             policy=RetryPolicy(base_delay=0.01), outbox=deps.queue.outbox)
    app = make_celery_app(redis_url, consumer=TaskConsumer(pipeline, run_on_test_loop))
    async with running_worker(app) as worker:
        yield worker
    app.close()


async def _count(deps, collection: str, filter_: dict[str, Any] | None = None) -> int:
    return await deps.store.collection(collection).count_documents(filter_ or {})


async def test_the_server_uses_celery_behind_the_outbox_when_redis_url_is_set(deps):
    assert isinstance(deps.queue, CeleryErrorQueue)
    assert deps.queue.outbox is not None and deps.queue.relay is not None
    task_options = make_celery_app("redis://127.0.0.1:1/0", consumer=TaskConsumer(
        ErrorPipeline(deps.store, notifier=RecordingNotifier(), bus=deps.bus,
                      metrics=deps.metrics), lambda coroutine: coroutine.close())).tasks[TASK_NAME]
    assert task_options.acks_late is True and task_options.max_retries == 3
    assert deps.queue.app.conf.worker_concurrency == 5


async def test_a_real_celery_worker_processes_an_ingested_error(
        fetch: Fetch, tenant: Tenant, deps, celery_worker, notifier):
    answer = await post_error(fetch, tenant)
    assert answer.code == 200 and answer.json() == {"ok": True}

    async def processed() -> bool:
        # The session link is written before the error's count (tasks/errors.py): wait for
        # the count, which comes last.
        return (await _count(deps, "error_sessions") == 1
                and await _count(deps, "errors") == 1)

    await eventually(processed)
    record = await deps.store.collection("errors").find_one({})
    assert record["occurrenceCount"] == 1 and record["ipAddress"] == ANONYMISED_IP
    assert await _count(deps, "error_occurrences", {"visitorId": "v-1"}) == 1
    await eventually(lambda: _true(len(notifier.calls) == 1))
    assert notifier.calls[0][2] is False
    await eventually(_outbox_empty(deps))


async def _true(value: bool) -> bool:
    return value


def _outbox_empty(deps) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await _count(deps, "error_outbox") == 0

    return check


async def test_identical_errors_on_the_celery_worker_make_one_record(
        tenant: Tenant, deps, celery_worker, notifier):
    jobs = [error_job(tenant.site_id, js_error()) for _ in range(60)]
    await asyncio.gather(*(deps.queue.enqueue(job) for job in jobs))

    async def all_counted() -> bool:
        record = await deps.store.collection("errors").find_one({})
        return record is not None and record["occurrenceCount"] == 60

    await eventually(all_counted)
    assert await _count(deps, "errors") == 1
    assert await _count(deps, "error_occurrences") == 60
    assert len(notifier.calls) == 1


async def test_celery_retries_a_temporary_failure_and_counts_once(
        tenant: Tenant, deps, celery_worker, faults):
    faults.record_calls = True
    faults.fail("errors", "find_one_and_update", times=2)
    await deps.queue.enqueue(error_job(tenant.site_id, js_error()))

    async def counted() -> bool:
        return await _count(deps, "errors", {"occurrenceCount": 1}) == 1

    await eventually(counted)
    assert faults.calls.count(("errors", "find_one_and_update")) == 3
    assert await _count(deps, "failed_jobs") == 0


async def test_celery_puts_a_job_in_failed_jobs_after_exactly_four_attempts(
        tenant: Tenant, deps, celery_worker, faults):
    faults.record_calls = True
    faults.fail("errors", "find_one_and_update", times=100)
    job = error_job(tenant.site_id, js_error())
    await deps.queue.enqueue(job)

    async def failed() -> bool:
        return await _count(deps, "failed_jobs") == 1

    await eventually(failed)
    stored = await deps.store.collection("failed_jobs").find_one({"_id": job["jobId"]})
    assert stored["attempts"] == 4
    assert faults.calls.count(("errors", "find_one_and_update")) == 4
    await eventually(_outbox_empty(deps))


async def test_the_queued_message_in_redis_carries_no_full_ip_address(
        fetch: Fetch, tenant: Tenant, deps, redis_url: str):
    answer = await post_error(fetch, tenant)
    assert answer.json() == {"ok": True}
    # The answer follows the outbox insert; the sender publishes to Redis just after it.
    await deps.queue.flush()
    client = redis.Redis.from_url(redis_url)
    messages = client.lrange(QUEUE_NAME, 0, -1)
    assert len(messages) == 1
    envelope = json.loads(messages[0])
    body = base64.b64decode(envelope["body"]).decode()
    assert ANONYMISED_IP in body
    everything = [*messages, body.encode()]
    for key in client.keys("*"):
        kind = client.type(key)
        if kind == b"string":
            everything.append(client.get(key))
        elif kind == b"list":
            everything.extend(client.lrange(key, 0, -1))
        elif kind == b"hash":
            everything.extend(client.hgetall(key).values())
    assert all(FULL_IP.encode() not in value for value in everything)
    assert FULL_IP not in await all_documents_text(deps.store)


async def test_a_job_sent_twice_counts_once_whether_the_copies_overlap_or_not(
        tenant: Tenant, deps, celery_worker, notifier):
    overlapping = error_job(tenant.site_id, js_error())
    await deps.queue.enqueue(overlapping)
    # The job as the relay sends it (marked as kept), at once: the copies may overlap.
    assert await deps.queue.send({**overlapping, KEPT_MARK: True}, via="relay")
    await eventually(_outbox_empty(deps))
    later = error_job(tenant.site_id, js_error())
    await deps.queue.enqueue(later)
    await eventually(_outbox_empty(deps))
    # A relay of a job already finished (its worker deleted the entry after the relay's claim).
    assert await deps.queue.send({**later, KEPT_MARK: True}, via="relay")

    async def copies_done() -> bool:
        return deps.metrics.total("error_jobs_total") >= 4

    await eventually(copies_done)
    record = await deps.store.collection("errors").find_one({})
    assert record["occurrenceCount"] == 2
    assert await _count(deps, "error_occurrences") == 2
    assert deps.metrics.value("error_jobs_total", outcome="processed") + deps.metrics.value(
        "error_jobs_total", outcome="already_finished") == 4
    assert deps.metrics.value("error_jobs_total", outcome="already_finished") >= 1


async def test_an_outbox_that_cannot_take_the_job_answers_503_and_nothing_is_queued(
        fetch: Fetch, tenant: Tenant, deps, faults, redis_url: str):
    faults.fail("error_outbox", "insert_one")
    answer = await post_error(fetch, tenant)
    assert answer.code == 503, answer
    assert int(answer.headers["Retry-After"]) > 0
    assert answer.error_code == "queue_unavailable"
    assert redis.Redis.from_url(redis_url).llen(QUEUE_NAME) == 0
    for collection in ("error_outbox", "errors", "error_occurrences"):
        assert await _count(deps, collection) == 0, collection
    assert deps.metrics.value("ingest_items_total", kind="error", outcome="dropped",
                              reason="queue_unavailable") == 1
    assert (await post_error(fetch, tenant)).json() == {"ok": True}  # the fault was one write


@pytest.fixture
def unreachable_redis_env(settings_env: dict[str, str]) -> dict[str, str]:
    """REDIS_URL, with a password, pointing at a port nobody listens on."""
    settings_env["REDIS_URL"] = f"redis://:{BROKER_PASSWORD}@127.0.0.1:{free_port()}/0"
    return settings_env


async def test_an_unreachable_redis_still_answers_ok_and_keeps_the_job_in_the_outbox(
        unreachable_redis_env, fetch: Fetch, tenant: Tenant, deps, caplog):
    caplog.set_level(logging.WARNING)
    answer = await post_error(fetch, tenant)
    assert answer.code == 200 and answer.json() == {"ok": True}, answer
    kept = await deps.store.collection("error_outbox").find({}).to_list(None)
    assert len(kept) == 1 and kept[0]["job"]["ipAddress"] == ANONYMISED_IP
    assert await _count(deps, "errors") == 0
    # The answer came first; the send to Redis follows it. A refused connection costs kombu
    # two seconds of retries, which a loaded CI machine stretched past flush's usual 5 s.
    await deps.queue.flush(within_seconds=60)
    assert deps.metrics.value("error_outbox_sends_total", via="ingest",
                              outcome="broker_unavailable") == 1
    assert deps.metrics.value("ingest_items_total", kind="error", outcome="queued",
                              reason="") == 1
    warnings = [r for r in caplog.records if "the jobs wait in the outbox" in r.getMessage()]
    assert len(warnings) == 1
    assert BROKER_PASSWORD not in repr(vars(warnings[0]))
