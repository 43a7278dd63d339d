"""The Celery back-end of the errors-ingest queue (REDIS_URL set).

`make_celery_app` builds the app; nothing Celery-related exists at import time. The server only
sends tasks (`CeleryErrorQueue`); the worker registers the task with a `TaskConsumer` whose
`run` executes the async pipeline on an event loop that owns the store. In `visitor-service
worker` that loop lives in a `LoopThread`; in tests it is the test's own loop, so every store
call stays on one thread. The task is idempotent (see tasks/errors.py), which is why it may use
`acks_late`: a job redelivered after a worker died is counted once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from celery import Celery
from kombu import Queue
from kombu.exceptions import KombuError, OperationalError
from redis.exceptions import RedisError

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
        # The endpoint answers 503 when Redis is down; it must find out at once, not after
        # kombu's default retries.
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
    """The server's side of the Celery back-end: sends jobs to `errors-ingest` on Redis."""

    def __init__(self, app: Celery) -> None:
        self.app = app

    def start(self) -> None:
        """Nothing to start: the broker connection is made on first send."""

    async def enqueue(self, job: dict[str, Any]) -> None:
        """Send the job; an unreachable Redis raises QueueUnavailable (the caller answers 503)."""
        try:
            # kombu publishes synchronously; off the loop so a slow Redis stalls no request.
            await asyncio.to_thread(self._send, job)
        except (OperationalError, KombuError, RedisError, OSError) as exc:
            log.warning("error queue unreachable", extra={"jobId": job.get("jobId"),
                                                          "error": repr(exc)})
            raise QueueUnavailable("the error queue is unreachable; retry later") from exc

    def _send(self, job: dict[str, Any]) -> None:
        self.app.send_task(TASK_NAME, args=[job], queue=QUEUE_NAME, retry=False)

    async def ping(self) -> None:
        """Readiness: the broker answers."""
        await asyncio.to_thread(self._ping)

    def _ping(self) -> None:
        with self.app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1)

    async def close(self) -> None:
        """Release the broker connections."""
        await asyncio.to_thread(self.app.close)


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
