"""The live hub: which sockets watch which site, and a bounded outgoing backlog per socket.

The hub knows nothing about WebSockets (Zulip keeps its client registry apart from the
transport the same way): a socket hands the hub a `Transport`, the bus hands it events. Each
event is serialised once per process, into one finished WebSocket frame, and that same frame
is written to every watching socket without waiting, so a slow or dead socket can never hold
up the others. A socket with LIVE_QUEUE_LIMIT frames still unwritten is closed with
CLOSE_SLOW_CONSUMER. A periodic sweep closes sockets whose session was revoked (logout) since
they authenticated. Close codes are documented in docs/events.md.
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from tornado.websocket import WebSocketClosedError

from config.background import PeriodicTask
from documents.accounts import AuthenticatedUser

log = logging.getLogger(__name__)

#: Close codes (RFC 6455 leaves 4000-4999 to applications).
CLOSE_GOING_AWAY = 1001
CLOSE_UNAUTHENTICATED = 4001
CLOSE_SLOW_CONSUMER = 4008
CLOSE_PROTOCOL_ERROR = 4400

#: RFC 6455 first byte of a final text frame (FIN bit + opcode 1).
_FIN_TEXT = 0x81


def text_frame(text: str) -> bytes:
    """One complete, unmasked RFC 6455 text frame carrying `text` (servers never mask)."""
    payload = text.encode("utf-8")
    size = len(payload)
    if size < 126:
        header = struct.pack("!BB", _FIN_TEXT, size)
    elif size <= 0xFFFF:
        header = struct.pack("!BBH", _FIN_TEXT, 126, size)
    else:
        header = struct.pack("!BBQ", _FIN_TEXT, 127, size)
    return header + payload


def json_frame(message: dict[str, Any]) -> bytes:
    """A message as compact JSON in one text frame."""
    return text_frame(json.dumps(message, separators=(",", ":")))


class Transport(Protocol):
    """What the hub needs from a socket."""

    def write_frame(self, frame: bytes) -> asyncio.Future[None] | None:
        """Write a finished frame now, behind any frame still queued for this socket.

        Returns None when the kernel took the whole frame at once, else a future that resolves
        once the rest has reached it. Raises WebSocketClosedError when the socket is closed.
        """

    def close_with(self, code: int, reason: str) -> None:
        """Close the socket with a close code."""


class Subscriber:
    """One socket's place in the hub: its user, its sites and its bounded backlog."""

    def __init__(self, transport: Transport, queue_limit: int) -> None:
        self.transport = transport
        self.user: AuthenticatedUser | None = None
        #: site id -> organization id, so a re-authentication can re-check membership cheaply.
        self.sites: dict[str, str] = {}
        self.closed = False
        self._limit = queue_limit
        # Futures of frames not yet handed to the kernel, oldest first. The stream resolves
        # them in order, so the backlog is what is left after popping the finished ones; no
        # task or callback per socket is needed to keep count. A frame the kernel took at
        # once has no future.
        self._unwritten: deque[asyncio.Future[None]] = deque()

    def offer(self, frame: bytes) -> bool:
        """Write a frame without waiting; False when the socket is closed or too far behind."""
        if self.closed:
            return False
        unwritten = self._unwritten
        while unwritten and unwritten[0].done():
            unwritten.popleft()
        if len(unwritten) >= self._limit:
            return False
        try:
            pending = self.transport.write_frame(frame)
        except WebSocketClosedError:
            self.stop()  # already gone; its on_close detaches it
            return False
        if pending is not None:
            unwritten.append(pending)
        return True

    @property
    def backlog(self) -> int:
        """Frames written but not yet handed to the kernel."""
        while self._unwritten and self._unwritten[0].done():
            self._unwritten.popleft()
        return len(self._unwritten)

    def stop(self) -> None:
        """Stop writing to this socket."""
        self.closed = True
        self._unwritten.clear()

    def close(self, code: int, reason: str) -> None:
        """Stop writing and close the socket."""
        if self.closed:
            return
        self.stop()
        self.transport.close_with(code, reason)


