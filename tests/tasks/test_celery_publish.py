"""Publishing error jobs with `send_task`: what a real Celery worker gets, what a failure leaves.

A real worker runs every job once with `acks_late`; jobs Redis did not take stay in the outbox
and are counted as not sent.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from celery import current_task

from config.metrics import Metrics
from tasks.celery_app import (
    TASK_NAME,
    CeleryErrorQueue,
    TaskConsumer,
    job_argsrepr,
    make_celery_app,
)
from tasks.errors import error_job
from tasks.outbox import SENDS_METRIC, ErrorOutbox
from tasks.queue import QUEUE_NAME, ErrorPipeline, RetryPolicy
from tests.support.app import Tenant
from tests.support.celery_worker import running_worker
from tests.support.redis_server import running_redis
from tests.tasks.support import RecordingNotifier, eventually, js_error

pytestmark = pytest.mark.slow

#: kombu's Redis transport keeps each delivered, unacknowledged message in this hash.
UNACKED_KEY = "unacked"


def _numbered_jobs(tenant: Tenant, count: int) -> list[dict[str, Any]]:
    # The type is part of the fingerprint, so each job makes its own error record.
    return [error_job(tenant.site_id, js_error(type=f"Publish{n}Error")) for n in range(count)]


async def test_a_published_job_is_a_celery_task_on_the_errors_ingest_queue(tenant: Tenant,
                                                                         redis_url: str):
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    queue = CeleryErrorQueue(make_celery_app(redis_url), metrics=Metrics())
    job = error_job(tenant.site_id, js_error())
    try:
        assert await queue.send(job, via="relay")
    finally:
        await queue.close()
    (message,) = [json.loads(raw) for raw in client.lrange(QUEUE_NAME, 0, -1)]
    headers = message["headers"]
    assert headers["task"] == TASK_NAME
    assert message["properties"]["delivery_info"]["routing_key"] == QUEUE_NAME
    assert json.loads(base64.b64decode(message["body"]))[0] == [job]
    # The header worker logs and monitors show names the job and carries none of the error.
    assert headers["argsrepr"] == job_argsrepr(job)
    assert job["error"]["message"] not in json.dumps(headers)


@dataclass(frozen=True)
class Delivery:
    """One run of the task in the worker, as the task saw it."""

    task_name: str
    task_id: str
    args: list[Any]
    routing_key: str
    unacknowledged_while_running: bool


@pytest.fixture
async def recording_worker(deps, redis_url: str) -> AsyncIterator[list[Delivery]]:
    """A real Celery worker (5 threads) on the real pipeline; yields each run of the task."""
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    loop = asyncio.get_running_loop()
    deliveries: list[Delivery] = []

    def unacknowledged(task_id: str) -> bool:
        return any(json.loads(entry)[0]["headers"]["id"] == task_id
                   for entry in client.hvals(UNACKED_KEY))

    def run(coroutine: Any) -> Any:
        # On the worker's task thread, while the task runs: with acks_late, its message is
        # still held unacknowledged.
        request = current_task.request
        deliveries.append(Delivery(current_task.name, request.id, list(request.args),
                                   request.delivery_info["routing_key"],
                                   unacknowledged(request.id)))
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=30)

    pipeline = ErrorPipeline(deps.store, notifier=RecordingNotifier(), bus=deps.bus,
                             metrics=deps.metrics, policy=RetryPolicy(base_delay=0.01))
    app = make_celery_app(redis_url, consumer=TaskConsumer(pipeline, run))
    assert app.tasks[TASK_NAME].acks_late is True
    async with running_worker(app):
        yield deliveries
    app.close()


async def test_a_real_worker_runs_every_job_of_a_published_batch_once(
        tenant: Tenant, deps, recording_worker: list[Delivery], redis_url: str):
    client = redis.Redis.from_url(redis_url)
    metrics = Metrics()
    queue = CeleryErrorQueue(make_celery_app(redis_url), metrics=metrics)
    jobs = _numbered_jobs(tenant, 60)
    try:
        assert await queue._send_batch(jobs[:50], via="ingest") == 50
        assert await queue.send(jobs[50], via="relay")
        assert await queue._send_batch(jobs[51:], via="ingest") == 9
    finally:
        await queue.close()
    assert metrics.value(SENDS_METRIC, via="ingest", outcome="sent") == 59
    assert metrics.value(SENDS_METRIC, via="relay", outcome="sent") == 1

    async def all_done_and_acknowledged() -> bool:
        return (len(recording_worker) >= len(jobs) and client.llen(QUEUE_NAME) == 0
                and client.hlen(UNACKED_KEY) == 0)

    await eventually(all_done_and_acknowledged)
    await asyncio.sleep(0.5)  # room for a second delivery of any job to show up
    by_job = {delivery.args[0]["jobId"]: delivery for delivery in recording_worker}
    assert len(recording_worker) == len(by_job) == len(jobs)
    for job in jobs:
        delivery = by_job[job["jobId"]]
        assert delivery.task_name == TASK_NAME and delivery.routing_key == QUEUE_NAME
        assert delivery.args == [job]
        # acks_late: acknowledged once the job ran (the hash is empty now), not before.
        assert delivery.unacknowledged_while_running, delivery
    assert await deps.store.collection("errors").count_documents({}) == len(jobs)
    assert await deps.store.collection("error_occurrences").count_documents({}) == len(jobs)


@dataclass
class OwnRedis:
    """A redis-server of the test's own, to fill up or to stop."""

    url: str
    stop: Callable[[], None]


