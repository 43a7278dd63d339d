"""The recording lifecycle of spec §3, thresholds shrunk: inactivity, orders, rotation, faults."""

from __future__ import annotations

import asyncio

import pytest

from documents import recordings
from tests.recordings.conftest import SendSegment
from tests.recordings.kit import VISITOR, FakeClock, context, new_recording_id
from tests.support.app import Fetch, Tenant

INACTIVITY = 60
CAP = 300
#: Addresses the packaged country database places in Great Britain and Germany.
GB_IP, DE_IP = "81.2.69.160", "85.214.132.117"
PHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
         "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1")


@pytest.fixture
def settings_env(settings_env: dict[str, str]) -> dict[str, str]:
    """A minute of inactivity ends a recording, five minutes of activity rotate it."""
    return {**settings_env, "RECORDING_INACTIVITY_SECONDS": str(INACTIVITY),
            "RECORDING_CAP_SECONDS": str(CAP)}


async def _all_recordings(deps) -> list[dict]:
    cursor = deps.store.collection("recordings").find({}).sort("startedAt", 1)
    return [doc async for doc in cursor]


async def _stored_segments(deps) -> list[tuple[str, int]]:
    """(recording id the segment is filed under, seq) of every stored segment."""
    cursor = deps.store.bucket("segments").files.find({})
    return sorted([(doc["metadata"]["recordingId"], doc["metadata"]["seq"])
                   async for doc in cursor])


async def test_thresholds_come_from_the_settings(deps):
    assert deps.recordings.inactivity.total_seconds() == INACTIVITY
    assert deps.recordings.cap.total_seconds() == CAP


async def test_a_segment_after_inactivity_goes_to_a_new_recording_that_continues_the_old(
        deps, clock: FakeClock, send_segment: SendSegment):
    first_id = new_recording_id()
    assert (await send_segment(first_id, 0)).code == 200
    clock.advance(INACTIVITY - 1)
    assert (await send_segment(first_id, 1)).json()["recordingId"] == first_id
    last_activity = clock.now

    clock.advance(INACTIVITY + 1)
    late = await send_segment(first_id, 2)

    old, new = await _all_recordings(deps)
    assert old["_id"] == first_id
    assert old["status"] == "ended" and old["endReason"] == "inactivity"
    assert old["endedAt"] == last_activity
    assert new["continuesFrom"] == first_id and new["status"] == "active"
    assert new["visitorId"] == VISITOR
    assert late.json()["recordingId"] == new["_id"]
    assert await _stored_segments(deps) == sorted([(first_id, 0), (first_id, 1), (new["_id"], 2)])
    profile = await deps.store.collection("visitors").find_one({"visitorId": VISITOR})
    assert profile["counts"]["recordings"] == 2


async def test_continuous_activity_rotates_at_the_cap(deps, clock: FakeClock,
                                                      send_segment: SendSegment):
    recording_id = new_recording_id()
    seq = 0
    # A segment every 30 seconds for 11 minutes: never idle, but over the 5-minute cap twice.
    for _ in range(23):
        answer = await send_segment(recording_id, seq)
        assert answer.code == 200
        seq += 1
        clock.advance(30)

    chain = await _all_recordings(deps)
    assert len(chain) == 3
    assert [doc["endReason"] for doc in chain] == ["cap", "cap", None]
    assert chain[1]["continuesFrom"] == chain[0]["_id"]
    assert chain[2]["continuesFrom"] == chain[1]["_id"]
    for doc in chain[:2]:
        assert (doc["endedAt"] - doc["startedAt"]).total_seconds() > CAP
    stored = await _stored_segments(deps)
    assert sorted(seq for _, seq in stored) == list(range(23))


async def test_an_order_completed_on_end_closes_the_recording_and_the_next_segment_starts_anew(
        fetch: Fetch, tenant: Tenant, deps, clock: FakeClock, send_segment: SendSegment):
    recording_id = new_recording_id()
    await send_segment(recording_id, 0)

    ended = await fetch("/ingest/recordings/end", "POST", headers={"X-Service-Key":
                                                                   tenant.api_key},
                        json_body=context(recordingId=recording_id, orderCompleted=True))
    after = await send_segment(recording_id, 1)

    assert ended.code == 200
    old, new = await _all_recordings(deps)
    assert old["endReason"] == "order"
    assert new["continuesFrom"] == recording_id
    assert after.json()["recordingId"] == new["_id"]


