"""stop_task: background tasks stop even when a library swallows a cancellation."""

from __future__ import annotations

import asyncio
import logging

import pytest

from config import background
from config.background import stop_task


async def test_a_task_that_swallows_one_cancellation_is_cancelled_again_and_stops():
    swallowed = asyncio.Event()

    async def stubborn() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            swallowed.set()  # what a careless client library does
        await asyncio.sleep(3600)

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    await asyncio.wait_for(stop_task(task), timeout=5)
    assert swallowed.is_set() and task.cancelled()


async def test_a_task_that_never_stops_is_left_behind_with_an_error_instead_of_a_hang(
        monkeypatch, caplog):
    monkeypatch.setattr(background, "CANCEL_WAIT_SECONDS", 0.01)

    released = asyncio.Event()

    async def immortal() -> None:
        while not released.is_set():
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                pass

    task = asyncio.create_task(immortal(), name="immortal")
    await asyncio.sleep(0)
    with caplog.at_level(logging.ERROR, logger="config.background"):
        await asyncio.wait_for(stop_task(task), timeout=5)
    assert not task.done()
    assert "ignored cancellation" in caplog.text
    # Let the test end cleanly: release the loop, and wake it one last time.
    released.set()
    task.cancel()
    await asyncio.wait({task}, timeout=5)
    assert task.done()


async def test_a_task_that_failed_before_it_was_stopped_still_raises():
    async def broken() -> None:
        raise RuntimeError("boom")

    task = asyncio.create_task(broken())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="boom"):
        await stop_task(task)
