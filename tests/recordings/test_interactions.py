"""Interactions: clicks, rage clicks, dead clicks and scroll depth, kept in bounded buckets."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

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


# Retried batches: idempotent on (site, visitor, batchId) ------------------------------------

BATCH = "3b1f6c0e-2d4a-4e8b-9f10-5a6b7c8d9e0f"
CLICKS = [{"kind": "click", "at": "2026-01-05T10:00:00Z", "selector": "#buy"},
          {"kind": "dead_click", "at": "2026-01-05T10:00:01Z", "selector": "span.price"}]


async def _events(deps, site_id: str, visitor: str = VISITOR) -> list[dict]:
    return await interactions.list_interactions(deps.store, site_id, visitor)


async def _interaction_count(deps, visitor: str = VISITOR) -> int:
    profile = await deps.store.collection("visitors").find_one({"visitorId": visitor})
    return profile["counts"]["interactions"]


async def test_a_batch_sent_again_with_its_batch_id_is_stored_and_counted_once(
        fetch: Fetch, tenant: Tenant, deps):
    first = await _send(fetch, tenant.api_key, CLICKS, batchId=BATCH)
    again = await _send(fetch, tenant.api_key, CLICKS, batchId=BATCH)

    assert first.json() == {"ok": True, "stored": 2, "droppedCount": 0}
    assert again.json() == {"ok": True, "stored": 2, "droppedCount": 0, "duplicate": True}
    assert [event["kind"] for event in await _events(deps, tenant.site_id)] == [
        "click", "dead_click"]
    assert await _interaction_count(deps) == 2


async def test_a_batch_without_a_batch_id_is_stored_every_time_it_is_sent(
        fetch: Fetch, tenant: Tenant, deps):
    for _ in range(2):
        answer = await _send(fetch, tenant.api_key, CLICKS)
        assert answer.json() == {"ok": True, "stored": 2, "droppedCount": 0}

    assert len(await _events(deps, tenant.site_id)) == 4
    assert await _interaction_count(deps) == 4


async def test_the_same_batch_id_from_another_visitor_or_site_is_another_batch(
        fetch: Fetch, tenant: Tenant, make_tenant, deps):
    other_site = await make_tenant("other")

    await _send(fetch, tenant.api_key, CLICKS, batchId=BATCH)
    other_visitor = await _send(fetch, tenant.api_key, CLICKS, batchId=BATCH,
                                visitorId="visitor-2")
    other_shop = await _send(fetch, other_site.api_key, CLICKS, batchId=BATCH)

    assert other_visitor.json()["stored"] == other_shop.json()["stored"] == 2
    assert "duplicate" not in other_visitor.json() and "duplicate" not in other_shop.json()
    assert len(await _events(deps, tenant.site_id)) == 2
    assert len(await _events(deps, tenant.site_id, "visitor-2")) == 2
    assert len(await _events(deps, other_site.site_id)) == 2


async def test_a_batch_that_failed_half_way_is_stored_and_counted_once_on_retry(
        fetch: Fetch, tenant: Tenant, deps, faults):
    # The events are written; the profile update after them fails, so the caller sees a 503
    # and the events go with it.
    faults.fail("visitors", "find_one_and_update")

    failed = await _send(fetch, tenant.api_key, CLICKS, batchId=BATCH)
    assert failed.code == 503, failed
    assert failed.json()["error"]["code"] == "unavailable"
    assert failed.headers["Retry-After"] == "1"
    assert await _events(deps, tenant.site_id) == []

    retried = await _send(fetch, tenant.api_key, CLICKS, batchId=BATCH)
    again = await _send(fetch, tenant.api_key, CLICKS, batchId=BATCH)

    assert retried.code == 200 and "duplicate" not in retried.json()
    assert again.code == 200 and again.json()["duplicate"] is True
    assert len(await _events(deps, tenant.site_id)) == 2
    profile = await deps.store.collection("visitors").find_one({"visitorId": VISITOR})
    assert profile["counts"]["interactions"] == 2


async def test_a_batch_over_the_bucket_cap_is_stored_once_even_when_attempts_race(
        deps, tenant: Tenant):
    start = datetime(2026, 1, 5, tzinfo=UTC)
    events = [{"id": str(n), "kind": "click", "at": start + timedelta(seconds=n)}
              for n in range(7)]

    async def write(session: Any) -> None:
        await interactions.append_batch(deps.store, tenant.site_id, VISITOR, BATCH, events,
                                        cap=3, session=session)

    stored = await asyncio.gather(*(deps.store.write_once(write) for _ in range(3)))

    assert stored.count(True) == 1
    buckets = [doc async for doc in deps.store.collection("interaction_buckets").find({})]
    assert sorted(bucket["count"] for bucket in buckets) == [1, 3, 3]
    listed = await interactions.list_interactions(deps.store, tenant.site_id, VISITOR)
    assert [event["id"] for event in listed] == [str(n) for n in range(7)]


@pytest.mark.parametrize("batch_id", ["", "has space", "x" * 65, 7])
async def test_a_malformed_batch_id_is_refused_naming_the_field(
        fetch: Fetch, tenant: Tenant, deps, batch_id):
    answer = await _send(fetch, tenant.api_key, CLICKS, batchId=batch_id)

    assert answer.code == 422
    assert answer.json()["error"]["field"] == "batchId"
    assert await deps.store.collection("interaction_buckets").count_documents({}) == 0
