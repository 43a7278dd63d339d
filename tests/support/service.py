"""The service on a local port for the browser and WordPress tests, recording every request.

A test can stop it and start it again on the same port (the service down, then back), and read
which requests it answered, as the access log sees them.
"""

from __future__ import annotations

import tornado.httpserver
import tornado.netutil
import tornado.web

import server
from config import Settings


class Service:
    """The service on a fixed port that a test can stop and start again (service down/up)."""

    def __init__(self, app: tornado.web.Application, settings: Settings) -> None:
        self.app, self.settings = app, settings
        self.server: tornado.httpserver.HTTPServer | None = None
        self.port = 0
        #: Every request answered: (method, path, status), as the access log sees it.
        self.requests: list[tuple[str, str, int]] = []
        log_request = app.settings["log_function"]

        def record(handler: tornado.web.RequestHandler) -> None:
            self.requests.append((handler.request.method or "", handler.request.path,
                                  handler.get_status()))
            log_request(handler)

        app.settings["log_function"] = record
        self.start()
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Listen again, on the port of the first start (a free one the first time)."""
        sockets = tornado.netutil.bind_sockets(self.port, "127.0.0.1")
        self.port = sockets[0].getsockname()[1]
        self.server = server.make_http_server(self.settings, self.app)
        self.server.add_sockets(sockets)

    async def stop(self) -> None:
        """Stop listening and close the open connections, as a service going down does."""
        if self.server is not None:
            self.server.stop()
            await self.server.close_all_connections()
            self.server = None

    def collection_calls(self) -> list[tuple[str, str, int]]:
        """Requests other than fetching the scripts: what the loader sent."""
        return [r for r in self.requests
                if r[1].startswith("/sdk/v1/") and not r[1].endswith(".js")]
