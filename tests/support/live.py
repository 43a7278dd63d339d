"""A dashboard live-feed client for tests: authenticate, subscribe, read frames with deadlines."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Any

from tornado.httpclient import HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect


class LiveClient:
    """One socket to /dashboard/live."""

    def __init__(self, connection: WebSocketClientConnection) -> None:
        self.connection = connection

    async def send(self, message: dict[str, Any]) -> None:
        """Send one JSON message."""
        await self.connection.write_message(json.dumps(message))

    async def receive(self, within: float = 2.0) -> dict[str, Any] | None:
        """The next frame, or None when the socket closed; TimeoutError after `within` seconds."""
        frame = await asyncio.wait_for(self.connection.read_message(), within)
        return None if frame is None else json.loads(frame)

    async def receive_type(self, kind: str, within: float = 2.0) -> dict[str, Any]:
        """The next frame, which must be of type `kind`."""
        frame = await self.receive(within)
        assert frame is not None, f"socket closed ({self.close_code}) while waiting for {kind}"
        assert frame["type"] == kind, frame
        return frame

    async def closed(self, within: float = 5.0) -> int | None:
        """Read until the server closes the socket; its close code."""
        async def until_closed() -> None:
            while await self.connection.read_message() is not None:
                pass

        await asyncio.wait_for(until_closed(), within)
        return self.close_code

    @property
    def close_code(self) -> int | None:
        """The close code the server sent, once closed."""
        return self.connection.close_code

    async def authenticate(self, token: str) -> dict[str, Any]:
        """Send the access token and wait for `authenticated`."""
        await self.send({"type": "auth", "token": token})
        return await self.receive_type("authenticated")

    async def subscribe(self, site_ids: Iterable[str]) -> dict[str, Any]:
        """Ask for sites' events; the `subscribed` reply (refusals come as an error frame first)."""
        await self.send({"type": "subscribe", "siteIds": list(site_ids)})
        return await self.receive_type("subscribed")

    def close(self) -> None:
        """Close from the client side."""
        self.connection.close()


async def open_live(base_url: str, *, origin: str | None, token: str | None = None,
                    site_ids: Iterable[str] = ()) -> LiveClient:
    """Open a live socket; authenticate and subscribe when a token and sites are given."""
    headers = {"Origin": origin} if origin else {}
    request = HTTPRequest(base_url.replace("http", "ws", 1) + "/dashboard/live", headers=headers,
                          request_timeout=10)
    client = LiveClient(await websocket_connect(request))
    if token is not None:
        await client.authenticate(token)
        if site_ids:
            await client.subscribe(site_ids)
    return client
