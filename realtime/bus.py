"""The event bus port: publish a site's live event once; every server process hears it.

`InProcessBus` serves the embedded default. Only two event types exist (spec §6): `new_error`
and `new_lead`. Publishing is fire-and-forget for the caller: a bus failure is logged and
counted, never turned into a failed ingest, because the write it announces has already happened.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

log = logging.getLogger(__name__)

EVENT_TYPES = frozenset({"new_error", "new_lead"})

Listener = Callable[[str, dict[str, Any]], Awaitable[None] | None]


class EventBus(Protocol):
    """Where live events go after the write that caused them has succeeded."""

    async def publish(self, site_id: str, event: dict[str, Any]) -> None:
        """Deliver `event` to every listener of every server process."""

    def listen(self, listener: Listener) -> None:
        """Call `listener(site_id, event)` for every event published anywhere."""

    async def close(self) -> None:
        """Stop delivering."""


class InProcessBus:
    """The embedded default: listeners in this process only."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    async def publish(self, site_id: str, event: dict[str, Any]) -> None:
        """Hand the event to every listener; a failing listener does not stop the others."""
        if event.get("type") not in EVENT_TYPES:
            raise ValueError(f"unknown event type {event.get('type')!r}")
        for listener in list(self._listeners):
            try:
                result = listener(site_id, event)
                if result is not None:
                    await result
            except Exception:  # noqa: BLE001 - one bad listener must not silence the rest
                log.exception("event listener failed", extra={"siteId": site_id})

    def listen(self, listener: Listener) -> None:
        """Register a listener."""
        self._listeners.append(listener)

    async def close(self) -> None:
        """Forget every listener."""
        self._listeners.clear()
