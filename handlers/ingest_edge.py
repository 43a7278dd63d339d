"""The ingest edge: the JSON `/ingest/*` endpoints, served without a RequestHandler.

Shop servers call these endpoints for every pageview, error and lead, and each call carries one
small JSON object and gets one small JSON object back. Measured on the bench machine, Tornado's
RequestHandler machinery around such a call (a handler object with its header dictionaries and
UI namespaces, the output transforms, a Task around `_execute`, the flush path) costs about
55 µs, as much as a pageview's own work. Here each endpoint is an `IngestEndpoint` (what it
receives and the one intake function it calls), served by a Tornado message delegate that keeps
the whole contract of the handlers (see docs/decisions.md, "The ingest edge"):

* the checks of `BaseHandler.prepare` and `IngestHandler` in the same order, through the same
  functions: header sizes (431), body size (413), the service key (401) and the site's rate
  limit (429), the method (405), the content type (415), UTF-8 and JSON (400), the schema (422);
* the one error shape (`handlers.base.error_answer`), with a temporary database failure as 503
  and `Retry-After`; rejections counted in `ingest_rejected_total` by reason;
* the same headers (JSON, `no-store`, `nosniff`, no `Server`), the access log line, and the
  slow-body guard of `ServiceApplication`, which wraps this delegate like any other.

The answer is worked out as soon as the body is complete, in the same callback, and a Task is
made only when the work has to wait for something (a real MongoDB, a full queue). On the
embedded store nothing waits, and the answer is written before Tornado looks at whether it must
watch the connection for the client leaving, which it then need not do.

The segment upload (binary bodies up to 5 MB, metadata in headers) stays a RequestHandler.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tornado import httputil
from tornado.web import HTTPError, RequestHandler

from config.logging import log_access
from config.metrics import Metrics
from errors import RateLimited, ServiceError, Unauthenticated
from handlers.base import (
    JSON_CONTENT_TYPE,
    BaseHandler,
    answerable,
    check_body_size,
    check_header_sizes,
    compact_json,
    decode_json_body,
    error_answer,
    status_for_error,
)

if TYPE_CHECKING:
    from server import Deps

log = logging.getLogger(__name__)

REJECTED_METRIC = "ingest_rejected_total"
REJECTED_HELP = "Ingest requests refused, by reason."

#: What an endpoint does with a validated body: the answer's JSON object.
Accept = Callable[["Deps", dict[str, Any], dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class IngestEndpoint:
    """One JSON `/ingest/*` endpoint: its metrics kind, its request schema, its intake call."""

    #: The metrics label (and privacy-gate kind) of what the endpoint receives.
    kind: str
    #: The request schema's name in docs/openapi.yaml.
    schema: str
    #: Called with the app's deps, the authenticated site and the validated body.
    accept: Accept


async def authenticate_service_key(deps: Deps, key: str) -> dict[str, Any]:
    """The site whose API key `key` is, past its rate limit; 401 or 429 otherwise."""
    key = key.strip()
    if not key:
        raise Unauthenticated("the X-Service-Key header is required", code="missing_key")
    site = await deps.keyring.site_for_api_key(key)
    if site is None:
        raise Unauthenticated("the site API key is not valid", code="invalid_key")
    retry_after = deps.rate_limiter.take(site["_id"])
    if retry_after is not None:
        raise RateLimited("too many requests for this site", retry_after=retry_after)
    return site


def count_rejection(metrics: Metrics, kind: str, status_code: int,
                    exc: BaseException | None) -> None:
    """Count one refused ingest request by its error code (or status)."""
    reason = getattr(exc, "code", None) or str(status_code)
    metrics.count(REJECTED_METRIC, REJECTED_HELP, kind=kind, reason=reason)


class IngestEdge(httputil.HTTPServerConnectionDelegate):
    """The routing target of one `IngestEndpoint`, bound to the application's deps."""

    #: Read by the route sweep and the OpenAPI check, as on handler classes.
    authentication = "service_key"
    methods = ("post",)

    def __init__(self, endpoint: IngestEndpoint, deps: Deps) -> None:
        self.endpoint = endpoint
        self.deps = deps
        # Answers still being worked out; the loop keeps only weak references to tasks.
        self._answering: set[asyncio.Task[None]] = set()
        self._date_second = -1
        self._date = ""

    def start_request(self, server_conn: object, request_conn: httputil.HTTPConnection
                      ) -> httputil.HTTPMessageDelegate:
        """A delegate for one request on this endpoint."""
        return IngestExchange(self, request_conn)

    def answer(self, exchange: IngestExchange) -> None:
        """Work out and send the answer to a request whose body is complete.

        Runs at once up to the first real wait; only then does a Task take over the rest.
        """
        answering = exchange.respond()
        try:
            awaited = answering.send(None)
        except StopIteration:
            return  # answered without waiting for anything
        except Exception:  # noqa: BLE001 - as `_answered` does for a Task
            log.exception("ingest answer failed")
            return
        task = asyncio.get_running_loop().create_task(_go_on(answering, awaited))
        self._answering.add(task)
        task.add_done_callback(self._answered)

    def _answered(self, task: asyncio.Task[None]) -> None:
        self._answering.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # `respond` answers every failure of the work itself; this is a failure to send.
            log.error("ingest answer failed", exc_info=task.exception())

    def http_date(self) -> str:
        """The Date header's value, formatted once per second."""
        now = int(time.time())
        if now != self._date_second:
            self._date_second, self._date = now, httputil.format_timestamp(now)
        return self._date


