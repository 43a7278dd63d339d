"""Data sent through the real ingest endpoints: the `ingest` fixture's type, and error reports
sent and waited for until the error queue has stored them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

#: POST to /ingest/<kind> with a site's API key: ingest("pageviews", {...}) -> the JSON answer.
Ingest = Callable[..., Awaitable[dict[str, Any]]]


async def send_errors(ingest: Ingest, deps: Any, reports: list[dict[str, Any]]) -> None:
    """Send the reports through /ingest/errors and wait until the queue has stored them all."""
    before = await deps.store.collection("error_occurrences").count_documents({})
    for report in reports:
        await ingest("errors", report)
    for _ in range(300):
        if await deps.store.collection("error_occurrences").count_documents(
                {}) >= before + len(reports):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the errors were not processed")
