"""Recording ingest (spec §4.1): start, segment, end, and interactions.

A segment travels as the raw gzip bytes (`Content-Type: application/octet-stream`) with its
metadata in `X-Recording-*` / `X-Segment-*` / `X-Visitor-*` headers: base64 inside JSON would
cost a third more bytes, and headers, unlike a query string, stay out of the access log, so page
URLs never land there. The API key stays in `X-Service-Key`. See docs/decisions.md, "Recording
segments on the wire". A database hiccup answers 503 with `Retry-After` (handlers.base), which
callers may act on: every recording write is idempotent, and so is an interaction batch that
carries a `batchId`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tornado.httputil import HTTPServerRequest

from errors import InvalidInput, UnsupportedMediaType
from handlers.ingest import IngestHandler, acknowledgement, ingest_route
from handlers.validation import SchemaValidator
from ingest.interactions import BatchOutcome, record_interactions
from ingest.recordings import SegmentOutcome, SegmentUpload

if TYPE_CHECKING:
    from handlers.deps import Deps

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


class RecordingSegmentHandler(IngestHandler):
    """POST /ingest/recordings/segment: one gzip-compressed rrweb segment, stored as received."""

    kind = "recording_segment"
    accepted_content_types = ("application/octet-stream", "application/gzip")

    def _body_limit(self) -> int:
        return self.deps.settings.max_segment_bytes

    async def post(self) -> None:
        result = await self.deps.recordings.add_segment(self.site, self._upload())
        self.write_json(segment_answer(result))

    def _upload(self) -> SegmentUpload:
        return segment_upload(self.request, self.body, self.deps.schemas,
                              self.accepted_content_types)


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


async def _start(deps: Deps, site: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """Start a recording (idempotent on a client-given id)."""
    return acknowledgement(await deps.recordings.start(site, body))


async def _end(deps: Deps, site: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    """End a recording."""
    return acknowledgement(await deps.recordings.end(site, body))


async def _interactions(deps: Deps, site: dict[str, Any], body: dict[str, Any]
                        ) -> dict[str, Any]:
    """A batch of clicks, rage and dead clicks, scroll depth."""
    return interaction_answer(await record_interactions(deps.store, deps.intake, site, body))


default_handlers = [
    ingest_route(r"/ingest/recordings/start", "recording", "RecordingStart", _start),
    (r"/ingest/recordings/segment", RecordingSegmentHandler),
    ingest_route(r"/ingest/recordings/end", "recording", "RecordingEnd", _end),
    ingest_route(r"/ingest/recordings/interactions", "interaction", "InteractionIngest",
                 _interactions),
]
