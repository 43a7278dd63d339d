"""Recordings in the dashboard data API: lists, segment lists and streamed segment downloads."""

from __future__ import annotations

from documents import recordings
from tests.support.app import Fetch, Tenant
from tests.support.visitor_data import seed_visitor


def _site(tenant: Tenant, rest: str) -> str:
    return f"/api/v1/sites/{tenant.site_id}{rest}"


async def _checked_segment(fetch: Fetch, tenant: Tenant, deps) -> tuple[str, str, bytes]:
    seeded = await seed_visitor(fetch, tenant, deps)
    segment = await deps.store.bucket("segments").files.find_one(
        {"metadata.recordingId": seeded.recording_id})
    await recordings.mark_segment_checked(deps.store, segment["_id"], console_events=0)
    return seeded.recording_id, segment["_id"], await deps.store.bucket("segments").read(
        segment["_id"])


async def test_recordings_are_listed_newest_first_and_by_visitor(fetch: Fetch, tenant: Tenant,
                                                                 deps, viewer_token: str):
    seeded = await seed_visitor(fetch, tenant, deps)
    await seed_visitor(fetch, tenant, deps, "grace-1", email="grace@example.com", wp_user_id=None)
    everything = (await fetch(_site(tenant, "/recordings"), token=viewer_token)).json()
    assert len(everything["items"]) == 4  # two live and two legacy recordings
    starts = [item["startedAt"] for item in everything["items"]]
    assert starts == sorted(starts, reverse=True)
    ada = (await fetch(_site(tenant, f"/recordings?visitorId={seeded.visitor_id}"),
                       token=viewer_token)).json()
    assert {item["visitorId"] for item in ada["items"]} == {seeded.visitor_id}
    assert seeded.recording_id in [item["id"] for item in ada["items"]]


async def test_a_checked_segment_streams_its_exact_bytes_with_an_etag(
        fetch: Fetch, tenant: Tenant, deps, viewer_token: str):
    recording_id, file_id, stored = await _checked_segment(fetch, tenant, deps)
    listing = await fetch(_site(tenant, f"/recordings/{recording_id}/segments"),
                          token=viewer_token)
    assert [s["fileId"] for s in listing.json()["segments"]] == [file_id]
    answer = await fetch(_site(tenant, f"/segments/{file_id}"), token=viewer_token,
                         decompress_response=False)
    assert answer.code == 200, answer
    assert answer.body == stored
    assert answer.headers["Content-Type"] == "application/gzip"
    assert "Content-Encoding" not in answer.headers
    etag = answer.headers["Etag"]
    assert etag == f'"{file_id}-{len(stored)}"'
    again = await fetch(_site(tenant, f"/segments/{file_id}"), token=viewer_token,
                        headers={"If-None-Match": etag})
    assert again.code == 304 and again.body == b""
    stale = await fetch(_site(tenant, f"/segments/{file_id}"), token=viewer_token,
                        headers={"If-None-Match": '"something-else"'})
    assert stale.code == 200 and stale.body == stored


async def test_an_unchecked_segment_is_neither_listed_nor_served(fetch: Fetch, tenant: Tenant,
                                                                deps):
    seeded = await seed_visitor(fetch, tenant, deps)
    segment = await deps.store.bucket("segments").files.find_one(
        {"metadata.recordingId": seeded.recording_id})
    listing = await fetch(_site(tenant, f"/recordings/{seeded.recording_id}/segments"),
                          token=tenant.token)
    assert listing.json()["segments"] == []
    answer = await fetch(_site(tenant, f"/segments/{segment['_id']}"), token=tenant.token)
    assert answer.code == 404


async def test_a_restricted_visitors_footage_is_hidden(fetch: Fetch, tenant: Tenant, deps):
    recording_id, file_id, _ = await _checked_segment(fetch, tenant, deps)
    await fetch(_site(tenant, "/visitors/ada-1/restriction"), "PUT", token=tenant.token,
                json_body={"on": True})
    assert (await fetch(_site(tenant, f"/segments/{file_id}"), token=tenant.token)).code == 404
    listing = await fetch(_site(tenant, f"/recordings/{recording_id}/segments"),
                          token=tenant.token)
    assert listing.code == 404
    assert (await fetch(_site(tenant, "/recordings"), token=tenant.token)).json()["items"] == []
