"""The durable side of the Celery back-end: the error outbox and the relay that drains it.

On the Celery back-end an error is accepted once its job is in MongoDB (`ErrorOutbox.keep`),
not once it is in Redis: Redis may be down, may restart without its data, or may lose the one
message kombu had popped (BRPOP) but not yet recorded as unacknowledged. The worker deletes the
entry when the job is finished (`ErrorOutbox.release`, from `ErrorPipeline`), so an entry that
is still there after `relay_after` was lost or is late, and `OutboxRelay`, running in every
server process, sends it to Celery again. Re-sending is safe because a worker skips a job that
is no longer in the outbox and the aggregate counts each job id once (tasks/errors.py). See
docs/decisions.md, "Error pipeline", and docs/operations.md §3.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from config.background import PeriodicTask
from config.metrics import Metrics
from documents import error_outbox
from documents.store import Store

log = logging.getLogger(__name__)

#: The longest pause between two relays of one job. During a long backlog (workers stopped, Redis
#: up) every pending job is re-sent at this rate at most, instead of flooding Redis with copies;
#: it matches kombu's visibility timeout (tasks/celery_app.py), after which a job held by a dead
#: worker comes back anyway.
MAX_RELAY_INTERVAL = timedelta(hours=1)

DEPTH_METRIC = "error_outbox_depth"
DEPTH_HELP = ("Error jobs accepted and not yet finished (Celery back-end), as of the relay's "
              "last pass; the same for every process.")
SENDS_METRIC = "error_outbox_sends_total"
SENDS_HELP = ("Error jobs sent to Celery, by path (ingest, relay) and outcome (sent; "
              "broker_unavailable or left_for_relay: kept in the outbox for the relay).")

#: Set on a job kept in the outbox, so a worker knows that a missing entry means "finished".
KEPT_MARK = "inOutbox"

#: Sends a job to the broker; False when the broker could not take it (logged and counted).
Send = Callable[[dict[str, Any]], Awaitable[bool]]


class ErrorOutbox:
    """Accepted jobs in MongoDB until finished, and when each is due to be sent again."""

    def __init__(self, store: Store, *, relay_after_seconds: float) -> None:
        self.store = store
        self.relay_after = timedelta(seconds=relay_after_seconds)

    async def keep(self, job: dict[str, Any]) -> dict[str, Any]:
        """Keep the job durably, the acceptance itself; returns it marked as kept, to be sent.

        Store errors propagate.
        """
        kept = {**job, KEPT_MARK: True}
        now = datetime.now(UTC)
        await error_outbox.keep_job(self.store, kept, now=now, relay_after=now + self.relay_after)
        return kept

    async def finished(self, job: dict[str, Any]) -> bool:
        """True for a kept job whose entry is gone: a relayed or redelivered copy to skip.

        A job without the mark was sent by a server without the outbox (an older version during
        an upgrade) and is never taken for finished.
        """
        return bool(job.get(KEPT_MARK)) and not await error_outbox.holds_job(self.store,
                                                                             job["jobId"])

    async def release(self, job: dict[str, Any]) -> None:
        """Forget a finished job; a failure only means one harmless relay later, so it is logged."""
        try:
            await error_outbox.delete_job(self.store, job["jobId"])
        except Exception as exc:  # noqa: BLE001 - the job is done; a stale entry is re-sent, skipped
            log.warning("finished error job could not be removed from the outbox; it will be "
                        "relayed and skipped", extra={"jobId": job.get("jobId"),
                                                      "error": repr(exc)})

    async def claim_due(self) -> dict[str, Any] | None:
        """Claim the oldest entry due for a relay, and schedule the next one with backoff."""
        now = datetime.now(UTC)
        entry = await error_outbox.claim_due_job(self.store, now=now,
                                                 relay_after=now + self.relay_after)
        if entry is None:
            return None
        # Claimed with the plain delay, so no other process can take it meanwhile; now the
        # backoff: each relay waits twice as long as the one before, up to MAX_RELAY_INTERVAL.
        await error_outbox.postpone_job(self.store, entry["_id"],
                                        attempts=entry["relayAttempts"],
                                        relay_after=now + self.relay_delay(entry["relayAttempts"]))
        return entry

    def relay_delay(self, relays: int) -> timedelta:
        """How long after relay number `relays` the job is due again."""
        # min() before multiplying out: 2 ** relays grows without bound on a long outage.
        return min(self.relay_after * 2 ** min(relays, 32), MAX_RELAY_INTERVAL)

    async def depth(self) -> int:
        """Jobs kept and not finished."""
        return await error_outbox.count_jobs(self.store)


class OutboxRelay:
    """Sends due outbox entries to Celery again, every `interval_seconds`, until `close`."""

    def __init__(self, outbox: ErrorOutbox, send: Send, metrics: Metrics, *,
                 interval_seconds: float, batch: int = 500) -> None:
        self.outbox = outbox
        self.send = send
        self.metrics = metrics
        self.interval = interval_seconds
        self.batch = batch
        self.last_depth = 0
        self._last_sent = 0
        # A bad pass is logged and the next one retries: its entries stay due.
        self._loop = PeriodicTask("error-outbox-relay",
                                  [("error outbox relay pass", self._relay_and_measure)],
                                  pause=self._pause, logger=log)

    async def relay(self) -> int:
        """One pass: send up to `batch` due entries; returns how many were sent."""
        sent = 0
        while sent < self.batch:
            entry = await self.outbox.claim_due()
            if entry is None:
                break
            log.warning("relaying an error job that was not finished in time",
                        extra={"jobId": entry["_id"], "relayAttempts": entry["relayAttempts"]})
            if not await self.send(entry["job"]):
                # The broker is down: one probe per pass is enough. The other entries stay due
                # and go out on the first pass after it is back.
                break
            sent += 1
        return sent

    def start(self) -> None:
        """Relay in the background until `close`, and expose the outbox depth."""
        if not self._loop.running:
            self.metrics.gauge(DEPTH_METRIC, DEPTH_HELP, lambda: self.last_depth)
            self._loop.start()

    async def close(self) -> None:
        """Stop relaying."""
        await self._loop.close()

    async def _relay_and_measure(self) -> None:
        self._last_sent = 0
        self._last_sent = await self.relay()
        self.last_depth = await self.outbox.depth()

    def _pause(self) -> float:
        # A full batch means more are due (Redis just came back): go on without the pause,
        # which only exists so that an empty outbox is not polled constantly.
        return self.interval if self._last_sent < self.batch else 0
