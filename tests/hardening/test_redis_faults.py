"""Redis dies under the error pipeline: nothing acknowledged is lost, nothing is counted twice.

Faults on the real thing (redis-server, Celery, kombu), with the embedded store:

* Redis is killed (kill -9) while errors are being ingested. Every error is either answered
  `ok` or refused with 503 (the test counts both and checks the 503s against the metric; with
  MongoDB up there are none, because the outbox takes every job while Redis is down). Once Redis
  is back and the outbox relay has run, every accepted error is stored exactly once. Without
  the outbox this was only "at most once": kombu's Redis transport takes a message with BRPOP
  and only then records it in its `unacked` hash, so a kill between the two lost the message
  a worker had just fetched (observed in about one run in three). Now that job's outbox entry
  stays until a worker finishes it, and the relay sends it again.
* Redis is down before errors arrive: they are answered `ok`, kept in the outbox, and relayed
  once Redis is back.
* A worker is killed with kill -9 in the middle of a job. See the test's docstring for what is
  and is not shown.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import bootsteps
from celery.contrib.testing.worker import start_worker

import server
from ingest.intake import ITEMS_METRIC
from tasks.celery_app import TaskConsumer, make_celery_app
from tasks.errors import error_job, process_error
from tasks.outbox import SENDS_METRIC
from tasks.queue import ErrorPipeline, RetryPolicy
from tests.hardening.conftest import KillableRedis
from tests.support.app import Fetch, Tenant
from tests.tasks.support import RecordingNotifier, eventually, js_error, post_error

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

#: A visibility timeout short enough for a test: a message unacknowledged this long is
#: handed to another worker. Production keeps kombu's default of an hour (docs/operations.md).
TEST_VISIBILITY_SECONDS = 2

#: A relay delay short enough for a test: a job not finished this long after it was kept is
#: sent again. Production waits 30 s (OUTBOX_RELAY_AFTER_SECONDS).
TEST_RELAY_AFTER_SECONDS = 1


@pytest.fixture
def settings_env(settings_env: dict[str, str], killable_redis: KillableRedis) -> dict[str, str]:
    """The app sends errors to Celery over the killable redis-server."""
    return {**settings_env, "REDIS_URL": killable_redis.url, "ERROR_RETRY_BASE_SECONDS": "0.01"}


@pytest.fixture
def fast_relay_env(settings_env: dict[str, str]) -> dict[str, str]:
    """The outbox relay looks every 0.2 s and re-sends jobs unfinished after a second."""
    settings_env.update(OUTBOX_RELAY_AFTER_SECONDS=str(TEST_RELAY_AFTER_SECONDS),
                        OUTBOX_SCAN_SECONDS="0.2")
    return settings_env


def _consumer_app(deps: server.Deps, broker_url: str, loop: asyncio.AbstractEventLoop) -> Any:
    def run_on_test_loop(coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=30)

    pipeline = ErrorPipeline(deps.store, notifier=RecordingNotifier(), bus=deps.bus,
                             metrics=deps.metrics, policy=RetryPolicy(base_delay=0.01),
                             outbox=deps.queue.outbox)
    app = make_celery_app(broker_url, consumer=TaskConsumer(pipeline, run_on_test_loop))
    app.conf.broker_transport_options = {
        **app.conf.broker_transport_options, "visibility_timeout": TEST_VISIBILITY_SECONDS,
        # Scan for expired unacknowledged messages every second rather than kombu's default.
        "unacked_restore_interval": 1, "unacked_restore_throttle": 1}
    # Reconnect quickly after Redis comes back instead of Celery's growing pauses.
    app.conf.broker_connection_max_retries = None
    return app


class SupervisedWorker:
    """A real Celery worker (5 threads) that is started again when it has exited.

    kombu 5.7's consumer can exit with "Unrecoverable error" when Redis drops while it holds
    unacknowledged messages (closing the channel tries to restore them through a connection
    that is already gone). In production a process supervisor restarts `visitor-service
    worker`; `restart_if_exited` plays that part.
    """

    def __init__(self, deps: server.Deps, broker_url: str) -> None:
        self.deps = deps
        self.broker_url = broker_url
        self.restarts = 0
        self._running: Any = None
        self._app: Any = None
        self._worker: Any = None

    async def start(self) -> None:
        """Start a worker consuming errors-ingest, writing to the test's store."""
        self._app = _consumer_app(self.deps, self.broker_url, asyncio.get_running_loop())
        self._running = start_worker(self._app, pool="threads", concurrency=5,
                                     perform_ping_check=False, shutdown_timeout=20)
        # Entered and left off the loop: the worker's tasks need this loop meanwhile.
        self._worker = await asyncio.to_thread(self._running.__enter__)

    async def restart_if_exited(self) -> None:
        """Start a fresh worker if this one has stopped on its own."""
        if self._worker.blueprint.state != bootsteps.RUN:
            self.restarts += 1
            await self.stop()
            await self.start()

    async def stop(self) -> None:
        """Stop the worker and close its app."""
        await asyncio.to_thread(self._running.__exit__, None, None, None)
        self._app.close()


