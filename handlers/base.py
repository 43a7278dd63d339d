"""The base handler: authentication by default, JSON in and out, one error shape.

Bodies are streamed (`stream_request_body`), so `prepare` authenticates and checks the declared
length before the body is read: a body over the route's limit gets the JSON 413 at once.

Every handler states how it authenticates in `authentication`; the default is a dashboard
access token, so a new route is closed until it opts out explicitly (Jupyter Server's pattern).
Errors raised anywhere below are mapped here, once, to a status and
``{"error": {"code": ..., "message": ...}}``; a temporary database failure becomes 503 with
`Retry-After` on every route. API answers never carry a stack trace or HTML.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from tornado.httputil import HTTPHeaders
from tornado.web import HTTPError, RequestHandler, stream_request_body

from config.logging import loggable_uri
from documents import audit
from documents.accounts import AuthenticatedUser
from documents.store import is_temporary_store_error
from errors import (
    Conflict,
    Forbidden,
    HeaderTooLarge,
    InvalidInput,
    MalformedRequest,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ServiceError,
    Unauthenticated,
    Unavailable,
    UnsupportedMediaType,
)
from instants import format_instant

if TYPE_CHECKING:
    from handlers.deps import Deps

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Domain error -> HTTP status; the only place statuses for domain errors are chosen.
STATUS_FOR_ERROR: dict[type[ServiceError], int] = {
    MalformedRequest: 400,
    Unauthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    PayloadTooLarge: 413,
    UnsupportedMediaType: 415,
    InvalidInput: 422,
    HeaderTooLarge: 431,
    RateLimited: 429,
    Unavailable: 503,
}

#: Codes for errors Tornado raises itself (routing, methods, protocol).
CODE_FOR_STATUS = {
    400: "malformed_request", 401: "unauthenticated", 403: "forbidden", 404: "not_found",
    405: "method_not_allowed", 409: "conflict", 413: "payload_too_large",
    415: "unsupported_media_type", 422: "invalid_input", 429: "rate_limited",
    431: "header_too_large",
    500: "internal_error", 503: "unavailable",
}


#: The Content-Type of every API answer.
JSON_CONTENT_TYPE = "application/json; charset=utf-8"

#: Retry-After of a temporary database failure (a dropped connection, an election): such
#: failures pass quickly, and a longer wait would only hold back the caller's retry.
STORE_RETRY_AFTER_SECONDS = 1

#: The longest single header accepted. The longest legitimate one is X-Page-Url on a segment
#: upload (4096 characters in the schema); a JWT or a cookie is far shorter.
MAX_HEADER_VALUE_BYTES = 8 * 1024


def status_for_error(error: ServiceError) -> int:
    """The HTTP status of a domain error (500 for one without a mapping)."""
    for cls in type(error).__mro__:
        if cls in STATUS_FOR_ERROR:
            return STATUS_FOR_ERROR[cls]
    return 500


def answerable(exc: BaseException, path: str) -> BaseException:
    """`exc`, or Unavailable (503) when it is a temporary database failure (logged)."""
    if not isinstance(exc, ServiceError) and is_temporary_store_error(exc):
        # A lost connection is neither the caller's fault nor a bug: tell it to come back.
        log.warning("store unavailable", extra={"path": loggable_uri(path),
                                                "error": type(exc).__name__})
        return Unavailable("the database is briefly unavailable",
                           retry_after=STORE_RETRY_AFTER_SECONDS)
    return exc


def error_answer(status_code: int, exc: BaseException | None, reason: str
                 ) -> tuple[str, int | None]:
    """The one error shape: the JSON body for `status_code`, and Retry-After when one applies.

    `reason` is the status's reason phrase, the message when nothing more specific is known.
    """
    code = CODE_FOR_STATUS.get(status_code, "error")
    message = reason
    retry_after = None
    if isinstance(exc, ServiceError):
        code, message = exc.code, exc.message
        if isinstance(exc, RateLimited | Unavailable):
            retry_after = exc.retry_after
        if isinstance(exc, InvalidInput) and exc.field:
            return json.dumps({"error": {"code": code, "message": message,
                                         "field": exc.field}}), retry_after
    elif isinstance(exc, HTTPError) and exc.log_message and status_code < 500:
        message = exc.log_message % exc.args if exc.args else exc.log_message
    elif status_code >= 500:
        message = "internal error"
    return json.dumps({"error": {"code": code, "message": message}}), retry_after


def check_header_sizes(headers: HTTPHeaders) -> None:
    """HeaderTooLarge (431) for any header value longer than MAX_HEADER_VALUE_BYTES."""
    for name, value in headers.get_all():
        if len(value) > MAX_HEADER_VALUE_BYTES:
            raise HeaderTooLarge(f"header {name[:64]} is longer than "
                                 f"{MAX_HEADER_VALUE_BYTES} characters")


def decode_json_body(headers: HTTPHeaders, body: bytes, accepted_content_types: tuple[str, ...]
                     ) -> Any:
    """The parsed JSON body, or UnsupportedMediaType (415) / MalformedRequest (400)."""
    content_type = headers.get("Content-Type", "").split(";")[0].strip().lower()
    if content_type not in accepted_content_types:
        raise UnsupportedMediaType(f"send the body as {' or '.join(accepted_content_types)}")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedRequest("body is not valid UTF-8") from None
    try:
        parsed = _STRICT_JSON.decode(text)
    except (ValueError, RecursionError):
        raise MalformedRequest("body is not valid JSON") from None
    # Some JSON no store can hold: lone UTF-16 surrogates and NUL in field names (only JSON
    # escapes can carry them; strict UTF-8 cannot), integers beyond 64 bits, and nesting deeper
    # than documents may go. Refused at the door, naming the field, so nothing accepted fails
    # later in the store or the worker. The raw body says cheaply whether a walk is needed.
    if _MAY_BE_UNSTORABLE.search(body) is not None or (
            body.count(b"{") + body.count(b"[") > MAX_NESTING):
        found = _unstorable_at(parsed)
        if found is not None:
            field, reason = found
            raise InvalidInput(f"{field or 'body'}: {reason}", field=field or None,
                               code="unstorable_value")
    return parsed


#: Deepest nesting a body may have: BSON documents stop at 100 levels, and the service wraps
#: a body in a few levels of its own (a queued job, a stored error).
MAX_NESTING = 64
_INT64 = (-(2**63), 2**63 - 1)
#: A surrogate or NUL escape, or a run of 19 digits (the shortest integer that may not fit).
_MAY_BE_UNSTORABLE = re.compile(rb"\\u(?:[dD][89a-fA-F][0-9a-fA-F]{2}|0000)|[0-9]{19}")


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= char <= "\udfff" for char in text)


def _field(path: tuple[str, ...]) -> str:
    return ".".join(part.encode("utf-8", "replace").decode().replace("\x00", "\\0")
                    for part in path)


def _unstorable_at(value: Any, path: tuple[str, ...] = ()) -> tuple[str, str] | None:
    """(field, reason) of the first value a document store cannot hold, or None."""
    if len(path) > MAX_NESTING:
        return _field(path), f"nested deeper than {MAX_NESTING} levels"
    if isinstance(value, str):
        if _has_surrogate(value):
            return _field(path), "text holds a lone UTF-16 surrogate escape"
    elif isinstance(value, bool):
        return None
    elif isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            return _field(path), "number does not fit in a 64-bit integer"
    elif isinstance(value, dict):
        for key, item in value.items():
            if "\x00" in key or _has_surrogate(key):
                return _field((*path, key)), "field name holds a NUL or a lone surrogate"
            found = _unstorable_at(item, (*path, key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _unstorable_at(item, (*path, str(index)))
            if found is not None:
                return found
    return None


def allowed_methods(handler: RequestHandler) -> str:
    """The `Allow` value of a handler: the methods its class implements (RFC 9110 §15.5.6 asks
    for it on every 405)."""
    return ", ".join(method for method in handler.SUPPORTED_METHODS
                     if getattr(type(handler), method.lower(), None)
                     not in (None, RequestHandler._unimplemented_method))


@stream_request_body
class BaseHandler(RequestHandler):
    """JSON API handler; subclasses set `authentication` and `max_body_bytes` when they differ."""

    #: "user" (dashboard access token), "none" (public, opted out explicitly), or a subclass's.
    authentication: ClassVar[str] = "user"
    #: Largest body accepted; None means the deployment's event-body limit.
    max_body_bytes: ClassVar[int | None] = None
    #: Content types a body may have.
    accepted_content_types: ClassVar[tuple[str, ...]] = ("application/json",)

    current_user: AuthenticatedUser | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._body_chunks: list[bytes] = []
        self._body_received = 0
        super().__init__(*args, **kwargs)

    @property
    def deps(self) -> Deps:
        """The dependencies the application was built with."""
        return self.application.settings["deps"]

    def set_default_headers(self) -> None:
        self.set_header("Content-Type", JSON_CONTENT_TYPE)
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.clear_header("Server")

    def check_xsrf_cookie(self) -> None:
        """Token auth travels in headers, not cookies, so XSRF cookies do not apply."""

    async def prepare(self) -> None:
        self._check_header_sizes()
        self._check_body_size()
        authenticate = self._authenticators().get(self.authentication)
        if authenticate is None:
            raise RuntimeError(f"{type(self).__name__}: unknown authentication "
                               f"{self.authentication!r}")
        await authenticate()
        if self.request.query_arguments:
            # HEAD is GET without the body, so it takes GET's query rules.
            method = "GET" if self.request.method == "HEAD" else self.request.method or "GET"
            self.deps.schemas.validate_query(self.request.path, method,
                                             self.request.query_arguments)

    def _authenticators(self) -> dict[str, Any]:
        return {"user": self._authenticate_user, "none": self._authenticate_nobody}

    async def _authenticate_nobody(self) -> None:
        self.current_user = None

    async def _authenticate_user(self) -> None:
        header = self.request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("an access token is required", code="missing_token")
        self.current_user = await self.deps.auth.authenticate(token.strip())

    @property
    def user(self) -> AuthenticatedUser:
        """The authenticated dashboard user (only on handlers with authentication 'user')."""
        if self.current_user is None:
            raise Unauthenticated("an access token is required", code="missing_token")
        return self.current_user

    async def audit(self, action: str, site: dict[str, Any], details: dict[str, Any] | None = None,
                    *, session: Any = None) -> None:
        """Append what the signed-in user did to a site to the audit trail; pass `session` to
        make the entry part of the change's transaction."""
        await audit.record(self.deps.store, action=action, actor_user_id=self.user.id,
                           account_id=self.user.account_id,
                           organization_id=site["organizationId"], site_id=site["_id"],
                           details=details, session=session)

    async def audited(self, site: dict[str, Any] | Callable[[T], dict[str, Any]], action: str,
                      change: Callable[[Any], Awaitable[T]],
                      details: Callable[[T], dict[str, Any] | None]) -> T:
        """Run `change(session)` and its audit entry in one transaction, so both land or
        neither; returns what `change` returned. `details(result)` is the entry's details, or
        None when nothing changed, which writes no entry. `site` is the site the entry is
        about, or how to find it in the result (a site being created)."""

        async def work(session: Any) -> T:
            result = await change(session)
            described = details(result)
            if described is not None:
                about = site(result) if callable(site) else site
                await self.audit(action, about, described, session=session)
            return result

        return await self.deps.store.transaction(work)

    def _check_header_sizes(self) -> None:
        check_header_sizes(self.request.headers)

    def _body_limit(self) -> int:
        return self.max_body_bytes or self.deps.settings.max_event_body_bytes

    def _check_body_size(self) -> None:
        declared = self.request.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > self._body_limit():
            # The 413 goes out before the body is read, and Tornado closes the connection
            # after it; allowing this request's body through keeps Tornado from answering its
            # length a second time with a bare 400 of its own.
            self.request.connection.set_max_body_size(int(declared))  # type: ignore[attr-defined]
            raise PayloadTooLarge(f"body is larger than {self._body_limit()} bytes")

    def data_received(self, chunk: bytes) -> None:
        """Keep the body as it arrives; past the route's limit only its length is kept."""
        self._body_received += len(chunk)
        if self._body_received <= self._body_limit():
            self._body_chunks.append(chunk)

    @property
    def body(self) -> bytes:
        """The request body, or PayloadTooLarge (413) when it ran over the route's limit."""
        if self._body_received > self._body_limit():
            raise PayloadTooLarge(f"body is larger than {self._body_limit()} bytes")
        if len(self._body_chunks) > 1:
            self._body_chunks = [b"".join(self._body_chunks)]
        return self._body_chunks[0] if self._body_chunks else b""

    def json_body(self) -> Any:
        """The parsed JSON body, or MalformedRequest / UnsupportedMediaType."""
        return decode_json_body(self.request.headers, self.body, self.accepted_content_types)

    def validated_body(self, schema: str) -> dict[str, Any]:
        """The JSON body, checked against `schema` in docs/openapi.yaml."""
        body = self.json_body()
        self.deps.schemas.validate(body, schema)
        return body

    def write_json(self, payload: Any, status: int = 200) -> None:
        """Send `payload` as JSON."""
        self.set_status(status)
        self.finish(compact_json(payload))

    @property
    def client_ip(self) -> str:
        """The caller's address: X-Forwarded-For only when the peer is a trusted proxy."""
        return client_address(self.request.remote_ip or "",
                              self.request.headers.get("X-Forwarded-For", ""),
                              self.deps.settings.trusted_proxies)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        body, retry_after = error_answer(status_code, exc, self._reason)
        if retry_after is not None:
            self.set_header("Retry-After", str(retry_after))
        if status_code == 401:
            # RFC 7235 requires a challenge on every 401; RFC 6750 says how a bearer one reads.
            challenge = 'Bearer realm="visitor-service"'
            if self.request.headers.get("Authorization"):
                challenge += ', error="invalid_token"'
            self.set_header("WWW-Authenticate", challenge)
        if status_code == 405:
            self.set_header("Allow", allowed_methods(self))
        self.set_header("Content-Type", JSON_CONTENT_TYPE)
        self.finish(body)

    def _handle_request_exception(self, e: BaseException) -> None:
        e = answerable(e, self.request.path)
        if isinstance(e, ServiceError):
            if self._finished:
                return
            self.send_error(status_for_error(e), exc_info=(type(e), e, e.__traceback__))
            return
        super()._handle_request_exception(e)

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if isinstance(value, ServiceError):
            return
        super().log_exception(typ, value, tb)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