class LiveHub:
    """Site -> subscribers registry, fed by the bus, one per server process."""

    def __init__(self, queue_limit: int,
                 is_session_revoked: Callable[[str], Awaitable[bool]] | None = None,
                 session_check_seconds: float = 30.0) -> None:
        self._queue_limit = queue_limit
        self._is_session_revoked = is_session_revoked
        self._by_site: dict[str, set[Subscriber]] = {}
        self._subscribers: set[Subscriber] = set()
        # The sweep must survive a store hiccup; it waits first, as no socket is open at start.
        self._sweeper = PeriodicTask("live-session-sweep",
                                     [("live session sweep", self.sweep_sessions)],
                                     pause=session_check_seconds, wait_first=True, logger=log)
        self.delivered = 0
        self.dropped_slow = 0

    def attach(self, transport: Transport) -> Subscriber:
        """Register a new socket (not yet watching anything)."""
        subscriber = Subscriber(transport, self._queue_limit)
        self._subscribers.add(subscriber)
        return subscriber

    def detach(self, subscriber: Subscriber) -> None:
        """Forget a socket that closed."""
        self.unsubscribe(subscriber, list(subscriber.sites))
        self._subscribers.discard(subscriber)
        subscriber.stop()

    def subscribe(self, subscriber: Subscriber, sites: dict[str, str]) -> None:
        """Start sending these sites' events (site id -> organization id, already authorised)."""
        for site_id, organization_id in sites.items():
            subscriber.sites[site_id] = organization_id
            self._by_site.setdefault(site_id, set()).add(subscriber)

    def unsubscribe(self, subscriber: Subscriber, site_ids: Iterable[str]) -> None:
        """Stop sending these sites' events."""
        for site_id in list(site_ids):
            subscriber.sites.pop(site_id, None)
            watchers = self._by_site.get(site_id)
            if watchers is not None:
                watchers.discard(subscriber)
                if not watchers:
                    del self._by_site[site_id]

    def watchers(self, site_id: str) -> int:
        """How many sockets of this process watch the site."""
        return len(self._by_site.get(site_id, ()))

    def dispatch(self, site_id: str, event: dict[str, Any]) -> None:
        """Build the event's frame once and write it to every socket watching the site."""
        watchers = self._by_site.get(site_id)
        if not watchers:
            return
        frame = json_frame(event)
        for subscriber in list(watchers):
            if subscriber.offer(frame):
                self.delivered += 1
            elif not subscriber.closed:
                self.drop_slow(subscriber)

    def send(self, subscriber: Subscriber, reply: dict[str, Any]) -> None:
        """Write a protocol reply behind the events already written to this socket."""
        if not subscriber.offer(json_frame(reply)) and not subscriber.closed:
            self.drop_slow(subscriber)

    def drop_slow(self, subscriber: Subscriber) -> None:
        """Close a socket that fell a whole queue behind."""
        self.dropped_slow += 1
        log.warning("live socket dropped: too far behind", extra={
            "userId": subscriber.user.id if subscriber.user else None,
            "queueLimit": self._queue_limit})
        self.detach_and_close(subscriber, CLOSE_SLOW_CONSUMER, "slow_consumer")

    def detach_and_close(self, subscriber: Subscriber, code: int, reason: str) -> None:
        """Close a socket and forget it."""
        subscriber.close(code, reason)
        self.detach(subscriber)

    def start(self) -> None:
        """Start the periodic revoked-session sweep."""
        if self._is_session_revoked is not None:
            self._sweeper.start()

    async def sweep_sessions(self) -> int:
        """Close sockets whose session was revoked; returns how many were closed."""
        if self._is_session_revoked is None:
            return 0
        by_family: dict[str, list[Subscriber]] = {}
        for subscriber in self._subscribers:
            if subscriber.user is not None:
                by_family.setdefault(subscriber.user.token_family, []).append(subscriber)
        closed = 0
        for family, subscribers in by_family.items():
            if await self._is_session_revoked(family):
                for subscriber in subscribers:
                    self.detach_and_close(subscriber, CLOSE_UNAUTHENTICATED, "session_revoked")
                    closed += 1
        return closed

    async def close(self) -> None:
        """Stop the sweep and close every socket with 1001 (server going away)."""
        await self._sweeper.close()
        for subscriber in list(self._subscribers):
            self.detach_and_close(subscriber, CLOSE_GOING_AWAY, "server_shutdown")
