"""A real Celery worker for tests, started and stopped off the event loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from celery import Celery
from celery.contrib.testing.worker import start_worker
from kombu.asynchronous import get_event_loop, set_event_loop


@contextlib.asynccontextmanager
async def running_worker(app: Celery, *, concurrency: int = 5) -> AsyncIterator[Any]:
    """A threads-pool worker consuming `app`'s queues while the block runs; yields the worker."""
    running = start_worker(app, pool="threads", concurrency=concurrency, perform_ping_check=False,
                           shutdown_timeout=20)
    # Entered and left off the loop: the worker's tasks need this loop while it starts and stops.
    worker = await asyncio.to_thread(running.__enter__)
    try:
        yield worker
    finally:
        await asyncio.to_thread(running.__exit__, None, None, None)
        # The worker's kombu hub is process-wide and outlives it; its loop may still have made
        # a waker (a socket pair) after the worker closed the hub. A worker process closes it
        # when it exits; a test process runs many workers, so it closes it here.
        hub = get_event_loop()
        if hub is not None:
            hub.close()
            set_event_loop(None)
