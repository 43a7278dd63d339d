"""The errors-ingest queue port: one set of semantics, two back-ends.

`ErrorPipeline` holds the semantics both back-ends share: which failures are retried (temporary
store errors only), how long to wait (exponential backoff with jitter), how many attempts
(`max_retries` 3, so 4 in all) and where a job goes when it will not succeed (`failed_jobs`).
`InProcessErrorQueue` runs it on the embedded default with 5 worker tasks;
`tasks.celery_app.CeleryErrorQueue` runs the same pipeline in a Celery worker over Redis.

The endpoint never answers `ok: true` for an error it could not keep. On the embedded default
the queue is in memory like the store itself, and a full or stopped queue raises
`QueueUnavailable` (503 with Retry-After). On the Celery back-end a job is accepted once it is in
the MongoDB outbox (tasks/outbox.py): only a failure to write it there is a 503; a Redis that is
down only delays the job, which the relay sends once Redis is back.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from config.metrics import Metrics
from documents import error_records
from documents.store import Store, is_temporary_store_error
from errors import Unavailable
from privacy.ipaddr import own_hosts
from privacy.url_secrets import secret_parameters
from realtime.bus import EventBus
from tasks.errors import error_job, process_error
from tasks.notify_port import Notifier

if TYPE_CHECKING:
    from ingest.intake import VisitorIntake
    from tasks.outbox import ErrorOutbox

log = logging.getLogger(__name__)

QUEUE_NAME = "errors-ingest"
#: Spec §8: error worker concurrency.
WORKER_CONCURRENCY = 5

JOBS_METRIC = "error_jobs_total"
JOBS_HELP = ("Error-ingest job attempts, by outcome (processed, retried, failed, lost, "
             "left_in_outbox, already_finished).")
DEPTH_METRIC = "error_queue_depth"
DEPTH_HELP = "Error jobs waiting in the in-process queue (embedded default only)."


class QueueUnavailable(Unavailable):
    """The queue could not take the job; the caller must not acknowledge it."""

    default_code = "queue_unavailable"


class ErrorQueue(Protocol):
    """Where accepted errors wait for a worker."""

    async def enqueue(self, job: dict[str, Any]) -> None:
        """Keep the job durably enough to process it, or raise QueueUnavailable."""

    def start(self) -> None:
        """Begin processing (in-process) or connecting lazily (Celery)."""

    async def close(self) -> None:
        """Stop taking jobs and release resources."""


async def submit_error(queue: ErrorQueue, intake: VisitorIntake, site: dict[str, Any],
                       body: dict[str, Any]) -> bool:
    """Admit an error through the privacy gate and queue its job; False when it was dropped.

    The one enqueue path for /ingest/errors and /sdk/v1/{publicKey}/errors. Raises
    QueueUnavailable (counted) when the job cannot be queued, so nothing is acknowledged and lost.
    """
    decision = await intake.admit(site, "error", body)
    if not decision.allowed:
        return False
    try:
        # The device is described here, where the parser lives; the header itself is not kept.
        await queue.enqueue(error_job(site["_id"], body, device=intake.describe_device(body),
                                      own=own_hosts(site.get("allowedOrigins", ())),
                                      secrets=secret_parameters(site)))
    except QueueUnavailable:
        intake.count("error", "dropped", "queue_unavailable")
        raise
    intake.count("error", "queued")
    return True


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and jitter (spec §8: up to 3 retries)."""

    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 30.0
    rng: random.Random = field(default_factory=random.Random, compare=False)

    def delay(self, retry: int) -> float:
        """Seconds before retry number `retry` (1-based): half fixed, half random."""
        ceiling = min(self.max_delay, self.base_delay * 2 ** (retry - 1))
        # "Equal jitter": never less than half the backoff, and jobs that failed together
        # (a database blip) come back spread out instead of in one wave.
        return ceiling / 2 + self.rng.uniform(0, ceiling / 2)


@dataclass(frozen=True)
class Attempt:
    """What became of one attempt: done (processed or failed for good), or retry later."""

    retry_in: float | None = None


DONE = Attempt()