async def test_an_order_completed_on_a_segment_ends_the_recording_after_storing_it(
        deps, clock: FakeClock, send_segment: SendSegment):
    recording_id = new_recording_id()

    await send_segment(recording_id, 0, headers={"X-Order-Completed": "true"})

    [recording] = await _all_recordings(deps)
    assert recording["endReason"] == "order"
    assert await _stored_segments(deps) == [(recording_id, 0)]


async def test_end_for_order_ends_only_that_visitors_active_recordings(
        deps, tenant: Tenant, clock: FakeClock, send_segment: SendSegment):
    mine, theirs = new_recording_id(), new_recording_id()
    await send_segment(mine, 0)
    await send_segment(theirs, 0, visitor="visitor-2")

    ended = await deps.recordings.end_for_order(tenant.site_id, VISITOR)

    assert ended == 1
    assert (await recordings.find_recording(deps.store, tenant.site_id, mine))["endReason"] \
        == "order"
    assert (await recordings.find_recording(deps.store, tenant.site_id, theirs))["status"] \
        == "active"


async def test_two_segments_racing_after_inactivity_create_one_successor(
        deps, clock: FakeClock, send_segment: SendSegment):
    recording_id = new_recording_id()
    await send_segment(recording_id, 0)
    clock.advance(INACTIVITY * 2)

    answers = await asyncio.gather(*(send_segment(recording_id, seq) for seq in range(1, 6)))

    assert {answer.code for answer in answers} == {200}
    old, new = await _all_recordings(deps)
    assert new["continuesFrom"] == old["_id"]
    assert {answer.json()["recordingId"] for answer in answers} == {new["_id"]}
    assert await _stored_segments(deps) == sorted(
        [(recording_id, 0)] + [(new["_id"], seq) for seq in range(1, 6)])


async def test_the_sweeper_ends_a_recording_idle_past_the_threshold_without_a_next_segment(
        deps, clock: FakeClock, send_segment: SendSegment):
    idle, busy = new_recording_id(), new_recording_id()
    await send_segment(idle, 0)
    last_activity = clock.now
    await send_segment(busy, 0, visitor="visitor-2")
    clock.advance(INACTIVITY)
    assert await deps.segment_sweeper.end_idle_recordings() == 0, "not idle past it yet"

    await send_segment(busy, 1, visitor="visitor-2")
    clock.advance(1)
    ended = await deps.segment_sweeper.end_idle_recordings()

    assert ended == 1
    [recording] = [doc for doc in await _all_recordings(deps) if doc["_id"] == idle]
    assert recording["status"] == "ended" and recording["endReason"] == "inactivity"
    assert recording["endedAt"] == last_activity
    assert (await recordings.find_recording(deps.store, recording["siteId"], busy))[
        "status"] == "active"
    assert await deps.segment_sweeper.end_idle_recordings() == 0
    assert deps.metrics.total("recordings_ended_idle_total") == 1


async def test_a_segment_after_the_sweeper_ended_its_recording_starts_the_continuation(
        deps, clock: FakeClock, send_segment: SendSegment):
    recording_id = new_recording_id()
    await send_segment(recording_id, 0)
    last_activity = clock.now
    clock.advance(INACTIVITY + 1)
    await deps.segment_sweeper.end_idle_recordings()

    late = await send_segment(recording_id, 1)

    old, new = await _all_recordings(deps)
    assert old["endReason"] == "inactivity" and old["endedAt"] == last_activity
    assert new["continuesFrom"] == recording_id and new["status"] == "active"
    assert late.json()["recordingId"] == new["_id"]


async def test_the_background_sweeper_ends_idle_recordings_by_itself(
        deps, clock: FakeClock, send_segment: SendSegment):
    recording_id = new_recording_id()
    await send_segment(recording_id, 0)
    clock.advance(INACTIVITY + 1)
    deps.segment_sweeper.interval = 0.05
    deps.segment_sweeper.start()

    for _ in range(100):
        [recording] = await _all_recordings(deps)
        if recording["status"] == "ended":
            break
        await asyncio.sleep(0.05)
    await deps.segment_sweeper.close()

    assert recording["status"] == "ended" and recording["endReason"] == "inactivity"