@pytest.fixture
async def celery_worker(deps: server.Deps, killable_redis: KillableRedis
                        ) -> AsyncIterator[SupervisedWorker]:
    """A supervised Celery worker on the killable Redis, writing to the test's store."""
    worker = SupervisedWorker(deps, killable_redis.url)
    await worker.start()
    yield worker
    await worker.stop()


def _numbered_error(n: int) -> dict[str, Any]:
    # The type is part of the fingerprint verbatim, so each error is its own record.
    return js_error(type=f"HardeningFault{n}Error", message="fault under a dying broker")


async def _records_by_type(deps: server.Deps) -> dict[str, int]:
    found: dict[str, int] = {}
    async for record in deps.store.collection("errors").find({}):
        found[record["type"]] = found.get(record["type"], 0) + record["occurrenceCount"]
    return found


async def _outbox_depth(deps: server.Deps) -> int:
    return await deps.store.collection("error_outbox").count_documents({})


def _all_delivered(deps: server.Deps, killable_redis: KillableRedis, worker: SupervisedWorker,
                   expected: int) -> Callable[[], Awaitable[bool]]:
    """Outbox empty, nothing waiting in Redis, and `expected` records stored."""
    broker = redis.Redis.from_url(killable_redis.url)

    async def check() -> bool:
        await worker.restart_if_exited()
        if await _outbox_depth(deps) or broker.llen("errors-ingest") or broker.hlen("unacked"):
            return False
        return len(await _records_by_type(deps)) >= expected

    return check


async def test_redis_killed_during_error_ingest_stores_every_accepted_error_exactly_once(
        fast_relay_env: dict[str, str], fetch: Fetch, tenant: Tenant, deps: server.Deps,
        killable_redis: KillableRedis, celery_worker: SupervisedWorker):
    total, batch_size, kill_after = 48, 4, 5
    codes: dict[int, int] = {}

    async def send(n: int) -> None:
        answer = await post_error(fetch, tenant, _numbered_error(n))
        codes[n] = answer.code

    numbers = list(range(total))
    batches = [numbers[i:i + batch_size] for i in range(0, total, batch_size)]
    for index, batch in enumerate(batches):
        sends = [send(n) for n in batch]
        if index == kill_after:
            # The kill lands while this batch is in flight.
            sends.append(asyncio.to_thread(killable_redis.kill))
        await asyncio.gather(*sends)

    accepted = sorted(n for n, code in codes.items() if code == 200)
    refused = sorted(n for n, code in codes.items() if code == 503)
    assert len(accepted) + len(refused) == total, codes
    assert deps.metrics.value(ITEMS_METRIC, kind="error", outcome="dropped",
                              reason="queue_unavailable") == len(refused)
    # MongoDB stayed up, so the outbox took every job: Redis being down refuses nothing.
    assert refused == [], codes
    assert deps.metrics.value(SENDS_METRIC, via="ingest", outcome="broker_unavailable") > 0, \
        "the kill came too late to test anything"

    await asyncio.to_thread(killable_redis.start)
    await eventually(_all_delivered(deps, killable_redis, celery_worker, len(accepted)),
                     within=90)
    await asyncio.sleep(TEST_VISIBILITY_SECONDS + 1)  # a late redelivery would show up by now
    stored = await _records_by_type(deps)
    accepted_types = {_numbered_error(n)["type"] for n in accepted}
    assert set(stored) == accepted_types, (
        f"lost: {sorted(accepted_types - set(stored))}, "
        f"refused but stored: {sorted(set(stored) - accepted_types)}")
    assert all(count == 1 for count in stored.values()), f"counted twice: {stored}"
    assert await _outbox_depth(deps) == 0
    # What never reached Redis came through the relay.
    assert deps.metrics.value(SENDS_METRIC, via="relay", outcome="sent") >= deps.metrics.value(
        SENDS_METRIC, via="ingest", outcome="broker_unavailable")


