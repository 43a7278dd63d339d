"""A recording lasts as long as its footage (issue 28 point 7): what the shop's server sends
later, an order lead or a PHP error, is no footage, so neither the duration the recordings list
shows nor the one it filters on grows with it."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from documents import recordings
from tests.recordings.kit import FakeClock, gzip_json, rrweb_events
from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest, send_errors

SHOP = "https://shop.example"
CONTEXT = {"visitorId": "ada", "sessionId": "ada-s", "url": f"{SHOP}/checkout",
           "ip": "203.0.113.9", "userAgent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0"}


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


async def _short_visit_then_an_order_lead(fetch: Fetch, tenant: Tenant, deps,
                                         ingest: Ingest) -> str:
    """A 33 s visit with 32 s of footage, then the order lead and a PHP error four minutes
    later; returns the recording's id."""
    clock = FakeClock()
    clock.now -= timedelta(minutes=10)  # the whole visit is in the past, as its times must be
    deps.recordings.clock = clock
    visit_start = clock.now
    recording_id = str(uuid.uuid4())
    await ingest("recordings/start", {**CONTEXT, "recordingId": recording_id})
    # Two segments of footage: 0-16 s and 16-32 s of the visit, the last arriving at 33 s.
    for seq, (since, until) in enumerate([(0, 16), (16, 32)]):
        clock.now = visit_start + timedelta(seconds=until + 1)
        answer = await fetch("/ingest/recordings/segment", "POST",
                             body=gzip_json(rrweb_events(console=False)), headers={
            "Content-Type": "application/octet-stream", "X-Service-Key": tenant.api_key,
            "X-Recording-Id": recording_id, "X-Segment-Seq": str(seq), "X-Visitor-Id": "ada",
            "X-Session-Id": "ada-s", "X-Page-Url": f"{SHOP}/checkout",
            "X-Segment-Started-At": _iso(visit_start + timedelta(seconds=since)),
            "X-Segment-Ended-At": _iso(visit_start + timedelta(seconds=until))})
        assert answer.code == 200, answer
    # Four minutes later the shop's server sends the order lead and a PHP error.
    clock.now = visit_start + timedelta(seconds=33 + 240)
    await ingest("leads", {**CONTEXT, "email": "ada@example.com", "kind": "checkout",
                           "orderCompleted": True, "occurredAt": _iso(clock.now)})
    await send_errors(ingest, deps, [{
        **CONTEXT, "source": "php", "type": "E_WARNING", "message": "Undefined index: vat",
        "occurredAt": _iso(clock.now + timedelta(seconds=2))}])
    await deps.derivation.fold()
    return recording_id


async def _listed(fetch: Fetch, tenant: Tenant, token: str, query: str = ""
                  ) -> list[tuple[str, float]]:
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/recordings?{query}", token=token)
    assert answer.code == 200, answer
    return [(item["id"], item["duration"]) for item in answer.json()["items"]]


async def test_an_order_lead_minutes_after_a_short_visit_leaves_its_recording_as_long_as_the_replay(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    recording_id = await _short_visit_then_an_order_lead(fetch, tenant, deps, ingest)
    site = f"/api/v1/sites/{tenant.site_id}"

    async def listed(query: str) -> list[tuple[str, float]]:
        return await _listed(fetch, tenant, viewer_token, query)

    # The footage runs from the first segment's start to the last one's end: 32 - 0 s.
    assert await listed("") == [(recording_id, 32.0)]
    assert await listed("minDuration=60") == []
    assert await listed("minDuration=30&maxDuration=40") == [(recording_id, 32.0)]
    timeline = (await fetch(f"{site}/recordings/{recording_id}/timeline",
                            token=viewer_token)).json()
    assert timeline["recording"]["duration"] == 32.0
    assert timeline["recording"]["status"] == "ended"  # the order still ends the recording
    assert "lead" in {event["kind"] for event in timeline["events"]}


async def test_a_recording_stretched_before_the_upgrade_is_listed_as_long_as_its_footage_after(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    recording_id = await _short_visit_then_an_order_lead(fetch, tenant, deps, ingest)
    await deps.store.collection("recordings").update_one({"_id": recording_id},
                                                         {"$unset": {"footage": ""}})
    # As stored before: from its start to the order lead, 33 + 240 s.
    assert await _listed(fetch, tenant, viewer_token) == [(recording_id, 273.0)]

    await recordings.backfill_footage(deps.store)

    assert await _listed(fetch, tenant, viewer_token) == [(recording_id, 32.0)]
    assert await _listed(fetch, tenant, viewer_token, "minDuration=60") == []
