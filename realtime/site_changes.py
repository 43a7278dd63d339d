"""Site changes between processes: how each process's keyring (documents/sites.py) hears that a
site it keeps was changed by another process.

`RedisSiteChanges` (REDIS_URL) publishes the id of each changed site on one Redis channel, after
the change is in the store, and each server process subscribes to it. Nothing but the id travels:
no settings, no keys, no visitor data. Pub/sub is at-most-once, so the subscription counts as
live only from Redis's confirmation of it, and only while Redis has been heard from recently: a
ping goes out after HEARTBEAT_SECONDS of silence, and a connection that leaves it unanswered is
dropped and made again. While not live the keyring reads the store for every lookup; when the
subscription is made again, the listeners forget everything, since announcements may have been
missed meanwhile.

`InProcessSiteChanges` serves the embedded default, whose store lives in this process's memory:
no other process can write it, so every change is already known here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import redis.asyncio
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from realtime.pubsub import back_off, close_quietly, close_subscription

log = logging.getLogger(__name__)

#: The one channel; each message is a site id.
CHANNEL = "visitor-service:sites-changed"

#: Silence after which the subscription pings Redis. An unanswered ping after as long again drops
#: the connection; and the subscription stops counting as live after three times this without a
#: word, even if the loop that checks has not run (a busy process).
HEARTBEAT_SECONDS = 1.0

#: The longest one exchange with Redis may take: an announcement (an admin's answer waits for
#: it), or setting up a subscription on a connection that went quiet.
REDIS_TIMEOUT_SECONDS = 2.0

Forget = Callable[[str | None], None]


def _notify(listeners: list[Forget], site_id: str | None) -> None:
    for listener in list(listeners):
        listener(site_id)


class InProcessSiteChanges:
    """The embedded default: the store lives in this process, so changes are always known."""

    def __init__(self) -> None:
        self._listeners: list[Forget] = []

    def live(self) -> bool:
        """Always: no other process can write the embedded store."""
        return True

    def listen(self, forget: Forget) -> None:
        """Register a listener."""
        self._listeners.append(forget)

    async def announce(self, site_id: str) -> None:
        """Tell every listener in this process."""
        _notify(self._listeners, site_id)

    async def start(self) -> None:
        """Nothing to connect."""

    async def close(self) -> None:
        """Forget every listener."""
        self._listeners.clear()


class RedisSiteChanges:
    """One Redis channel of changed site ids; the subscription is re-made when it drops."""

    def __init__(self, url: str, *, channel: str = CHANNEL,
                 heartbeat_seconds: float = HEARTBEAT_SECONDS, min_backoff: float = 0.1,
                 max_backoff: float = 5.0) -> None:
        self._channel = channel
        self._heartbeat = heartbeat_seconds
        # One retry: a pooled connection left dead by a Redis restart is the usual failure.
        self._publisher = redis.asyncio.Redis.from_url(
            url, socket_keepalive=True, socket_timeout=REDIS_TIMEOUT_SECONDS,
            socket_connect_timeout=REDIS_TIMEOUT_SECONDS, retry=Retry(NoBackoff(), 1))
        # As in realtime/bus.py: no retries inside redis-py, so every drop is seen, logged and
        # answered by forgetting what may have been missed. Waiting for messages has its own
        # timeout (the heartbeat); this one bounds the rest.
        self._subscriber = redis.asyncio.Redis.from_url(
            url, socket_keepalive=True, socket_timeout=REDIS_TIMEOUT_SECONDS,
            socket_connect_timeout=REDIS_TIMEOUT_SECONDS, retry=Retry(NoBackoff(), 0))
        self._listeners: list[Forget] = []
        self._task: asyncio.Task[None] | None = None
        self._min_backoff = min_backoff
        self._max_backoff = max_backoff
        #: When Redis last spoke on the confirmed subscription (monotonic); None while down.
        self._heard_at: float | None = None
        #: When the subscription was lost (monotonic); None while up or before the first.
        self._lost_at: float | None = None
        #: Set while the subscription is confirmed; tests wait on it.
        self.subscribed = asyncio.Event()
        self.reconnects = 0
        self.announce_failures = 0

    def live(self) -> bool:
        """True while the subscription is confirmed and Redis spoke on it lately."""
        heard_at = self._heard_at
        return heard_at is not None and time.monotonic() - heard_at < 3 * self._heartbeat

    def listen(self, forget: Forget) -> None:
        """Register a listener: `forget(site_id)` per announcement, `forget(None)` on every
        (re)subscription."""
        self._listeners.append(forget)

    async def announce(self, site_id: str) -> None:
        """Publish the site's id; a Redis failure is logged and counted, not raised, because
        the change is already in the store (the other processes' SITE_CACHE_MAX_AGE_SECONDS
        bounds how long they may keep the old site)."""
        try:
            await self._publisher.publish(self._channel, site_id)
        except (RedisError, OSError) as exc:
            self.announce_failures += 1
            log.warning("site change not announced; other processes may use the old site until "
                        "SITE_CACHE_MAX_AGE_SECONDS", extra={"siteId": site_id,
                                                              "error": repr(exc)})

    async def start(self) -> None:
        """Start the subscription task (server processes only; announcing needs none)."""
        if self._task is None:
            self._task = asyncio.create_task(self._subscribe_forever(), name="site-changes")

    async def _subscribe_forever(self) -> None:
        delay = self._min_backoff
        while True:
            pubsub = self._subscriber.pubsub()
            try:
                await pubsub.subscribe(self._channel)
                await self._receive(pubsub)
            except (RedisError, OSError) as exc:
                if self.subscribed.is_set():
                    delay = self._min_backoff
                self._lost_at = self._lost_at or time.monotonic()
                log.warning("site changes subscription lost; key lookups read the store until "
                            "it is back", extra={"error": repr(exc),
                                                 "retryInSeconds": round(delay, 3)})
            finally:
                self._heard_at = None
                self.subscribed.clear()
                await close_quietly(pubsub)
            delay = await back_off(delay, self._max_backoff)

    async def _receive(self, pubsub: PubSub) -> None:
        """Take messages until the connection fails; a ping left unanswered for a heartbeat
        counts as a failure."""
        pinged = False
        while True:
            message = await pubsub.get_message(timeout=self._heartbeat)
            if message is None:
                if pinged:
                    raise RedisConnectionError(
                        f"no answer from Redis to a ping within {self._heartbeat} s")
                await pubsub.ping()
                pinged = True
                continue
            pinged = False
            kind = message["type"]
            if kind == "subscribe":
                # What is kept may have missed announcements while unsubscribed: forget it all
                # before the keyrings may use what they keep again.
                _notify(self._listeners, None)
                self._heard_at = time.monotonic()
                self.subscribed.set()
                if self._lost_at is None:
                    log.info("site changes subscribed", extra={"channel": self._channel})
                else:
                    self.reconnects += 1
                    log.warning("site changes subscription re-established", extra={
                        "downSeconds": round(time.monotonic() - self._lost_at, 3)})
                    self._lost_at = None
            elif self._heard_at is not None:
                self._heard_at = time.monotonic()
                if kind == "message":
                    self._deliver(message["data"])

    def _deliver(self, data: bytes | str) -> None:
        try:
            site_id = data.decode() if isinstance(data, bytes) else str(data)
        except UnicodeDecodeError:
            log.warning("site changes: a malformed announcement; forgetting every site")
            _notify(self._listeners, None)
            return
        _notify(self._listeners, site_id)

    async def close(self) -> None:
        """Stop the subscription and close both connections."""
        task, self._task = self._task, None
        self._listeners.clear()
        await close_subscription(task, self._subscriber, self._publisher)