async def test_errors_accepted_while_redis_is_down_are_relayed_once_it_is_back(
        fast_relay_env: dict[str, str], fetch: Fetch, tenant: Tenant, deps: server.Deps,
        killable_redis: KillableRedis, celery_worker: SupervisedWorker):
    await asyncio.to_thread(killable_redis.kill)
    answers = [await post_error(fetch, tenant, _numbered_error(n)) for n in range(3)]
    assert [(a.code, a.json()) for a in answers] == [(200, {"ok": True})] * 3
    assert await _outbox_depth(deps) == 3

    # Relay passes while Redis is still down send nothing and leave every entry kept. (A send
    # to a dead broker takes its 2 s connect timeout, so wait for the relay's attempt.)
    async def relay_tried() -> bool:
        return deps.metrics.value(SENDS_METRIC, via="relay", outcome="broker_unavailable") >= 1

    await eventually(relay_tried, within=TEST_RELAY_AFTER_SECONDS + 10)
    assert await _outbox_depth(deps) == 3
    assert await _records_by_type(deps) == {}

    await asyncio.to_thread(killable_redis.start)
    await eventually(_all_delivered(deps, killable_redis, celery_worker, 3), within=60)
    assert await _records_by_type(deps) == {_numbered_error(n)["type"]: 1 for n in range(3)}
    assert deps.metrics.value(SENDS_METRIC, via="relay", outcome="sent") >= 3

    async def gauge_reads_empty() -> bool:
        return deps.metrics.gauge_value("error_outbox_depth") == 0

    await eventually(gauge_reads_empty)


STALLING_WORKER = """
import sys, time
from pathlib import Path
from tasks.celery_app import TaskConsumer, make_celery_app
from tasks.queue import ErrorPipeline
from config.metrics import Metrics

started = Path(sys.argv[2])

def stall(coroutine):
    # The job has begun: say so, then never finish (the test kills this process here).
    coroutine.close()
    started.write_text("started")
    time.sleep(3600)

pipeline = ErrorPipeline(None, notifier=None, bus=None, metrics=Metrics())
app = make_celery_app(sys.argv[1], consumer=TaskConsumer(pipeline, stall))
app.conf.broker_transport_options = {**app.conf.broker_transport_options,
                                     "visibility_timeout": int(sys.argv[3])}
app.worker_main(["worker", "--pool=solo", "--loglevel=WARNING", "--without-heartbeat",
                 "--without-gossip", "--without-mingle"])
"""


def _start_stalling_worker(broker_url: str, marker: Path) -> subprocess.Popen[bytes]:
    """`celery worker` in its own process, stalling in the first job it gets."""
    return subprocess.Popen(
        [sys.executable, "-c", STALLING_WORKER, broker_url, str(marker),
         str(TEST_VISIBILITY_SECONDS)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def test_a_worker_killed_mid_job_has_the_job_run_again_and_counted_once(
        tenant: Tenant, deps: server.Deps, killable_redis: KillableRedis, tmp_path: Path):
    """kill -9 of a Celery worker holding a job → another worker runs it → counted once.

    What is shown: a real worker process (`celery worker`, solo pool) receives the job over
    Redis and is killed with SIGKILL while the job runs; with `acks_late` the message was never
    acknowledged, so kombu's Redis transport hands it to a second worker once the visibility
    timeout passes, and the second worker processes it. Counted once: the killed worker may
    already have written before it died. The embedded store lives in the test process, so the
    killed process cannot write to it; the test plays that part by counting the same job once
    before the second worker runs it (what the killed worker would have done after counting and
    before releasing the job's outbox entry; had it released it, the second worker would skip
    the job as finished, which tests/tasks/test_outbox.py shows). Not shown: the same against
    a real MongoDB shared by both processes (run the suite with MONGODB_URI for the idempotency
    half on a replica set; the redelivery half is independent of the store).
    """
    job = error_job(tenant.site_id, js_error())
    await deps.queue.enqueue(job)
    marker = tmp_path / "started"
    worker = _start_stalling_worker(killable_redis.url, marker)
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert time.monotonic() < deadline, "the worker never started the job"
            assert worker.poll() is None, "the worker exited"
            await asyncio.sleep(0.05)
        unacked = redis.Redis.from_url(killable_redis.url).hlen("unacked")
        assert unacked == 1, "the job in progress must be held unacknowledged"
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()

    # The killed worker's count, had it got that far: after it, and before the job's outbox
    # entry was released (see the docstring).
    await process_error(deps.store, job, notifier=RecordingNotifier(), bus=deps.bus,
                        metrics=deps.metrics)
    processed_before = deps.metrics.value("error_jobs_total", outcome="processed")

    app = _consumer_app(deps, killable_redis.url, asyncio.get_running_loop())
    running = start_worker(app, pool="threads", concurrency=1, perform_ping_check=False,
                           shutdown_timeout=20)
    await asyncio.to_thread(running.__enter__)
    try:
        async def ran_again() -> bool:
            return deps.metrics.value("error_jobs_total", outcome="processed") > processed_before

        await eventually(ran_again, within=30)
    finally:
        await asyncio.to_thread(running.__exit__, None, None, None)
        app.close()
    record = await deps.store.collection("errors").find_one({})
    assert record["occurrenceCount"] == 1
    assert await deps.store.collection("error_occurrences").count_documents({}) == 1
    assert await _outbox_depth(deps) == 0
    client = redis.Redis.from_url(killable_redis.url)
    assert client.hlen("unacked") == 0 and client.llen("errors-ingest") == 0
