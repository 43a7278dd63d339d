"""Console capture off the request path: the sweeper strips, keeps or rejects stored segments."""

from __future__ import annotations

import asyncio
import gzip
import json
import tracemalloc
from datetime import UTC, datetime, timedelta

import pytest

from documents import recordings
from errors import NotFound
from ingest.segment_sweeper import SegmentRejected, inflate
from tests.recordings.conftest import SendSegment
from tests.recordings.kit import gzip_json, new_recording_id, rrweb_events
from tests.support.app import Tenant

INFLATED_CAP = 1024 * 1024


@pytest.fixture
def settings_env(settings_env: dict[str, str]) -> dict[str, str]:
    """Segments may inflate to 1 MiB, so a bomb needs only a few kilobytes."""
    return {**settings_env, "SEGMENT_MAX_INFLATED_BYTES": str(INFLATED_CAP)}


async def _only_file(deps) -> dict:
    [file] = [doc async for doc in deps.store.bucket("segments").files.find({})]
    return file


async def _served(deps, site_id: str, file_id: str) -> bytes:
    return b"".join([chunk async for chunk in recordings.stream_segment(deps.store, site_id,
                                                                        file_id)])


async def test_console_events_are_removed_when_the_site_does_not_capture_them(
        deps, tenant: Tenant, send_segment: SendSegment):
    await send_segment(new_recording_id(), 0, body=gzip_json(rrweb_events(console=True)))

    assert await deps.segment_sweeper.sweep() == 1

    file = await _only_file(deps)
    events = json.loads(gzip.decompress(await _served(deps, tenant.site_id, file["_id"])))
    assert events == rrweb_events(console=False)
    assert file["metadata"]["consoleChecked"] is True
    assert file["metadata"]["consoleRemoved"] == 1
    assert b"4111" not in gzip.decompress(await deps.store.bucket("segments").read(file["_id"]))
    assert await deps.store.bucket("segments").chunks.count_documents({}) == 1


async def test_console_events_are_kept_when_the_site_captures_them(
        deps, make_tenant, send_segment: SendSegment):
    site = await make_tenant("debugging", settings={"consoleCapture": True})
    body = gzip_json(rrweb_events(console=True))
    stored = await send_segment(new_recording_id(), 0, body=body, key=site.api_key)

    await deps.segment_sweeper.sweep()

    assert await _served(deps, site.site_id, stored.json()["id"]) == body


async def test_an_unchecked_segment_is_never_served(deps, tenant: Tenant,
                                                    send_segment: SendSegment):
    stored = await send_segment(new_recording_id(), 0, body=gzip_json(rrweb_events()))

    with pytest.raises(NotFound):
        await _served(deps, tenant.site_id, stored.json()["id"])
    assert await recordings.list_segments(deps.store, tenant.site_id,
                                          stored.json()["recordingId"]) == []


async def test_a_segment_is_served_only_to_its_own_site(deps, tenant: Tenant, make_tenant,
                                                       send_segment: SendSegment):
    other = await make_tenant("other")
    stored = await send_segment(new_recording_id(), 0)
    await deps.segment_sweeper.sweep()

    assert await _served(deps, tenant.site_id, stored.json()["id"])
    with pytest.raises(NotFound):
        await _served(deps, other.site_id, stored.json()["id"])


async def test_a_gzip_bomb_is_rejected_without_inflating_it_and_never_served(
        deps, tenant: Tenant, send_segment: SendSegment):
    bomb = gzip.compress(b"[" + b" " * (10 * 1024 * 1024) + b"]")
    assert len(bomb) < 64 * 1024
    stored = await send_segment(new_recording_id(), 0, body=bomb)

    tracemalloc.start()
    try:
        await deps.segment_sweeper.sweep()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert peak < 4 * INFLATED_CAP
    file = await _only_file(deps)
    assert file["metadata"]["rejected"] == "too_large_inflated"
    assert await deps.store.bucket("segments").chunks.count_documents({}) == 0
    with pytest.raises(NotFound):
        await _served(deps, tenant.site_id, stored.json()["id"])
    again = await send_segment(stored.json()["recordingId"], 0, body=bomb)
    assert again.json()["duplicate"] is True


@pytest.mark.parametrize(("body", "reason"), [
    (gzip.compress(b"{not json"), "not_json"),
    (gzip.compress(b'{"type": 4}'), "not_rrweb_events"),
    (b"\x1f\x8b" + b"\x00" * 40, "not_gzip"),
    (gzip.compress(b"[]")[:-6], "truncated"),
], ids=["not_json", "not_rrweb_events", "not_gzip", "truncated"])  # gzip bytes carry the time
async def test_a_segment_that_is_not_an_rrweb_array_is_rejected(
        deps, send_segment: SendSegment, body: bytes, reason: str):
    await send_segment(new_recording_id(), 0, body=body)

    await deps.segment_sweeper.sweep()

    assert (await _only_file(deps))["metadata"]["rejected"] == reason


def test_inflate_reads_every_gzip_member_and_stops_at_the_cap():
    two_members = gzip.compress(b"[1,") + gzip.compress(b"2]")

    assert inflate(two_members, 100) == b"[1,2]"
    with pytest.raises(SegmentRejected, match="too_large_inflated"):
        inflate(gzip.compress(b"x" * 101), 100)
    assert inflate(gzip.compress(b"x" * 100), 100) == b"x" * 100


async def test_a_sweeper_skips_a_segment_another_sweeper_has_leased(
        deps, send_segment: SendSegment):
    await send_segment(new_recording_id(), 0)
    now = datetime.now(UTC)
    leased = await recordings.claim_unchecked_segment(deps.store, now=now,
                                                      lease_until=now + timedelta(minutes=2))

    assert leased is not None
    assert await deps.segment_sweeper.sweep() == 0


async def test_checked_segments_list_in_replay_order(deps, tenant: Tenant,
                                                     send_segment: SendSegment):
    recording_id = new_recording_id()
    # Yesterday: a client time over 30 days old would be taken as the time of receipt.
    day = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
    for seq in (2, 0, 1):
        await send_segment(recording_id, seq, headers={
            "X-Segment-Started-At": f"{day}T10:00:0{seq}Z"})

    await deps.segment_sweeper.sweep()

    listed = await recordings.list_segments(deps.store, tenant.site_id, recording_id)
    assert [file["metadata"]["seq"] for file in listed] == [0, 1, 2]


async def test_the_background_sweeper_checks_new_segments_by_itself(
        deps, send_segment: SendSegment):
    deps.segment_sweeper.interval = 0.05
    deps.segment_sweeper.start()
    await send_segment(new_recording_id(), 0, body=gzip_json(rrweb_events()))

    for _ in range(100):
        # The sweeper swaps the file for its rewrite in a transaction, which the embedded
        # store does not isolate from this read: between the two, no file is seen.
        files = [doc async for doc in deps.store.bucket("segments").files.find({})]
        if files and files[0]["metadata"]["consoleChecked"]:
            break
        await asyncio.sleep(0.05)
    await deps.segment_sweeper.close()

    assert (await _only_file(deps))["metadata"]["consoleRemoved"] == 1
