"""The Tornado application class: ingest endpoints bound to the edge, and a body timeout armed
only for bodies still on their way.

A route whose target is an `IngestEndpoint` is served by the ingest edge (handlers/ingest_edge.py)
with the application's deps; every other route is a RequestHandler as usual.

Tornado's own `body_timeout` wraps every body read in a timer and an extra task, about 10 µs a
request (some 4% of a pageview on the ingest bench), also when the whole body came in with the
headers and there is nothing left to wait for. Here the server runs without it, and each request
whose body has not fully arrived with its headers gets the same timeout from its own connection
(`HTTP1Connection.set_body_timeout`, called before the body is read). A client trickling a body
is cut off exactly as before; a body already in the buffer costs nothing.
"""

from __future__ import annotations

from typing import Any

import tornado.web
from tornado import httputil

from handlers.ingest_edge import IngestEdge, IngestEndpoint

#: How long a request body may take to arrive once its headers have (the slow-body guard).
BODY_TIMEOUT_SECONDS = 60.0


class ServiceApplication(tornado.web.Application):
    """`tornado.web.Application` with ingest edge routes and the slow-body guard."""

    def __init__(self, handlers: list[Any], **settings: Any) -> None:
        # Endpoints are declared without deps (module-level route lists); bind them here.
        super().__init__([(route[0], IngestEdge(route[1], settings["deps"]), *route[2:])
                          if isinstance(route[1], IngestEndpoint) else route
                          for route in handlers], **settings)

    def start_request(self, server_conn: object, request_conn: httputil.HTTPConnection
                      ) -> httputil.HTTPMessageDelegate:
        """The routing delegate, behind a guard that arms the body timeout when needed."""
        return SlowBodyGuard(super().start_request(server_conn, request_conn), request_conn,
                             BODY_TIMEOUT_SECONDS)


class SlowBodyGuard(httputil.HTTPMessageDelegate):
    """Passes a request through; arms the connection's body timeout if the body is not all in."""

    def __init__(self, delegate: httputil.HTTPMessageDelegate,
                 connection: httputil.HTTPConnection, timeout_seconds: float) -> None:
        self._delegate = delegate
        self._connection = connection
        self._timeout_seconds = timeout_seconds

    def headers_received(self, start_line: Any, headers: httputil.HTTPHeaders) -> Any:
        """Arm the timeout unless the whole body is already buffered, then route as usual."""
        if body_still_expected(self._connection, headers):
            set_body_timeout = getattr(self._connection, "set_body_timeout", None)
            if set_body_timeout is not None:
                set_body_timeout(self._timeout_seconds)
        return self._delegate.headers_received(start_line, headers)

    def data_received(self, chunk: bytes) -> Any:
        """Forwarded."""
        return self._delegate.data_received(chunk)

    def finish(self) -> None:
        """Forwarded."""
        self._delegate.finish()

    def on_connection_close(self) -> None:
        """Forwarded."""
        self._delegate.on_connection_close()


def body_still_expected(connection: httputil.HTTPConnection,
                        headers: httputil.HTTPHeaders) -> bool:
    """Whether the request's body may still be on its way after its headers.

    True for a chunked body, for a length that cannot be read, and whenever the connection's
    read buffer cannot be inspected: the guard errs on the side of arming the timeout.
    """
    if "Transfer-Encoding" in headers:
        return True
    declared = headers.get("Content-Length")
    if declared is None:
        return False  # no body at all
    try:
        length = int(declared)
    except ValueError:
        return True  # Tornado refuses it anyway; nothing is lost by arming
    # `_read_buffer_size` is what IOStream holds already read and not yet consumed: after the
    # headers, the body's bytes (and any pipelined request behind it). Private to Tornado, so
    # its absence arms the timeout instead of failing.
    buffered = getattr(getattr(connection, "stream", None), "_read_buffer_size", None)
    return not isinstance(buffered, int) or buffered < length
