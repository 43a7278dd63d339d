"""PeriodicTask, the one shape of the background loops, and stop_task: background tasks stop
even when a library swallows a cancellation."""

from __future__ import annotations

import asyncio
import logging

import pytest

from config import background
from config.background import PeriodicTask, stop_task


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


async def test_a_periodic_task_runs_its_steps_in_order_each_pass_until_closed():
    ran: list[str] = []
    passes = asyncio.Event()

    async def first() -> None:
        ran.append("first")

    async def second() -> None:
        ran.append("second")
        if len(ran) >= 4:
            passes.set()

    loop = PeriodicTask("test-loop", [("first", first), ("second", second)], pause=0.001)
    loop.start()
    loop.start()  # a second start changes nothing
    await asyncio.wait_for(passes.wait(), timeout=5)
    await loop.close()
    assert not loop.running
    assert ran[:4] == ["first", "second", "first", "second"]
    count = len(ran)
    await asyncio.sleep(0.01)
    assert len(ran) == count


async def test_a_failing_step_is_logged_by_name_and_the_loop_goes_on(caplog):
    calls: list[str] = []
    again = asyncio.Event()

    async def broken() -> None:
        calls.append("broken")
        raise RuntimeError("boom")

    async def after() -> None:
        calls.append("after")
        if calls.count("after") == 2:
            again.set()

    loop = PeriodicTask("test-loop", [("broken step", broken), ("after", after)], pause=0.001)
    with caplog.at_level(logging.ERROR, logger="config.background"):
        loop.start()
        await asyncio.wait_for(again.wait(), timeout=5)
        await loop.close()
    assert calls[:4] == ["broken", "after", "broken", "after"]
    assert "broken step failed" in caplog.text and "RuntimeError: boom" in caplog.text


async def test_without_traceback_a_failure_is_logged_by_its_type_only(caplog):
    async def leaky() -> None:
        raise ValueError("https://shop.example/account?email=ada@example.com")

    loop = PeriodicTask("test-loop", [("render", leaky)], pause=3600, traceback=False)
    with caplog.at_level(logging.ERROR, logger="config.background"):
        await loop.run_pass()
    assert "render failed (ValueError)" in caplog.text and "ada@example.com" not in caplog.text


async def test_the_pause_is_asked_after_each_pass_and_wait_first_pauses_before_the_first():
    pauses: list[float] = []
    ran = asyncio.Event()

    def pause() -> float:
        pauses.append(0.001)
        return 0.001

    async def step() -> None:
        ran.set()

    loop = PeriodicTask("test-loop", [("step", step)], pause=pause, wait_first=True)
    loop.start()
    await asyncio.wait_for(ran.wait(), timeout=5)
    await loop.close()
    assert len(pauses) >= 1  # asked before the first pass, since it waits first
