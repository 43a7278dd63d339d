"""The Celery back-end of the errors-ingest queue (REDIS_URL set).

`make_celery_app` builds the app; nothing Celery-related exists at import time. The server only
sends tasks (`CeleryErrorQueue`): it keeps each job in the MongoDB outbox first, which is the
acceptance and when the request is answered, then a sender task publishes it, and its
`OutboxRelay` sends again what a worker has not finished in time (tasks/outbox.py). The worker
registers the task with a `TaskConsumer` whose `run` executes the async pipeline on an event
loop that owns the store. In `visitor-service worker` that loop
lives in a `LoopThread`; in tests it is the test's own loop, so every store call stays on one
thread. The task is idempotent (see tasks/errors.py), which is why it may use `acks_late`: a job
redelivered after a worker died, or relayed from the outbox, is counted once.

Jobs are published with Celery's own `send_task`, which is synchronous, so the sender runs it
in a thread, a batch of jobs per hop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from celery import Celery
from kombu import Queue
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from config.background import stop_task
from config.metrics import Metrics
from documents.store import is_temporary_store_error
from tasks.outbox import SENDS_HELP, SENDS_METRIC, ErrorOutbox, OutboxRelay
from tasks.queue import (
    QUEUE_NAME,
    WORKER_CONCURRENCY,
    Attempt,
    ErrorPipeline,
    QueueUnavailable,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The explicit task name: messages already queued must still find their task after a refactor.
TASK_NAME = "visitor_service.errors.process_error"

#: Runs a coroutine to completion somewhere that owns the store, and returns its result.
CoroutineRunner = Callable[[Coroutine[Any, Any, Attempt]], Attempt]


@dataclass(frozen=True)
class TaskConsumer:
    """What a worker needs to run the task: the pipeline and where its coroutines run."""

    pipeline: ErrorPipeline
    run: CoroutineRunner


def make_celery_app(broker_url: str, *, consumer: TaskConsumer | None = None) -> Celery:
    """A Celery app for errors-ingest; with `consumer`, the processing task is registered."""
    app = Celery("visitor_service", broker=broker_url, set_as_current=False)
    app.conf.update(
        task_default_queue=QUEUE_NAME,
        task_queues=[Queue(QUEUE_NAME)],
        task_routes={TASK_NAME: {"queue": QUEUE_NAME}},
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        # With acks_late a worker holds at most one unacknowledged job per slot, so a crash
        # redelivers little; prefetching more would only delay other workers.
        worker_prefetch_multiplier=1,
        worker_concurrency=WORKER_CONCURRENCY,
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
        task_reject_on_worker_lost=True,
        # A job running when the broker connection drops cannot be acknowledged any more and
        # is delivered again; cancelling it at once (Celery 6's default) is safe because the
        # job is idempotent, and it is what this worker would otherwise warn about.
        worker_cancel_long_running_tasks_on_connection_loss=True,
        # With Redis down the job waits in the outbox for the relay; a request must not wait
        # through kombu's default retries first.
        task_publish_retry=False,
        broker_connection_retry_on_startup=True,
        broker_connection_timeout=2,
        broker_transport_options={"socket_connect_timeout": 2, "socket_timeout": 5,
                                  "visibility_timeout": 3600},
    )
    if consumer is not None:
        _register_task(app, consumer)
    return app


def _register_task(app: Celery, consumer: TaskConsumer) -> None:
    policy = consumer.pipeline.policy

    # shared=False: otherwise Celery keeps the task in a process-wide registry and adds it to
    # every app created later, each closing over another app's dependencies.
    @app.task(name=TASK_NAME, bind=True, acks_late=True, max_retries=policy.max_retries,
              ignore_result=True, shared=False)
    def process_error_job(task: Any, job: dict[str, Any]) -> None:
        """Attempt one error job; a temporary store error is retried through the broker."""
        outcome = consumer.run(consumer.pipeline.attempt(job, task.request.retries + 1))
        if outcome.retry_in is not None:
            raise task.retry(countdown=outcome.retry_in)


class CeleryErrorQueue:
    """The server's side of the Celery back-end: keeps jobs in the outbox, sends them to Redis.

    With an `outbox`, a job is accepted once it is kept there, and the request is answered then;
    a sender task publishes accepted jobs to Redis in batches, off the request path, and the
    relay sends again whatever that could not deliver. Without an `outbox` nothing is kept, so
    each job is sent during the request and an unreachable Redis is a refusal (503); the server
    always builds it with one (tasks/worker.py `open_error_queue`).
    """

    #: Jobs accepted and waiting for the sender; beyond this they wait for the relay instead.
    SEND_BACKLOG = 10_000
    #: Jobs published per hop to the sending thread.
    SEND_BATCH = 200
    #: The pause after a batch that was not full, so that the next one gathers more jobs.
    SEND_PAUSE_SECONDS = 0.005

    def __init__(self, app: Celery, *, outbox: ErrorOutbox | None = None,
                 metrics: Metrics | None = None, relay_interval_seconds: float = 5.0) -> None:
        self.app = app
        self.outbox = outbox
        self.metrics = metrics or Metrics()
        self.relay = (OutboxRelay(outbox, functools.partial(self.send, via="relay"), self.metrics,
                                  interval_seconds=relay_interval_seconds)
                      if outbox is not None else None)
        self._unsent: asyncio.Queue[dict[str, Any]] | None = None
        self._sender: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start sending and relaying kept jobs; the broker connection is made on first send."""
        if self.relay is not None:
            self.relay.start()
            if self._sender is None:
                self._unsent = asyncio.Queue(self.SEND_BACKLOG)
                self._sender = asyncio.create_task(self._send_accepted(), name="error-sender")

    async def enqueue(self, job: dict[str, Any]) -> None:
        """Keep the job in the outbox and hand it to the sender; QueueUnavailable if not kept."""
        if self.outbox is not None:
            try:
                job = await self.outbox.keep(job)
            except Exception as exc:
                if not is_temporary_store_error(exc):
                    raise
                log.warning("error outbox unreachable", extra={"jobId": job.get("jobId"),
                                                               "error": _redacted(exc)})
                raise QueueUnavailable("the error store is unreachable; retry later") from exc
            if self._unsent is not None:
                try:
                    self._unsent.put_nowait(job)
                except asyncio.QueueFull:
                    # Kept all the same: the relay sends it once it is due.
                    self.metrics.count(SENDS_METRIC, SENDS_HELP, via="ingest",
                                       outcome="left_for_relay")
                return
        if not await self.send(job, via="ingest") and self.outbox is None:
            raise QueueUnavailable("the error queue is unreachable; retry later")

    async def send(self, job: dict[str, Any], *, via: str) -> bool:
        """Publish the job to `errors-ingest`; False (logged, counted) when Redis cannot take it."""
        return await self._send_batch([job], via=via) == 1

    async def _send_batch(self, jobs: list[dict[str, Any]], *, via: str) -> int:
        """Publish `jobs` in order; how many went out before the broker refused one.

        A job that did not go out, or whose send failed after Redis may have stored it, stays
        in the outbox and the relay sends it again: a copy is harmless (the task is
        idempotent) where a job counted as sent and lost would not be.
        """
        sent, failure = await asyncio.to_thread(self._publish, jobs)
        if sent:
            self.metrics.count(SENDS_METRIC, SENDS_HELP, sent, via=via, outcome="sent")
        if failure is not None:
            log.warning("error queue unreachable; the jobs wait in the outbox",
                        extra={"jobs": len(jobs) - sent, "via": via,
                               "error": _described(failure)})
            self.metrics.count(SENDS_METRIC, SENDS_HELP, len(jobs) - sent, via=via,
                               outcome="broker_unavailable")
        return sent

    def _publish(self, jobs: list[dict[str, Any]]) -> tuple[int, BaseException | None]:
        """Send each job with `send_task` on one producer (in a thread); the count and any error."""
        sent = 0
        try:
            with self.app.producer_or_acquire() as producer:
                for job in jobs:
                    self.app.send_task(TASK_NAME, args=[job], queue=QUEUE_NAME,
                                       producer=producer, argsrepr=job_argsrepr(job))
                    sent += 1
        except (OperationalError, RedisError, OSError) as exc:
            return sent, exc
        return sent, None

    async def _send_accepted(self) -> None:
        assert self._unsent is not None
        unsent = self._unsent
        while True:
            batch = [await unsent.get()]
            while len(batch) < self.SEND_BATCH and not unsent.empty():
                batch.append(unsent.get_nowait())
            try:
                await self._send_batch(batch, via="ingest")
            except Exception:  # noqa: BLE001 - the jobs are kept; the relay sends them later
                log.exception("sending accepted error jobs failed; the relay will send them")
            finally:
                for _ in batch:
                    unsent.task_done()
            if len(batch) < self.SEND_BATCH:
                await asyncio.sleep(self.SEND_PAUSE_SECONDS)

    async def flush(self, within_seconds: float = 5.0) -> None:
        """Wait (bounded) until every accepted job has been handed to Redis or left for relay."""
        if self._unsent is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._unsent.join(), timeout=within_seconds)

    async def close(self) -> None:
        """Send what is waiting (bounded), stop the relay, release the broker connections."""
        await self.flush()
        await stop_task(self._sender)
        self._sender = self._unsent = None
        if self.relay is not None:
            await self.relay.close()
        await asyncio.to_thread(self.app.close)


def job_argsrepr(job: dict[str, Any]) -> str:
    """What the message's `argsrepr` header shows of a job: its id, never its error.

    Celery would put the repr of the whole job there, which worker logs, Flower and `celery
    inspect` display: the error's message, stack and context, kept outside the store's erasure
    and retention.
    """
    return f"[<error job {job.get('jobId')}>]"


def _described(exc: BaseException) -> str:
    """What a failed publish met, for the log: the error's class and Redis's own words."""
    # redis-py's repr of its errors is only their kind.
    return _without_password(f"{type(exc).__name__}: {exc}")


def _redacted(exc: BaseException) -> str:
    """`repr(exc)` without a password a broker or database URL in it may carry."""
    return _without_password(repr(exc))


def _without_password(text: str) -> str:
    """`text` with the password of any URL in it masked."""
    return re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", text)


class LoopThread:
    """An event loop on its own thread, for Celery task threads to run coroutines on."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="errors-ingest-loop",
                                        daemon=True)

    def start(self) -> None:
        """Start the loop."""
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coroutine` on the loop and wait for its result (from another thread)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self) -> None:
        """Stop the loop and wait for its thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()
