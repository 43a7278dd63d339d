"""The segment body limit: MAX_SEGMENT_BYTES, separate from the event-body limit."""

from __future__ import annotations

import os

import pytest

from tests.recordings.conftest import SendSegment
from tests.recordings.kit import new_recording_id

SEGMENT_LIMIT = 300 * 1024


@pytest.fixture
def settings_env(settings_env: dict[str, str]) -> dict[str, str]:
    """Segments may be 300 KiB, above the 256 KiB event limit."""
    return {**settings_env, "MAX_SEGMENT_BYTES": str(SEGMENT_LIMIT)}


def _gzip_shaped(size: int) -> bytes:
    """Bytes that start like gzip; the request path looks no further."""
    return b"\x1f\x8b" + os.urandom(size - 2)


async def test_a_segment_over_the_limit_is_refused_with_413_and_not_stored(
        deps, send_segment: SendSegment):
    answer = await send_segment(new_recording_id(), 0, body=_gzip_shaped(SEGMENT_LIMIT + 1))

    assert answer.code == 413
    assert answer.json()["error"]["code"] == "payload_too_large"
    assert await deps.store.bucket("segments").files.count_documents({}) == 0
    assert await deps.store.collection("recordings").count_documents({}) == 0


async def test_a_segment_at_the_limit_is_stored_though_larger_than_an_event_body(
        deps, send_segment: SendSegment):
    answer = await send_segment(new_recording_id(), 0, body=_gzip_shaped(SEGMENT_LIMIT))

    assert answer.code == 200, answer
    [file] = [doc async for doc in deps.store.bucket("segments").files.find({})]
    assert file["length"] == SEGMENT_LIMIT
    assert await deps.store.bucket("segments").chunks.count_documents({}) == 2