async def test_a_recording_keeps_the_country_and_device_it_started_with_as_does_its_successor(
        fetch: Fetch, tenant: Tenant, deps, clock: FakeClock, send_segment: SendSegment):
    recording_id = new_recording_id()
    started = await fetch("/ingest/recordings/start", "POST",
                          headers={"X-Service-Key": tenant.api_key},
                          json_body=context(recordingId=recording_id, ip=GB_IP, userAgent=PHONE))
    assert started.code == 200, started
    # The visitor moves on to a German desktop; the recording of the phone does not follow.
    await fetch("/ingest/visitors", "POST", headers={"X-Service-Key": tenant.api_key},
                json_body=context(ip=DE_IP))
    clock.advance(INACTIVITY + 1)

    await send_segment(recording_id, 0)

    first, successor = await _all_recordings(deps)
    assert successor["continuesFrom"] == first["_id"]
    for recording in (first, successor):
        assert (recording["country"], recording["device"]) == ("GB", "mobile")
        assert recording["marks"] == {"error": 0, "rage_click": 0, "dead_click": 0, "lead": 0}


async def test_a_recording_its_segment_starts_takes_the_country_and_device_of_the_profile(
        fetch: Fetch, tenant: Tenant, deps, clock: FakeClock, send_segment: SendSegment):
    await fetch("/ingest/visitors", "POST", headers={"X-Service-Key": tenant.api_key},
                json_body=context(ip=DE_IP))

    await send_segment(new_recording_id(), 0)

    [recording] = await _all_recordings(deps)
    assert (recording["country"], recording["device"]) == ("DE", "desktop")


#: Every store operation a rotation performs, failing once each.
ROTATION_FAULTS = [
    ("segments.files", "find_one", 0),            # the duplicate fast path
    ("recordings", "find_one_and_update", 0),     # touching the old recording
    ("recordings", "find_one", 0),                # reading why it is over
    ("recordings", "update_one", 0),              # ending it
    ("visitors", "find", 0),                      # the country and device it did not know
    ("recordings", "update_one", 1),              # creating the successor
    ("visitors", "find_one_and_update", 0),       # counting the successor on the profile
    ("recordings", "update_one", 2),              # linking old to new
    ("recordings", "find_one_and_update", 1),     # touching the successor
    ("segments.chunks", "insert_many", 0),        # storing the segment's bytes
    ("segments.files", "insert_one", 0),          # storing the segment's files document
    ("recordings", "update_one", 3),              # adding the page
]


@pytest.mark.parametrize(("collection", "operation", "skip"), ROTATION_FAULTS)
async def test_a_store_failure_during_rotation_loses_and_duplicates_nothing_on_retry(
        deps, clock: FakeClock, send_segment: SendSegment, collection: str, operation: str,
        skip: int, faults):
    recording_id = new_recording_id()
    await send_segment(recording_id, 0)
    clock.advance(INACTIVITY * 2)
    faults.fail(collection, operation, skip=skip)

    failed = await send_segment(recording_id, 1)
    retried = await send_segment(recording_id, 1)
    again = await send_segment(recording_id, 2)

    assert failed.code in (200, 503), failed
    if failed.code == 503:
        assert failed.headers["Retry-After"] == "1"
    assert retried.code == again.code == 200
    chain = await _all_recordings(deps)
    assert len(chain) == 2
    successor = chain[1]["_id"]
    assert chain[1]["continuesFrom"] == recording_id
    assert await _stored_segments(deps) == sorted(
        [(recording_id, 0), (successor, 1), (successor, 2)])
    assert await deps.store.bucket("segments").chunks.count_documents({}) == 3


async def test_every_listed_rotation_fault_is_actually_hit(deps, clock: FakeClock,
                                                           send_segment: SendSegment, faults):
    recording_id = new_recording_id()
    await send_segment(recording_id, 0)
    clock.advance(INACTIVITY * 2)
    faults.record_calls = True

    await send_segment(recording_id, 1)

    calls = faults.calls
    for collection, operation, skip in ROTATION_FAULTS:
        assert calls.count((collection, operation)) > skip, (collection, operation, skip)


async def test_the_session_timeline_lists_recordings_in_order_with_durations(
        deps, tenant: Tenant, clock: FakeClock, send_segment: SendSegment):
    first = new_recording_id()
    await send_segment(first, 0)
    clock.advance(40)
    await send_segment(first, 1)
    clock.advance(INACTIVITY * 10)
    await send_segment(first, 2, url="https://shop.example/cart")

    timeline = await recordings.session_timeline(deps.store, tenant.site_id, VISITOR)

    assert [entry["duration"] for entry in timeline] == [40.0, 0.0]
    assert timeline[0]["id"] == first
    assert timeline[0]["startedAt"] < timeline[1]["startedAt"]
    assert timeline[1]["pageUrl"] == "https://shop.example/cart"
