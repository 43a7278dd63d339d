"""The event bus port: publish a site's live event once; every server process hears it.

`InProcessBus` serves the embedded default; `RedisBus` carries events between processes over
Redis pub/sub (REDIS_URL). Only the two contract events exist (realtime/events.py, spec §6);
anything else is refused at publish. Publishing is fire-and-forget for the caller: a transport
failure is logged and counted, never turned into a failed ingest, because the write it
announces has already happened. Pub/sub is at-most-once: an event published while a server's
subscription is down is lost for that server's dashboards, which refetch on reconnect.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from realtime.events import EVENT_TYPES, validate_event
from realtime.pubsub import back_off, close_quietly, close_subscription

log = logging.getLogger(__name__)

__all__ = ["EVENT_TYPES", "EventBus", "InProcessBus", "Listener", "RedisBus"]

Listener = Callable[[str, dict[str, Any]], Awaitable[None] | None]

#: One Redis channel per site under this prefix; each server process PSUBSCRIBEs once to all.
CHANNEL_PREFIX = "visitor-service:live:"


class EventBus(Protocol):
    """Where live events go after the write that caused them has succeeded."""

    async def publish(self, site_id: str, event: dict[str, Any]) -> None:
        """Deliver `event` to every listener of every server process."""

    def listen(self, listener: Listener) -> None:
        """Call `listener(site_id, event)` for every event published anywhere."""

    async def start(self) -> None:
        """Begin receiving (server processes only; publishers never need to)."""

    async def close(self) -> None:
        """Stop delivering."""


async def _notify(listeners: list[Listener], site_id: str, event: dict[str, Any]) -> None:
    for listener in list(listeners):
        try:
            result = listener(site_id, event)
            if result is not None:
                await result
        except Exception:  # noqa: BLE001 - one bad listener must not silence the rest
            log.exception("event listener failed", extra={"siteId": site_id})


class InProcessBus:
    """The embedded default: listeners in this process only."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    async def publish(self, site_id: str, event: dict[str, Any]) -> None:
        """Hand the event to every listener; a failing listener does not stop the others."""
        validate_event(site_id, event)
        await _notify(self._listeners, site_id, event)

    def listen(self, listener: Listener) -> None:
        """Register a listener."""
        self._listeners.append(listener)

    async def start(self) -> None:
        """Nothing to connect."""

    async def close(self) -> None:
        """Forget every listener."""
        self._listeners.clear()


class RedisBus:
    """Redis pub/sub: one pattern subscription per process, re-established when it drops."""

    def __init__(self, url: str, *, min_backoff: float = 0.1, max_backoff: float = 5.0,
                 prefix: str = CHANNEL_PREFIX) -> None:
        self._prefix = prefix
        self._publisher = redis.asyncio.Redis.from_url(url, socket_keepalive=True)
        # The subscriber never retries inside redis-py: reconnecting is this class's job, so
        # that every drop is logged and backed off instead of being hidden by a silent retry.
        self._subscriber = redis.asyncio.Redis.from_url(
            url, socket_keepalive=True, health_check_interval=15, retry=Retry(NoBackoff(), 0),
        )
        self._listeners: list[Listener] = []
        self._task: asyncio.Task[None] | None = None
        self._min_backoff = min_backoff
        self._max_backoff = max_backoff
        #: Set while the subscription is live; tests and readiness wait on it.
        self.subscribed = asyncio.Event()
        self.reconnects = 0
        self.publish_failures = 0

    def _channel(self, site_id: str) -> str:
        return self._prefix + site_id

    async def publish(self, site_id: str, event: dict[str, Any]) -> None:
        """Publish to the site's channel; a Redis failure is logged and counted, not raised."""
        validate_event(site_id, event)
        payload = json.dumps(event, separators=(",", ":"))
        try:
            await self._publisher.publish(self._channel(site_id), payload)
        except (RedisError, OSError) as exc:
            self.publish_failures += 1
            log.warning("live event not published", extra={
                "siteId": site_id, "eventType": event["type"], "error": repr(exc)})

    def listen(self, listener: Listener) -> None:
        """Register a listener for events from every process."""
        self._listeners.append(listener)

    async def start(self) -> None:
        """Start the subscription task; it keeps reconnecting until `close`."""
        if self._task is None:
            self._task = asyncio.create_task(self._subscribe_forever(), name="redis-live-bus")

    async def ping(self) -> None:
        """Readiness: the publishing connection answers."""
        await self._publisher.ping()

    async def _subscribe_forever(self) -> None:
        delay = self._min_backoff
        lost_at: float | None = None
        while True:
            pubsub = self._subscriber.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.psubscribe(self._prefix + "*")
                if lost_at is None:
                    log.info("live bus subscribed", extra={"pattern": self._prefix + "*"})
                else:
                    self.reconnects += 1
                    log.warning("live bus subscription re-established", extra={
                        "downSeconds": round(time.monotonic() - lost_at, 3)})
                lost_at = None
                delay = self._min_backoff
                self.subscribed.set()
                async for message in pubsub.listen():
                    await self._deliver(message)
            except (RedisError, OSError) as exc:
                self.subscribed.clear()
                lost_at = lost_at or time.monotonic()
                log.warning("live bus subscription lost; reconnecting", extra={
                    "error": repr(exc), "retryInSeconds": round(delay, 3)})
            finally:
                await close_quietly(pubsub)
            delay = await back_off(delay, self._max_backoff)

    async def _deliver(self, message: dict[str, Any]) -> None:
        if message.get("type") != "pmessage":
            return
        channel = message["channel"].decode() if isinstance(message["channel"], bytes) \
            else str(message["channel"])
        site_id = channel.removeprefix(self._prefix)
        try:
            event = json.loads(message["data"])
            validate_event(site_id, event)
        except ValueError:
            log.warning("live bus dropped a malformed message", extra={"siteId": site_id})
            return
        await _notify(self._listeners, site_id, event)

    async def close(self) -> None:
        """Stop the subscription and close both connections."""
        task, self._task = self._task, None
        self._listeners.clear()
        await close_subscription(task, self._subscriber, self._publisher)

