"""Interactions: clicks, rage clicks, dead clicks and scroll depth, kept in bounded buckets."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from documents import interactions
from tests.recordings.kit import PAGE, VISITOR, context, new_recording_id
from tests.support.app import Fetch, Tenant


async def _send(fetch: Fetch, api_key: str, items: list[dict], **fields):
    return await fetch("/ingest/recordings/interactions", "POST",
                       headers={"X-Service-Key": api_key},
                       json_body=context(interactions=items, **fields))


async def test_each_kind_of_interaction_is_stored_with_an_id_and_its_session(
        fetch: Fetch, tenant: Tenant, deps):
    recording_id = new_recording_id()
    items = [
        {"kind": "click", "at": "2026-01-05T10:00:00Z", "selector": "#buy", "x": 10, "y": 20},
        {"kind": "rage_click", "at": "2026-01-05T10:00:01Z", "selector": "#buy", "count": 5},
        {"kind": "dead_click", "at": "2026-01-05T10:00:02Z", "selector": "span.price"},
        {"kind": "scroll_depth", "at": "2026-01-05T10:00:03Z", "depth": 75},
    ]

    answer = await _send(fetch, tenant.api_key, items, recordingId=recording_id)

    assert answer.json() == {"ok": True, "stored": 4, "droppedCount": 0}
    stored = await interactions.list_interactions(deps.store, tenant.site_id, VISITOR)
    assert [event["kind"] for event in stored] == ["click", "rage_click", "dead_click",
                                                  "scroll_depth"]
    assert len({event["id"] for event in stored}) == 4
    assert {event["sessionId"] for event in stored} == {"browser-session-1"}
    assert {event["recordingId"] for event in stored} == {recording_id}
    assert {event["url"] for event in stored} == {PAGE}
    assert stored[1]["count"] == 5 and stored[3]["depth"] == 75
    profile = await deps.store.collection("visitors").find_one({"visitorId": VISITOR})
    assert profile["counts"]["interactions"] == 4


async def test_buckets_fill_to_the_cap_and_roll_over(deps, tenant: Tenant):
    start = datetime(2026, 1, 5, tzinfo=UTC)
    events = [{"id": str(n), "kind": "click", "at": start + timedelta(seconds=n)}
              for n in range(7)]

    await interactions.append_interactions(deps.store, tenant.site_id, VISITOR, events[:2],
                                           cap=3)
    await interactions.append_interactions(deps.store, tenant.site_id, VISITOR, events[2:],
                                           cap=3)

    buckets = [doc async for doc in deps.store.collection("interaction_buckets").find({})]
    assert sorted(bucket["count"] for bucket in buckets) == [2, 2, 3]
    assert all(len(bucket["events"]) == bucket["count"] <= 3 for bucket in buckets)
    listed = await interactions.list_interactions(deps.store, tenant.site_id, VISITOR)
    assert [event["id"] for event in listed] == [str(n) for n in range(7)]


async def test_a_bucket_never_grows_past_the_cap(deps, tenant: Tenant):
    at = datetime(2026, 1, 5, tzinfo=UTC)
    for n in range(10):
        await interactions.append_interactions(
            deps.store, tenant.site_id, VISITOR, [{"id": str(n), "kind": "click", "at": at}],
            cap=4)

    counts = sorted([doc["count"] async for doc in
                     deps.store.collection("interaction_buckets").find({})])
    assert counts == [2, 4, 4]


async def test_an_event_on_a_page_excluded_from_all_collection_is_dropped_and_the_rest_kept(
        fetch: Fetch, make_tenant, deps):
    site = await make_tenant("strict", settings={
        "excludedUrls": [{"pattern": "/account*", "scope": "all"}]})
    before = deps.metrics.total("ingest_items_total", kind="interaction", reason="excluded_url")

    answer = await _send(fetch, site.api_key, [
        {"kind": "click", "url": "https://shop.example/account/orders"},
        {"kind": "click", "url": "https://shop.example/account"},
        {"kind": "click"},
    ])

    assert answer.json() == {"ok": True, "stored": 1, "droppedCount": 2}
    stored = await interactions.list_interactions(deps.store, site.site_id, VISITOR)
    assert [event["url"] for event in stored] == [PAGE]
    after = deps.metrics.total("ingest_items_total", kind="interaction", reason="excluded_url")
    assert after - before == 2


async def test_interactions_on_a_page_excluded_only_from_replay_are_kept(
        fetch: Fetch, make_tenant, deps):
    site = await make_tenant("careful", settings={
        "excludedUrls": [{"pattern": "/checkout*", "scope": "replay"}]})

    answer = await _send(fetch, site.api_key, [{"kind": "dead_click"}],
                         url="https://shop.example/checkout")

    assert answer.json()["stored"] == 1


async def test_gpc_drops_the_whole_batch(fetch: Fetch, tenant: Tenant, deps):
    answer = await _send(fetch, tenant.api_key, [{"kind": "click"}, {"kind": "click"}], gpc=True)

    assert answer.json() == {"ok": True, "stored": 0, "droppedCount": 2}
    assert await deps.store.collection("interaction_buckets").count_documents({}) == 0


@pytest.mark.parametrize(("items", "field"), [
    ([{"kind": "click"}] * 201, "interactions"),
    ([], "interactions"),
    ([{"kind": "hover"}], "interactions.0.kind"),
    ([{"kind": "scroll_depth"}], "interactions.0.depth"),
    ([{"kind": "scroll_depth", "depth": 120}], "interactions.0.depth"),
    ([{"kind": "click", "password": "x"}], "interactions.0.password"),
])
async def test_a_malformed_batch_is_refused_naming_the_field(fetch: Fetch, tenant: Tenant, deps,
                                                             items: list, field: str):
    answer = await _send(fetch, tenant.api_key, items)

    assert answer.code == 422
    assert answer.json()["error"]["field"] == field
    assert await deps.store.collection("interaction_buckets").count_documents({}) == 0
