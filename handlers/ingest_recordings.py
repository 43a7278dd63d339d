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

from handlers.ingest_api import (
    IngestHandler,
    acknowledgement,
    ingest_route,
    interaction_answer,
    segment_answer,
    segment_upload,
)
from ingest.interactions import record_interactions
from ingest.recordings import SegmentUpload

if TYPE_CHECKING:
    from handlers.deps import Deps


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
