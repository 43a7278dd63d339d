"""Recording fixtures: a controllable lifecycle clock and segment uploads over HTTP."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tests.recordings.kit import PAGE, VISITOR, FakeClock, gzip_json, rrweb_events
from tests.support.app import Answer, Fetch, Tenant

SendSegment = Callable[..., Awaitable[Answer]]


@pytest.fixture
def clock(deps) -> FakeClock:
    """The recording lifecycle's clock, under the test's control."""
    fake = FakeClock()
    deps.recordings.clock = fake
    return fake


@pytest.fixture
def send_segment(fetch: Fetch, tenant: Tenant) -> SendSegment:
    """POST one segment: send_segment(recording_id, seq, body=..., url=..., headers=..., key=)."""

    async def send(recording_id: str, seq: int, *, body: bytes | None = None, url: str = PAGE,
                   visitor: str = VISITOR, key: str | None = None,
                   headers: dict[str, str] | None = None) -> Answer:
        all_headers = {
            "Content-Type": "application/octet-stream",
            "X-Service-Key": key if key is not None else tenant.api_key,
            "X-Recording-Id": recording_id,
            "X-Segment-Seq": str(seq),
            "X-Visitor-Id": visitor,
            "X-Session-Id": "browser-session-1",
            "X-Page-Url": url,
            **(headers or {}),
        }
        payload = body if body is not None else gzip_json(rrweb_events(console=False))
        return await fetch("/ingest/recordings/segment", "POST", body=payload,
                           headers=all_headers)

    return send
