"""Stopping the service's long-running asyncio tasks (bus subscription, hub sweep, sweeper)."""

from __future__ import annotations

import asyncio
import contextlib


async def stop_task(task: asyncio.Task[None] | None) -> None:
    """Cancel `task` and wait until it has finished unwinding; None is a no-op."""
    if task is None:
        return
    task.cancel()
    # The cancellation is the one we asked for; any other failure still propagates.
    with contextlib.suppress(asyncio.CancelledError):
        await task