@pytest.fixture
def own_redis() -> Iterator[OwnRedis]:
    """A redis-server for this test only, stopped at the end if the test has not stopped it."""
    with contextlib.ExitStack() as stack:
        yield OwnRedis(stack.enter_context(running_redis()), stack.close)


@pytest.fixture
async def kept_queue(own_redis: OwnRedis, store) -> AsyncIterator[CeleryErrorQueue]:
    """A queue with an outbox on the test store, publishing to `own_redis`; no relay runs."""
    queue = CeleryErrorQueue(make_celery_app(own_redis.url),
                             outbox=ErrorOutbox(store, relay_after_seconds=3600),
                             metrics=Metrics())
    yield queue
    await queue.close()


async def _kept(queue: CeleryErrorQueue, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    assert queue.outbox is not None
    return [await queue.outbox.keep(job) for job in jobs]


async def _still_kept(store, jobs: list[dict[str, Any]]) -> int:
    ids = [job["jobId"] for job in jobs]
    return await store.collection("error_outbox").count_documents({"_id": {"$in": ids}})


async def test_a_batch_redis_refused_counts_as_not_sent_and_stays_in_the_outbox(
        own_redis: OwnRedis, kept_queue: CeleryErrorQueue, tenant: Tenant, store, caplog):
    caplog.set_level(logging.WARNING)
    client = redis.Redis.from_url(own_redis.url)
    first = await _kept(kept_queue, _numbered_jobs(tenant, 1))
    assert await kept_queue._send_batch(first, via="ingest") == 1
    # Room for a few more messages only, not for the batch: Redis refuses the command (OOM).
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", client.info("memory")["used_memory"] + 50_000)
    batch = await _kept(kept_queue, _numbered_jobs(tenant, 200))

    sent = await kept_queue._send_batch(batch, via="ingest")

    assert 0 < sent < len(batch)  # those that fitted went out, in order, then Redis refused
    assert client.llen(QUEUE_NAME) == 1 + sent
    metrics = kept_queue.metrics
    assert metrics.value(SENDS_METRIC, via="ingest",
                         outcome="broker_unavailable") == len(batch) - sent
    assert metrics.value(SENDS_METRIC, via="ingest", outcome="sent") == 1 + sent
    # Every job of the batch waits for the relay, which sends again what was not sent.
    assert await _still_kept(store, batch) == len(batch)
    warnings = [r for r in caplog.records if "the jobs wait in the outbox" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].jobs == len(batch) - sent
    # The log gives Redis's reason, and none of the jobs the refused command carried.
    assert "maxmemory" in warnings[0].error
    assert not any(job["jobId"] in warnings[0].error for job in batch)


async def test_a_batch_after_redis_stopped_counts_as_not_sent_and_stays_in_the_outbox(
        own_redis: OwnRedis, kept_queue: CeleryErrorQueue, tenant: Tenant, store):
    sent_before = await _kept(kept_queue, _numbered_jobs(tenant, 20))
    assert await kept_queue._send_batch(sent_before, via="ingest") == 20
    own_redis.stop()  # under the queue's open connection
    batch = await _kept(kept_queue, _numbered_jobs(tenant, 30))

    assert await kept_queue._send_batch(batch, via="ingest") == 0
    assert not await kept_queue.send(batch[0], via="relay")

    metrics = kept_queue.metrics
    assert metrics.value(SENDS_METRIC, via="ingest", outcome="sent") == 20
    assert metrics.value(SENDS_METRIC, via="ingest", outcome="broker_unavailable") == 30
    assert metrics.value(SENDS_METRIC, via="relay", outcome="broker_unavailable") == 1
    assert await _still_kept(store, batch) == len(batch)
