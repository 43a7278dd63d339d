"""The dashboard's live feed: a native Tornado WebSocket at /dashboard/live.

Authentication is in-band because Tornado logs full URIs: the first message must be
``{"type": "auth", "token": <access token>}`` within LIVE_AUTH_TIMEOUT_SECONDS, and the client
may send it again on the same socket to extend the session before the token expires. Then
``{"type": "subscribe", "siteIds": [...]}`` starts the feed for sites the user may see. The
protocol, replies and close codes are in docs/events.md.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

import tornado.ioloop
import tornado.websocket
from tornado.iostream import StreamClosedError
from tornado.websocket import WebSocketClosedError

from documents.sites import site_for_user
from errors import NotFound, Unauthenticated
from handlers.base import CODE_FOR_STATUS, allowed_methods
from realtime.hub import (
    CLOSE_PROTOCOL_ERROR,
    CLOSE_UNAUTHENTICATED,
    Subscriber,
)

if TYPE_CHECKING:
    from handlers.deps import Deps

log = logging.getLogger(__name__)

#: Client messages are tiny (a token, a few site ids); anything larger is not ours.
MAX_MESSAGE_BYTES = 16 * 1024
#: A socket may watch this many sites at once.
MAX_SITES_PER_SOCKET = 50


def origin_of(url: str) -> str:
    """`scheme://host[:port]` of a URL, lower-cased, default ports left out."""
    parts = urlsplit(url.strip())
    default = {"http": 80, "https": 443}.get(parts.scheme)
    port = "" if parts.port in (None, default) else f":{parts.port}"
    return f"{parts.scheme}://{(parts.hostname or '').lower()}{port}"


class LiveSocketHandler(tornado.websocket.WebSocketHandler):
    """One dashboard socket: authenticate in-band, subscribe to sites, receive their events."""

    #: Route sweep: this route authenticates in-band (first message), not by header.
    authentication: ClassVar[str] = "in-band"

    subscriber: Subscriber | None = None

    @property
    def deps(self) -> Deps:
        """The dependencies the application was built with."""
        return self.application.settings["deps"]

    @property
    def max_message_size(self) -> int:
        """Largest accepted incoming message."""
        return MAX_MESSAGE_BYTES

    def get_compression_options(self) -> dict[str, Any] | None:
        """No per-message deflate: the hub shares one pre-built, uncompressed frame per event."""
        return None

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        # Before the upgrade (a plain GET, another method): the one error shape, and on a 405
        # the methods this route takes.
        if status_code == 405:
            self.set_header("Allow", allowed_methods(self))
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(json.dumps({"error": {"code": CODE_FOR_STATUS.get(status_code, "error"),
                                          "message": self._reason}}))

    def check_origin(self, origin: str) -> bool:
        """Only the dashboard's own origin may open a socket from a browser."""
        return origin_of(origin) == origin_of(self.deps.settings.public_url)

    def open(self, *args: Any, **kwargs: Any) -> None:
        self.set_nodelay(True)
        self.subscriber = self.deps.hub.attach(self)
        loop = tornado.ioloop.IOLoop.current()
        self._auth_deadline = loop.call_later(self.deps.settings.live_auth_timeout_seconds,
                                              self._close_if_anonymous)
        self._expiry: object | None = None

    def _close_if_anonymous(self) -> None:
        if self.subscriber is not None and self.subscriber.user is None:
            self._close(CLOSE_UNAUTHENTICATED, "auth_timeout")

    def _close_expired(self) -> None:
        self._close(CLOSE_UNAUTHENTICATED, "token_expired")

    def _close(self, code: int, reason: str) -> None:
        if self.subscriber is not None:
            self.deps.hub.detach_and_close(self.subscriber, code, reason)
        else:
            self.close(code, reason)

    # Transport, as the hub sees it -------------------------------------------------------

    def write_frame(self, frame: bytes) -> asyncio.Future[None] | None:
        """Write a finished frame: None if the kernel took all of it, else a future for the rest."""
        connection = self.ws_connection
        stream = connection.stream if connection is not None else None
        if connection is None or connection.is_closing() or stream is None or stream.closed():
            raise WebSocketClosedError()
        sent = 0
        if not stream.writing():
            # Straight into the socket when nothing is queued ahead of the frame: the future,
            # callback and loop handle IOStream.write allocates per call kept full garbage
            # collections (~120 ms pauses) coming every 2 s at 1,000 sockets; see
            # docs/events.md, "Fan-out cost".
            try:
                sent = stream.write_to_fd(frame)  # type: ignore[arg-type]  # bytes will do
            except BlockingIOError:
                pass
            except OSError as exc:
                stream.close(exc_info=exc)
                raise WebSocketClosedError() from None
            if sent == len(frame):
                return None
        try:
            # Not write_message: that re-encodes the text and wraps every write in a task.
            return stream.write(frame[sent:] if sent else frame)
        except StreamClosedError:
            raise WebSocketClosedError() from None

    def close_with(self, code: int, reason: str) -> None:
        """Close with a code from docs/events.md."""
        self.close(code, reason)

    # Messages ----------------------------------------------------------------------------

    def _handlers(self) -> dict[str, Callable[[dict[str, Any]], Awaitable[None]]]:
        return {"auth": self._on_auth, "subscribe": self._on_subscribe,
                "unsubscribe": self._on_unsubscribe}

    async def on_message(self, message: str | bytes) -> None:
        if self.subscriber is None or self.subscriber.closed:
            return
        try:
            parsed = json.loads(message)
        except ValueError:
            self._close(CLOSE_PROTOCOL_ERROR, "malformed_message")
            return
        kind = parsed.get("type") if isinstance(parsed, dict) else None
        handler = self._handlers().get(kind) if isinstance(kind, str) else None
        if handler is None:
            self._close(CLOSE_PROTOCOL_ERROR, "unknown_message")
            return
        if kind != "auth" and self.subscriber.user is None:
            self._close(CLOSE_UNAUTHENTICATED, "auth_required")
            return
        await handler(parsed)

    async def _on_auth(self, message: dict[str, Any]) -> None:
        assert self.subscriber is not None
        token = message.get("token")
        try:
            if not isinstance(token, str) or not token:
                raise Unauthenticated("an access token is required", code="missing_token")
            user = await self.deps.auth.authenticate(token)
            expires_at = self.deps.auth.issuer.verify_access(token).expires_at
        except Unauthenticated as exc:
            self._close(CLOSE_UNAUTHENTICATED, exc.code)
            return
        previous = self.subscriber.user
        if previous is not None and previous.id != user.id:
            self._close(CLOSE_UNAUTHENTICATED, "user_changed")
            return
        self.subscriber.user = user
        # Memberships may have changed since the last token; keep only sites still visible.
        lost = [site for site, org in self.subscriber.sites.items() if user.role_in(org) is None]
        self.deps.hub.unsubscribe(self.subscriber, lost)
        loop = tornado.ioloop.IOLoop.current()
        if self._expiry is not None:
            loop.remove_timeout(self._expiry)
        self._expiry = loop.call_at(loop.time() + max(0.0, expires_at - time.time()),
                                    self._close_expired)
        self.deps.hub.send(self.subscriber, {"type": "authenticated", "userId": user.id,
                                             "expiresAt": expires_at})

    async def _on_subscribe(self, message: dict[str, Any]) -> None:
        assert self.subscriber is not None and self.subscriber.user is not None
        site_ids = _site_ids(message)
        if site_ids is None:
            self._close(CLOSE_PROTOCOL_ERROR, "malformed_message")
            return
        allowed: dict[str, str] = {}
        refused: list[str] = []
        for site_id in site_ids:
            try:
                site = await site_for_user(self.deps.store, self.subscriber.user, site_id)
            except NotFound:
                refused.append(site_id)
                continue
            allowed[site_id] = site["organizationId"]
        if len(set(self.subscriber.sites) | set(allowed)) > MAX_SITES_PER_SOCKET:
            refused, allowed = refused + list(allowed), {}
        if self.subscriber.closed:
            return  # closed (logout, expiry) while the sites were being looked up
        self.deps.hub.subscribe(self.subscriber, allowed)
        if refused:
            self.deps.hub.send(self.subscriber, {
                "type": "error", "code": "subscription_refused", "siteIds": refused,
                "message": "no such site, or not one of yours",
            })
        self.deps.hub.send(self.subscriber, {"type": "subscribed",
                                             "siteIds": sorted(self.subscriber.sites)})

    async def _on_unsubscribe(self, message: dict[str, Any]) -> None:
        assert self.subscriber is not None
        site_ids = _site_ids(message)
        if site_ids is None:
            self._close(CLOSE_PROTOCOL_ERROR, "malformed_message")
            return
        self.deps.hub.unsubscribe(self.subscriber, site_ids)
        self.deps.hub.send(self.subscriber, {"type": "subscribed",
                                             "siteIds": sorted(self.subscriber.sites)})

    def on_close(self) -> None:
        loop = tornado.ioloop.IOLoop.current()
        loop.remove_timeout(self._auth_deadline)
        if self._expiry is not None:
            loop.remove_timeout(self._expiry)
        if self.subscriber is not None:
            self.deps.hub.detach(self.subscriber)


def _site_ids(message: dict[str, Any]) -> list[str] | None:
    site_ids = message.get("siteIds")
    if not isinstance(site_ids, list) or not 0 < len(site_ids) <= MAX_SITES_PER_SOCKET \
            or not all(isinstance(s, str) and 0 < len(s) <= 64 for s in site_ids):
        return None
    return list(dict.fromkeys(site_ids))


default_handlers = [
    (r"/dashboard/live", LiveSocketHandler),
]