class _Resumed:
    """Awaiting it goes on with a coroutine already started outside any Task.

    The coroutine stopped at its first wait and handed over `awaited` (a future, or None for a
    bare yield). The Task awaiting this is given that same value, so it waits on the future as
    if it had run the coroutine from the start, and every later step goes through unchanged,
    as `await` would pass them.
    """

    __slots__ = ("_coroutine", "_awaited")

    def __init__(self, coroutine: Coroutine[Any, Any, Any], awaited: Any) -> None:
        self._coroutine = coroutine
        self._awaited = awaited

    def __await__(self) -> Generator[Any, Any, Any]:
        coroutine, awaited = self._coroutine, self._awaited
        while True:
            try:
                sent = yield awaited
            except GeneratorExit:
                coroutine.close()
                raise
            except BaseException as exc:  # noqa: BLE001 - a cancellation, passed on as is
                try:
                    awaited = coroutine.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    awaited = coroutine.send(sent)
                except StopIteration as stop:
                    return stop.value


async def _go_on(coroutine: Coroutine[Any, Any, Any], awaited: Any) -> Any:
    """What the Task runs: the rest of `coroutine`, from the wait it stopped at."""
    return await _Resumed(coroutine, awaited)


class IngestExchange(httputil.HTTPMessageDelegate):
    """One request to an ingest endpoint: collects the body, then answers it."""

    def __init__(self, edge: IngestEdge, connection: httputil.HTTPConnection) -> None:
        self._edge = edge
        self._connection = connection
        self._chunks: list[bytes] = []
        self._started = 0.0
        self._start_line: Any = None
        self._headers = httputil.HTTPHeaders()

    def headers_received(self, start_line: Any, headers: httputil.HTTPHeaders) -> None:
        """Remember the request line and headers."""
        self._started = time.time()
        self._start_line = start_line
        self._headers = headers

    def data_received(self, chunk: bytes) -> None:
        """Collect the body (the server bounds its size)."""
        self._chunks.append(chunk)

    def finish(self) -> None:
        """The body is complete: answer it."""
        self._edge.answer(self)

    def on_connection_close(self) -> None:
        """The client left before the body was complete: nothing to answer."""
        self._chunks = []

    async def respond(self) -> None:
        """Answer the request: the endpoint's answer, or the one error shape."""
        method = self._start_line.method
        retry_after: int | None = None
        try:
            status, body = 200, await self._accept(method)
        except Exception as exc:  # noqa: BLE001 - every failure gets the one error shape
            status, body, retry_after = self._refusal(exc)
        self._send(status, body, retry_after, with_body=method != "HEAD")
        log_access(method, self._start_line.path, status, lambda: time.time() - self._started)

    async def _accept(self, method: str) -> str:
        edge, headers = self._edge, self._headers
        deps = edge.deps
        body = b"".join(self._chunks)
        # The order of BaseHandler: method known, header and body sizes, key, then the method.
        if method not in RequestHandler.SUPPORTED_METHODS:
            raise HTTPError(405)
        check_header_sizes(headers)
        check_body_size(headers, body, deps.settings.max_event_body_bytes)
        site = await authenticate_service_key(deps, headers.get("X-Service-Key", ""))
        if method != "POST":
            raise HTTPError(405)
        payload = decode_json_body(headers, body, BaseHandler.accepted_content_types)
        deps.schemas.validate(payload, edge.endpoint.schema)
        return compact_json(await edge.endpoint.accept(deps, site, payload))

    def _refusal(self, exc: Exception) -> tuple[int, str, int | None]:
        edge = self._edge
        exc = answerable(exc, self._start_line.path)  # type: ignore[assignment]
        if isinstance(exc, ServiceError):
            status = status_for_error(exc)
        elif isinstance(exc, HTTPError):
            status = exc.status_code
        else:
            status = 500
            log.error("uncaught exception in %s %s", self._start_line.method,
                      self._start_line.path, exc_info=exc)
        count_rejection(edge.deps.metrics, edge.endpoint.kind, status, exc)
        body, retry_after = error_answer(status, exc, httputil.responses.get(status, "Unknown"))
        return status, body, retry_after

    def _send(self, status: int, body: str, retry_after: int | None, *, with_body: bool) -> None:
        data = body.encode("utf-8")
        headers = httputil.HTTPHeaders({
            "Content-Type": JSON_CONTENT_TYPE,
            "Date": self._edge.http_date(),
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            "Content-Length": str(len(data)),
        })
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
        # A HEAD answer says how long the body would be and sends none, as RequestHandler does.
        self._connection.write_headers(
            httputil.ResponseStartLine("HTTP/1.1", status, httputil.responses.get(status,
                                                                                 "Unknown")),
            headers, data if with_body else None)
        self._connection.finish()
