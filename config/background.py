"""Stopping the service's long-running asyncio tasks (bus subscription, hub sweep, sweeper)."""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger(__name__)

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
