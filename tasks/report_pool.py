"""The threads that work out dashboard reports, so that no report holds the event loop (issue 39
point 4; decision "Issue 39: reports that never freeze the server" in docs/decisions.md).

A report reads on the loop (the store's calls are async) and hands the computation over what it
read to `ReportPool.limited()`, its offload: that runs on one of a few threads of the pool's own
and answers within the report's time limit (REPORT_TIME_LIMIT_SECONDS, from when the report
started), or raises Unavailable, a 503 with Retry-After. So does a report that finds every
thread taken and as many reports already waiting for one (REPORT_THREADS each).

A Python thread cannot be stopped from outside, so the computation is given a checkpoint to call
as it goes (`derived.funnel_reports.Checkpoint`): past the limit it raises, and the thread is free
again within one step of the computation, not when it would have finished.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from config.metrics import Metrics
from errors import Unavailable

T = TypeVar("T")
#: What a computation calls as it goes; raises ReportTimeUp once its report's time is up.
Checkpoint = Callable[[], None]


class ReportTimeUp(Exception):
    """Raised by a checkpoint on a report thread once the report's time limit has passed."""


class ReportBudget:
    """When one report's time is up; its `check` is the computation's checkpoint."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def expire(self) -> None:
        """End the report's time now (the pool is closing)."""
        self.deadline = -math.inf

    def check(self) -> None:
        """Raise ReportTimeUp once the report's time is up."""
        if time.monotonic() > self.deadline:
            raise ReportTimeUp


class ReportPool:
    """A bounded pool of report threads, built once per process (server.build_deps)."""

    def __init__(self, threads: int, time_limit_seconds: float, metrics: Metrics) -> None:
        self.time_limit_seconds = time_limit_seconds
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="report")
        # Reports running or waiting for a thread; beyond this a report is refused at once
        # rather than waiting out its whole time limit in a queue.
        self._capacity = 2 * threads
        self._budgets: set[ReportBudget] = set()
        self._metrics = metrics
        metrics.gauge("reports_in_progress", "Reports on or waiting for a report thread.",
                      lambda: float(len(self._budgets)))

    @property
    def retry_after(self) -> int:
        """Seconds after which a thread is free again: no report holds one longer."""
        return max(1, math.ceil(self.time_limit_seconds))

    def limited(self) -> Callable[[Callable[[Checkpoint], Any]], Awaitable[Any]]:
        """The offload of one report, whose time limit runs from now:
        `await offload(lambda check: ...)` works the computation out on a report thread."""
        budget = ReportBudget(time.monotonic() + self.time_limit_seconds)

        async def offload(compute: Callable[[Checkpoint], T]) -> T:
            return await self._run(budget, compute)

        return offload

    async def _run(self, budget: ReportBudget, compute: Callable[[Checkpoint], T]) -> T:
        if len(self._budgets) >= self._capacity:
            self._refused("busy")
            raise Unavailable("Every report thread is busy; ask again shortly.",
                              retry_after=self.retry_after, code="reports_busy")
        if budget.remaining() <= 0:
            raise self._over_time()
        self._budgets.add(budget)
        future = asyncio.get_running_loop().run_in_executor(self._executor, _checked, budget,
                                                            compute)
        future.add_done_callback(lambda done: self._finished(budget, done))
        try:
            # Shielded: when the wait ends first, the computation goes on to its next
            # checkpoint, and the thread is counted as taken until it has.
            return await asyncio.wait_for(asyncio.shield(future), budget.remaining())
        except (TimeoutError, ReportTimeUp):
            raise self._over_time() from None

    def _refused(self, reason: str) -> None:
        self._metrics.count("report_refusals_total",
                            "Reports answered 503: `busy`, every report thread taken and as "
                            "many reports waiting for one; `time_limit`, not worked out within "
                            "REPORT_TIME_LIMIT_SECONDS.", reason=reason)

    def _over_time(self) -> Unavailable:
        self._refused("time_limit")
        return Unavailable(
            f"The report takes longer than {self.time_limit_seconds:g} s to work out; a "
            "shorter date range or simpler page patterns take less.",
            retry_after=self.retry_after, code="report_time_limit")

    def _finished(self, budget: ReportBudget, future: asyncio.Future[Any]) -> None:
        self._budgets.discard(budget)
        # Read, so that a computation nobody waits for any more is not reported as an
        # exception never retrieved; what it raised was answered (503) or is the waiter's.
        if not future.cancelled():
            future.exception()

    def close(self) -> None:
        """End every report's time and let the threads go as each reaches a checkpoint."""
        for budget in self._budgets:
            budget.expire()
        self._executor.shutdown(wait=False, cancel_futures=True)


def _checked(budget: ReportBudget, compute: Callable[[Checkpoint], T]) -> T:
    """On a report thread: nothing when the time is already up, else the computation."""
    budget.check()
    return compute(budget.check)
