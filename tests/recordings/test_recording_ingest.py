"""Recording ingest over HTTP: start, segment, end, idempotency and the per-site privacy rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from documents import recordings
from tests.recordings.conftest import SendSegment
from tests.recordings.kit import PAGE, VISITOR, context, gzip_json, new_recording_id, rrweb_events
from tests.support.app import Fetch, Tenant


async def _start(fetch: Fetch, api_key: str, **fields) -> dict:
    answer = await fetch("/ingest/recordings/start", "POST", json_body=context(**fields),
                         headers={"X-Service-Key": api_key})
    assert answer.code == 200, answer
    return answer.json()


async def _segment_files(store) -> list[dict]:
    return [doc async for doc in store.bucket("segments").files.find({})]


async def test_start_segment_end_store_a_recording_with_its_segment_in_gridfs(
        fetch: Fetch, tenant: Tenant, deps, send_segment: SendSegment):
    started = await _start(fetch, tenant.api_key)
    recording_id = started["id"]
    body = gzip_json(rrweb_events(console=False))
    # Yesterday: a client time over 30 days old would be taken as the time of receipt.
    day = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()

    stored = await send_segment(recording_id, 0, body=body, headers={
        "X-Segment-Started-At": f"{day}T10:00:00Z",
        "X-Segment-Ended-At": f"{day}T10:00:09Z",
    })
    ended = await fetch("/ingest/recordings/end", "POST", headers={"X-Service-Key": tenant.api_key},
                        json_body=context(recordingId=recording_id))

    assert stored.code == 200 and stored.json()["recordingId"] == recording_id
    assert ended.code == 200
    recording = await recordings.find_recording(deps.store, tenant.site_id, recording_id)
    assert recording["visitorId"] == VISITOR
    assert recording["sessionId"] == "browser-session-1"
    assert recording["status"] == "ended" and recording["endReason"] == "explicit"
    assert recording["endedAt"] is not None
    assert [page["url"] for page in recording["pages"]] == [PAGE]
    [file] = await _segment_files(deps.store)
    assert file["_id"] == stored.json()["id"]
    assert file["length"] == len(body)
    assert file["metadata"]["siteId"] == tenant.site_id
    assert file["metadata"]["visitorId"] == VISITOR
    assert file["metadata"]["recordingId"] == recording_id
    assert file["metadata"]["seq"] == 0
    assert file["metadata"]["pageUrl"] == PAGE
    assert file["metadata"]["startedAt"].isoformat().startswith(f"{day}T10:00:00")
    assert file["metadata"]["endedAt"].isoformat().startswith(f"{day}T10:00:09")
    assert await deps.store.bucket("segments").read(file["_id"]) == body


async def test_a_new_recording_counts_on_the_visitor_profile_once(fetch: Fetch, tenant: Tenant,
                                                                  deps):
    recording_id = new_recording_id()
    first = await _start(fetch, tenant.api_key, recordingId=recording_id)
    again = await _start(fetch, tenant.api_key, recordingId=recording_id)

    assert first["id"] == again["id"] == recording_id
    assert await deps.store.collection("recordings").count_documents({}) == 1
    profile = await deps.store.collection("visitors").find_one({"visitorId": VISITOR})
    assert profile["counts"]["recordings"] == 1


async def test_a_repeated_segment_is_stored_once_and_acknowledged_as_a_duplicate(
        fetch: Fetch, tenant: Tenant, deps, send_segment: SendSegment):
    recording_id = (await _start(fetch, tenant.api_key))["id"]

    first = await send_segment(recording_id, 3)
    second = await send_segment(recording_id, 3)

    assert first.code == second.code == 200
    assert second.json().get("duplicate") is True
    assert len(await _segment_files(deps.store)) == 1
    assert await deps.store.bucket("segments").chunks.count_documents({}) == 1


async def test_the_unique_index_alone_keeps_a_raced_segment_single(deps, tenant: Tenant):
    metadata = {"recordingId": "r", "sentFor": "r", "seq": 1, "siteId": tenant.site_id}

    assert await recordings.save_segment(deps.store, "file-a", b"\x1f\x8bxx", metadata)
    assert not await recordings.save_segment(deps.store, "file-b", b"\x1f\x8byy", metadata)

    assert await deps.store.bucket("segments").chunks.count_documents({"files_id": "file-b"}) == 0


async def test_recordings_off_acknowledges_and_stores_nothing(
        fetch: Fetch, make_tenant, deps, send_segment: SendSegment):
    site = await make_tenant("quiet", settings={"recordings": False})
    before = deps.metrics.total("ingest_items_total", outcome="dropped", reason="recordings_off")

    started = await _start(fetch, site.api_key)
    segment = await send_segment(new_recording_id(), 0, key=site.api_key)

    assert started == {"ok": True, "dropped": "recordings_off"}
    assert segment.code == 200 and segment.json()["dropped"] == "recordings_off"
    assert await deps.store.collection("recordings").count_documents({}) == 0
    assert await _segment_files(deps.store) == []
    after = deps.metrics.total("ingest_items_total", outcome="dropped", reason="recordings_off")
    assert after - before == 2


async def test_segments_of_a_page_excluded_from_replay_are_dropped_and_other_data_kept(
        fetch: Fetch, make_tenant, deps, send_segment: SendSegment):
    site = await make_tenant("careful", settings={
        "excludedUrls": [{"pattern": "/checkout*", "scope": "replay"}]})
    recording_id = (await _start(fetch, site.api_key))["id"]
    checkout = "https://shop.example/checkout/pay"

    kept = await send_segment(recording_id, 0, key=site.api_key)
    dropped = await send_segment(recording_id, 1, key=site.api_key, url=checkout)
    clicks = await fetch("/ingest/recordings/interactions", "POST",
                         headers={"X-Service-Key": site.api_key},
                         json_body=context(url=checkout, interactions=[{"kind": "click"}]))

    assert kept.json()["id"]
    assert dropped.json()["dropped"] == "excluded_from_replay"
    files = await _segment_files(deps.store)
    assert [file["metadata"]["seq"] for file in files] == [0]
    assert clicks.json()["stored"] == 1
    recording = await recordings.find_recording(deps.store, site.site_id, recording_id)
    assert checkout not in [page["url"] for page in recording["pages"]]


async def test_a_recording_started_on_an_excluded_page_is_not_stored(fetch: Fetch, make_tenant,
                                                                      deps):
    site = await make_tenant("careful", settings={
        "excludedUrls": [{"pattern": "/checkout*", "scope": "replay"}]})

    started = await _start(fetch, site.api_key, url="https://shop.example/checkout")

    assert started == {"ok": True, "dropped": "excluded_from_replay"}
    assert await deps.store.collection("recordings").count_documents({}) == 0


async def test_a_page_excluded_from_all_collection_stores_nothing_at_all(
        fetch: Fetch, make_tenant, deps, send_segment: SendSegment):
    site = await make_tenant("strict", settings={
        "excludedUrls": [{"pattern": "/account*", "scope": "all"}]})
    account = "https://shop.example/account"

    started = await _start(fetch, site.api_key, url=account)
    segment = await send_segment(new_recording_id(), 0, key=site.api_key, url=account)
    clicks = await fetch("/ingest/recordings/interactions", "POST",
                         headers={"X-Service-Key": site.api_key},
                         json_body=context(url=account, interactions=[{"kind": "click"}]))

    assert started["dropped"] == segment.json()["dropped"] == "excluded_url"
    assert clicks.json() == {"ok": True, "stored": 0, "droppedCount": 1}
    for name in ("recordings", "segments.files", "segments.chunks", "interaction_buckets",
                 "visitors"):
        assert await deps.store.collection(name).count_documents({}) == 0, name


@pytest.mark.parametrize("signal", [{"gpc": True}, {"consent": "denied"}])
async def test_gpc_or_missing_consent_stores_no_recording(fetch: Fetch, make_tenant, deps,
                                                          signal: dict):
    site = await make_tenant("consent", settings={"requireConsent": True})

    started = await _start(fetch, site.api_key, **signal)

    assert started["dropped"] in ("gpc", "consent_missing")
    assert await deps.store.collection("recordings").count_documents({}) == 0


async def test_a_segment_under_gpc_headers_is_dropped(deps, send_segment: SendSegment):
    answer = await send_segment(new_recording_id(), 0, headers={"X-Visitor-Gpc": "1"})

    assert answer.json()["dropped"] == "gpc"
    assert await _segment_files(deps.store) == []


async def test_a_body_that_is_not_gzip_is_refused_with_422(deps, send_segment: SendSegment):
    answer = await send_segment(new_recording_id(), 0, body=b'[{"type": 4}]')

    assert answer.code == 422
    assert answer.json()["error"]["field"] == "body"
    assert await _segment_files(deps.store) == []
    assert await deps.store.collection("recordings").count_documents({}) == 0


@pytest.mark.parametrize(("header", "value"), [
    ("X-Segment-Seq", "three"), ("X-Recording-Id", "not-a-uuid"), ("X-Visitor-Gpc", "maybe"),
])
async def test_a_bad_metadata_header_is_refused_naming_the_header(
        send_segment: SendSegment, header: str, value: str):
    answer = await send_segment(new_recording_id(), 0, headers={header: value})

    assert answer.code == 422
    assert answer.json()["error"]["field"] == header


async def test_a_segment_without_its_page_url_is_refused_naming_the_header(
        fetch: Fetch, tenant: Tenant):
    answer = await fetch("/ingest/recordings/segment", "POST", body=gzip_json([]), headers={
        "Content-Type": "application/octet-stream", "X-Service-Key": tenant.api_key,
        "X-Recording-Id": new_recording_id(), "X-Segment-Seq": "0", "X-Visitor-Id": VISITOR,
    })

    assert answer.code == 422
    assert answer.json()["error"]["field"] == "X-Page-Url"


async def test_a_segment_sent_as_json_is_refused_with_415(send_segment: SendSegment):
    answer = await send_segment(new_recording_id(), 0,
                                headers={"Content-Type": "application/json"})

    assert answer.code == 415


@pytest.mark.parametrize("path", ["/ingest/recordings/start", "/ingest/recordings/end",
                                  "/ingest/recordings/interactions"])
@pytest.mark.parametrize("key", [None, "sk_wrong"])
async def test_recording_endpoints_refuse_a_missing_or_wrong_key(fetch: Fetch, deps, path: str,
                                                                 key: str | None):
    headers = {"X-Service-Key": key} if key else {}
    answer = await fetch(path, "POST", json_body=context(recordingId=new_recording_id()),
                         headers=headers)

    assert answer.code == 401
    assert await deps.store.collection("recordings").count_documents({}) == 0


@pytest.mark.parametrize("key", ["", "sk_wrong"])
async def test_the_segment_endpoint_refuses_a_missing_or_wrong_key(deps,
                                                                   send_segment: SendSegment,
                                                                   key: str):
    answer = await send_segment(new_recording_id(), 0, key=key)

    assert answer.code == 401
    assert await _segment_files(deps.store) == []


async def test_a_recording_id_of_another_site_is_not_taken_over(fetch: Fetch, tenant: Tenant,
                                                                make_tenant, deps):
    other = await make_tenant("other")
    recording_id = (await _start(fetch, tenant.api_key))["id"]

    answer = await fetch("/ingest/recordings/start", "POST", headers={"X-Service-Key":
                                                                      other.api_key},
                         json_body=context(recordingId=recording_id, url=PAGE + "?x"))

    assert answer.code == 409
    recording = await recordings.find_recording(deps.store, tenant.site_id, recording_id)
    assert [page["url"] for page in recording["pages"]] == [PAGE]