#: JSON without NaN and Infinity; built once, since `json.loads` with an option builds a new
#: decoder for every body. A decoder holds no state between calls.
_STRICT_JSON = json.JSONDecoder(parse_constant=_refuse_constant)
#: Compact JSON answers, anything else as its text; built once for the same reason.
def _as_json(value: Any) -> Any:
    """What JSON cannot hold: dates as RFC 3339 in UTC (what the contract says), else text."""
    if isinstance(value, datetime):
        return format_instant(value)
    return str(value)


_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"), default=_as_json)


def compact_json(payload: Any) -> str:
    """`payload` as compact JSON text (anything JSON cannot hold as its text)."""
    return _COMPACT_JSON.encode(payload)


def client_address(peer: str, forwarded_for: str, trusted_proxies: tuple[Any, ...]) -> str:
    """The client's address given the peer, its X-Forwarded-For and the trusted proxies."""
    if not trusted_proxies or not _in_networks(peer, trusted_proxies):
        return peer
    hops = [part.strip() for part in forwarded_for.split(",") if part.strip()]
    # Walk from the nearest hop outwards; the first address that is not a proxy is the client.
    for hop in reversed(hops):
        if not _in_networks(hop, trusted_proxies):
            return hop
    return hops[0] if hops else peer


def _in_networks(address: str, networks: tuple[Any, ...]) -> bool:
    try:
        parsed = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    return any(parsed in network for network in networks)


class NotFoundHandler(BaseHandler):
    """Answers every unknown path with the one error shape."""

    authentication = "none"

    def prepare(self) -> Awaitable[None] | None:
        raise NotFound("no such endpoint")
