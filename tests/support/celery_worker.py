"""A real Celery worker for tests, started and stopped off the event loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from celery import Celery
from celery.contrib.testing.worker import start_worker


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
