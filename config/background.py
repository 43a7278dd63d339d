"""The service's long-running asyncio tasks: `PeriodicTask`, the one shape of every background
loop (segment sweeper, outbox relay, heatmap renderer, figure derivation, live session sweep),
and `stop_task`, which stops any task, the bus subscription included.

A new loop is a `PeriodicTask` its owner builds in `__init__` and starts and closes in its own
`start` and `close` (docs/architecture.md, "Where a background loop goes"):

    self._loop = PeriodicTask("retention-purge", [("retention purge", self.purge)],
                              pause=lambda: self.interval, logger=log)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

log = logging.getLogger(__name__)

#: One step of a pass: awaited, its result ignored.
Step = Callable[[], Awaitable[object]]

#: How long one cancellation may take to unwind before it is repeated.
CANCEL_WAIT_SECONDS = 1.0
#: Cancellations sent before giving up on a task that keeps swallowing them.
CANCEL_ATTEMPTS = 5


async def stop_task(task: asyncio.Task[None] | None) -> None:
    """Cancel `task` and wait until it has finished unwinding; None is a no-op.

    A client library that catches CancelledError somewhere inside (redis-py's connection
    handling has done so) would leave a single cancel-and-await waiting forever, and shutdown
    with it; so the cancellation is repeated, and after CANCEL_ATTEMPTS the task is left behind
    with an error in the log rather than hanging the process. A failure of the task other than
    the cancellation still propagates.
    """
    if task is None:
        return
    for _ in range(CANCEL_ATTEMPTS):
        if task.done():
            break
        task.cancel()
        await asyncio.wait({task}, timeout=CANCEL_WAIT_SECONDS)
    if not task.done():
        log.error("a background task ignored cancellation; leaving it behind",
                  extra={"task": task.get_name()})
        return
    if not task.cancelled() and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]


class PeriodicTask:
    """Runs its steps one after the other, then pauses, over and over, from `start` to `close`.

    A step that raises is logged under its name ("<step> failed") and the pass goes on with the
    next step: the loop outlives one bad pass, and the next pass is the retry (what the steps
    work on is leased or stays due, so nothing is lost). `pause` is the seconds to wait after a
    pass, or a function asked after each pass (so a changed interval, or a backlog that wants
    no pause, takes effect at once). `wait_first` pauses before the first pass too.
    `traceback=False` logs the exception's type only, for steps whose messages may quote
    visitor data.
    """

    def __init__(self, name: str, steps: Sequence[tuple[str, Step]], *,
                 pause: float | Callable[[], float], wait_first: bool = False,
                 logger: logging.Logger = log, traceback: bool = True) -> None:
        self.name = name
        self.steps = list(steps)
        self._pause = pause if callable(pause) else (lambda: pause)
        self._wait_first = wait_first
        self._log = logger
        self._traceback = traceback
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """True between `start` and `close`."""
        return self._task is not None

    def start(self) -> None:
        """Start the loop in the background; a second call changes nothing."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def close(self) -> None:
        """Stop the loop, waiting until the step it was in has unwound."""
        await stop_task(self._task)
        self._task = None

    async def run_pass(self) -> None:
        """Run every step once, logging (not raising) the failure of any."""
        for step_name, step in self.steps:
            try:
                await step()
            except Exception as exc:  # noqa: BLE001 - the loop outlives one bad pass
                if self._traceback:
                    self._log.exception("%s failed", step_name)
                else:
                    self._log.error("%s failed (%s)", step_name, type(exc).__name__,
                                    extra={"error": type(exc).__name__})

    async def _run(self) -> None:
        if self._wait_first:
            await asyncio.sleep(self._pause())
        while True:
            await self.run_pass()
            await asyncio.sleep(self._pause())
