"""The toolkit the ingest handler modules share, so that none imports a sibling: the base of
an `/ingest` endpoint (`X-Service-Key`, the per-site rate limit, counted rejections), the route
of a JSON ingest endpoint, and the answers and segment parsing that /ingest and /sdk/v1 share.

A segment travels as the raw gzip bytes with its metadata in `X-Recording-*` / `X-Segment-*` /
`X-Visitor-*` headers (docs/decisions.md, "Recording segments on the wire").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar

from tornado.httputil import HTTPServerRequest

from errors import InvalidInput, RateLimited, Unauthenticated, UnsupportedMediaType
from handlers.base import BaseHandler
from handlers.validation import SchemaValidator
from ingest.intake import Outcome, parse_time
from ingest.interactions import BatchOutcome
from ingest.recordings import SegmentOutcome, SegmentUpload

if TYPE_CHECKING:
    from handlers.deps import Deps

#: What a JSON ingest endpoint does with a validated body: the answer's JSON object.
Accept = Callable[["Deps", dict[str, Any], dict[str, Any]], Awaitable[dict[str, Any]]]


def acknowledgement(outcome: Outcome) -> dict[str, Any]:
    """The answer to an accepted item: `id` when stored, `dropped` with the rule otherwise."""
    body: dict[str, Any] = {"ok": True}
    if outcome.stored:
        body["id"] = outcome.item_id
    else:
        body["dropped"] = outcome.reason
    return body


class IngestHandler(BaseHandler):
    """Base of an /ingest endpoint: `X-Service-Key` auth and rate limit, counted rejections."""

    authentication = "service_key"
    #: The metrics label and privacy-gate kind of what this endpoint receives.
    kind: ClassVar[str] = "unknown"

    site: dict[str, Any]

    def _authenticators(self) -> dict[str, Any]:
        return {**super()._authenticators(), "service_key": self._authenticate_service_key}

    async def _authenticate_service_key(self) -> None:
        self.current_user = None
        key = self.request.headers.get("X-Service-Key", "").strip()
        if not key:
            raise Unauthenticated("the X-Service-Key header is required", code="missing_key")
        site = await self.deps.keyring.site_for_api_key(key)
        if site is None:
            raise Unauthenticated("the site API key is not valid", code="invalid_key")
        retry_after = await self.deps.rate_limiter.take(site["_id"])
        if retry_after is not None:
            raise RateLimited("too many requests for this site", retry_after=retry_after)
        self.site = site

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        self.deps.metrics.count("ingest_rejected_total", "Ingest requests refused, by reason.",
                                kind=self.kind,
                                reason=getattr(exc, "code", None) or str(status_code))
        super().write_error(status_code, **kwargs)


class JsonIngestHandler(IngestHandler):
    """POST of one JSON object: validated against its schema, handed to its intake call."""

    def initialize(self, kind: str, schema: str, accept: Accept) -> None:
        self.kind = kind
        self.schema = schema
        self.accept = accept

    async def post(self) -> None:
        payload = self.validated_body(self.schema)
        self.write_json(await self.accept(self.deps, self.site, payload))


def ingest_route(path: str, kind: str, schema: str, accept: Accept
                 ) -> tuple[str, type[JsonIngestHandler], dict[str, Any]]:
    """The route of a JSON ingest endpoint: its path, metrics kind, schema and intake call."""
    return path, JsonIngestHandler, {"kind": kind, "schema": schema, "accept": accept}


#: Segment metadata header -> field of the RecordingSegmentHeaders schema.
SEGMENT_HEADERS = {
    "X-Recording-Id": "recordingId",
    "X-Segment-Seq": "seq",
    "X-Visitor-Id": "visitorId",
    "X-Session-Id": "sessionId",
    "X-Page-Url": "url",
    "X-Segment-Started-At": "startedAt",
    "X-Segment-Ended-At": "endedAt",
    "X-Visitor-Gpc": "gpc",
    "X-Visitor-Consent": "consent",
    "X-Order-Completed": "orderCompleted",
}
_HEADER_FOR_FIELD = {name: header for header, name in SEGMENT_HEADERS.items()}
_INTEGER_FIELDS = frozenset({"seq"})
_BOOLEAN_FIELDS = frozenset({"gpc", "orderCompleted"})
_BOOLEANS = {"true": True, "1": True, "false": False, "0": False}


def segment_answer(result: SegmentOutcome) -> dict[str, Any]:
    """The answer to a segment upload, the same on /ingest and /sdk/v1."""
    answer: dict[str, Any] = {"ok": True}
    if result.recording_id is not None:
        answer["recordingId"] = result.recording_id
    if result.duplicate:
        answer["duplicate"] = True
    elif result.outcome.stored:
        answer["id"] = result.outcome.item_id
    else:
        answer["dropped"] = result.outcome.reason
    return answer


#: The content type of a segment whose metadata travels in the query string (/sdk/v1 only).
QUERY_METADATA_CONTENT_TYPE = "text/plain"


def segment_upload(request: HTTPServerRequest, body: bytes, schemas: SchemaValidator,
                   accepted_content_types: tuple[str, ...]) -> SegmentUpload:
    """The segment in a request: raw gzip body, metadata from the X-* headers (also /sdk/v1).

    Sent as `text/plain` (where accepted: the browser's segments sent as the page is left), the
    metadata comes from query parameters named like the schema's fields instead: with no custom
    header, such a request needs no CORS preflight, which a browser may not complete for a page
    that is already gone.
    """
    content_type = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if content_type not in accepted_content_types:
        raise UnsupportedMediaType(f"send the segment as {' or '.join(accepted_content_types)}")
    if content_type == QUERY_METADATA_CONTENT_TYPE:
        meta = {field: _header_value(field, values[-1].decode("utf-8", "replace"))
                for field in SEGMENT_HEADERS.values()
                if (values := request.query_arguments.get(field))}
        where: dict[str, str] = {}
    else:
        meta = {field: _header_value(field, request.headers[header])
                for header, field in SEGMENT_HEADERS.items() if header in request.headers}
        where = _HEADER_FOR_FIELD
    try:
        schemas.validate(meta, "RecordingSegmentHeaders")
        for name in ("startedAt", "endedAt"):
            parse_time(meta.get(name), field=name)
    except InvalidInput as invalid:
        field = where.get(invalid.field or "", invalid.field)
        raise InvalidInput(invalid.message, field=field) from None
    return SegmentUpload(
        recording_id=meta["recordingId"], seq=meta["seq"], visitor_id=meta["visitorId"],
        page_url=meta["url"], data=body, session_id=meta.get("sessionId"),
        started_at=meta.get("startedAt"), ended_at=meta.get("endedAt"),
        gpc=bool(meta.get("gpc")), consent=meta.get("consent"),
        order_completed=bool(meta.get("orderCompleted")),
    )


def interaction_answer(result: BatchOutcome) -> dict[str, Any]:
    """The answer to an interaction batch, the same on /ingest and /sdk/v1."""
    answer: dict[str, Any] = {"ok": True, "stored": result.stored,
                              "droppedCount": result.dropped}
    if result.duplicate:
        answer["duplicate"] = True
    return answer


def _header_value(field: str, raw: str) -> Any:
    """Header text as the schema's type; a value that does not convert is left to fail it."""
    value = raw.strip()
    if field in _INTEGER_FIELDS and value.isascii() and value.isdigit():
        return int(value)
    if field in _BOOLEAN_FIELDS:
        return _BOOLEANS.get(value.lower(), value)
    return value