class ErrorPipeline:
    """Runs `process_error` for one job attempt and decides retry or failed-jobs.

    With an `outbox` (the Celery back-end) a job is skipped once it is no longer kept there, and
    its entry is released when the job is finished: processed, or stored in `failed_jobs`.
    """

    def __init__(self, store: Store, *, notifier: Notifier, bus: EventBus, metrics: Metrics,
                 policy: RetryPolicy | None = None, outbox: ErrorOutbox | None = None) -> None:
        self.store = store
        self.notifier = notifier
        self.bus = bus
        self.metrics = metrics
        self.policy = policy or RetryPolicy()
        self.outbox = outbox

    async def attempt(self, job: dict[str, Any], number: int) -> Attempt:
        """Attempt number `number` (1-based) of `job`."""
        try:
            if self.outbox is not None and await self.outbox.finished(job):
                # Skipping a copy here holds however many other jobs the aggregate has counted
                # since, which its bounded `recentJobIds` alone would not.
                self._count("already_finished")
                return DONE
            await process_error(self.store, job, notifier=self.notifier, bus=self.bus,
                                metrics=self.metrics)
        except Exception as exc:  # noqa: BLE001 - job boundary: every failure is kept or retried
            if is_temporary_store_error(exc) and number <= self.policy.max_retries:
                delay = self.policy.delay(number)
                self._count("retried")
                log.warning("error job hit a temporary store error; retrying",
                            extra={"jobId": job.get("jobId"), "attempt": number,
                                   "retryInSeconds": round(delay, 3), "error": repr(exc)})
                return Attempt(retry_in=delay)
            if not await self.fail(job, reason=_reason(exc), attempts=number):
                return DONE
        else:
            self._count("processed")
        # The one place both outcomes end, so an outbox entry never outlives a finished job.
        if self.outbox is not None:
            await self.outbox.release(job)
        return DONE

    async def run(self, job: dict[str, Any]) -> None:
        """Every attempt of `job`, waiting out the backoff in between (in-process back-end)."""
        number = 1
        while True:
            outcome = await self.attempt(job, number)
            if outcome.retry_in is None:
                return
            await asyncio.sleep(outcome.retry_in)
            number += 1

    async def fail(self, job: dict[str, Any], *, reason: str, attempts: int) -> bool:
        """Keep a job that will not succeed in `failed_jobs`; False (said loudly) if that fails."""
        log.error("error job failed", extra={"jobId": job.get("jobId"), "reason": reason,
                                             "attempts": attempts})
        try:
            await error_records.store_failed_job(self.store, job, queue=QUEUE_NAME, reason=reason,
                                                 attempts=attempts, now=datetime.now(UTC))
        except Exception:  # noqa: BLE001 - last resort: the job is kept elsewhere and counted
            if self.outbox is not None:
                # Not finished, so its outbox entry stays and the relay sends it again later.
                self._count("left_in_outbox")
                log.exception("failed error job could not be stored; it stays in the outbox",
                              extra={"jobId": job.get("jobId")})
            else:
                self._count("lost")
                log.exception("failed error job could not be stored",
                              extra={"jobId": job.get("jobId"), "siteId": job.get("siteId")})
            return False
        self._count("failed")
        return True

    def _count(self, outcome: str) -> None:
        self.metrics.count(JOBS_METRIC, JOBS_HELP, outcome=outcome)


def _reason(exc: BaseException) -> str:
    text = str(exc)
    if len(text) > 500:
        text = text[:500] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class InProcessErrorQueue:
    """The embedded default: a bounded asyncio queue drained by 5 concurrent worker tasks."""

    def __init__(self, pipeline: ErrorPipeline, *, concurrency: int = WORKER_CONCURRENCY,
                 capacity: int = 10_000, drain_seconds: float = 10.0) -> None:
        self.pipeline = pipeline
        self.concurrency = concurrency
        self._capacity = capacity
        self._drain_seconds = drain_seconds
        self._jobs: asyncio.Queue[dict[str, Any]] | None = None
        self._workers: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start the worker tasks on the running loop."""
        if self._jobs is not None:
            return
        self._jobs = asyncio.Queue(self._capacity)
        self.pipeline.metrics.gauge(DEPTH_METRIC, DEPTH_HELP, self.depth)
        self._workers = [
            asyncio.create_task(self._work(), name=f"{QUEUE_NAME}-{n}")
            for n in range(self.concurrency)
        ]

    async def enqueue(self, job: dict[str, Any]) -> None:
        """Queue the job, or refuse when the queue is full or stopped (back-pressure)."""
        if self._jobs is None:
            raise QueueUnavailable("the error queue is not running")
        try:
            self._jobs.put_nowait(job)
        except asyncio.QueueFull:
            raise QueueUnavailable("the error queue is full", retry_after=2) from None

    def depth(self) -> int:
        """Jobs waiting for a worker (not those being processed)."""
        return self._jobs.qsize() if self._jobs is not None else 0

    async def join(self) -> None:
        """Wait until every queued job has been processed (tests, shutdown)."""
        if self._jobs is not None:
            await self._jobs.join()

    async def close(self) -> None:
        """Drain what is queued (bounded), then stop the workers."""
        if self._jobs is None:
            return
        try:
            await asyncio.wait_for(self._jobs.join(), timeout=self._drain_seconds)
        except TimeoutError:
            log.error("error queue closed with jobs left",
                      extra={"remaining": self._jobs.qsize()})
        for worker in self._workers:
            worker.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)
        self._workers = []
        self._jobs = None

    async def _work(self) -> None:
        assert self._jobs is not None
        jobs = self._jobs
        while True:
            job = await jobs.get()
            try:
                await self.pipeline.run(job)
            except Exception:  # noqa: BLE001 - one broken job must not stop this worker
                log.exception("error worker crashed on a job", extra={"jobId": job.get("jobId")})
            finally:
                jobs.task_done()
