"""Data sent through the real ingest endpoints: the `ingest` fixture's type, and error reports
sent and waited for until the error queue has stored them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

#: POST to /ingest/<kind> with a site's API key: ingest("pageviews", {...}) -> the JSON answer.
Ingest = Callable[..., Awaitable[dict[str, Any]]]


async def send_errors(ingest: Ingest, deps: Any, reports: list[dict[str, Any]], *,
                      fold: bool = True) -> None:
    """Send the reports through /ingest/errors, wait until the queue has stored them all
    and counted them on their errors, which the worker does last, and (unless `fold` is
    False) fold them into the figures, as the derivation does within seconds."""
    before = await counted_occurrences(deps.store)
    for report in reports:
        await ingest("errors", report)
    for _ in range(300):
        if await counted_occurrences(deps.store) >= before + len(reports):
            if fold:
                await deps.derivation.fold()
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the errors were not processed")


async def counted_occurrences(store: Any) -> int:
    """Occurrences counted on their errors so far."""
    return sum([int(error.get("occurrenceCount") or 0) async for error in store.collection(
        "errors").find({}, {"occurrenceCount": 1})])
