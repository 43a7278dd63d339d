"""After a reload the live feed still shows what arrived in the past hour (issue 28 point 17):
GET .../live/recent rebuilds the feed's events from stored errors and leads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest, send_errors


def _recent(tenant: Tenant) -> str:
    return f"/api/v1/sites/{tenant.site_id}/live/recent"


async def test_errors_and_leads_of_the_past_hour_are_in_the_feed_after_a_reload(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest):
    await send_errors(ingest, deps, [{"visitorId": "v-1", "type": "RangeError",
                                      "message": "the basket overflowed",
                                      "source": "javascript"}])
    await ingest("leads", {"visitorId": "v-2", "email": "ada@example.com", "name": "Ada"})
    answer = await fetch(_recent(tenant), token=tenant.token)
    assert answer.code == 200, answer
    events = answer.json()["events"]
    assert [event["type"] for event in events] == ["new_lead", "new_error"]
    lead, error = events
    assert lead["lead"]["displayName"] == "Ada" and lead["lead"]["visitorId"] == "v-2"
    assert error["error"]["type"] == "RangeError"
    assert error["error"]["message"] == "the basket overflowed"
    assert error["siteId"] == tenant.site_id and error["time"].endswith("Z")


async def test_the_feed_after_a_reload_keeps_to_the_past_hour_and_twenty_events(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest):
    old = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    await ingest("leads", {"visitorId": "v-old", "email": "old@example.com",
                           "occurredAt": old})
    for n in range(25):
        await ingest("leads", {"visitorId": f"v-{n}", "email": f"lead{n}@example.com"})
    events = (await fetch(_recent(tenant), token=tenant.token)).json()["events"]
    assert len(events) == 20
    assert "v-old" not in {event["lead"]["visitorId"] for event in events}


async def test_a_restricted_visitors_lead_and_another_organizations_feed_stay_hidden(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, make_tenant):
    await ingest("leads", {"visitorId": "v-held", "email": "held@example.com"})
    await deps.store.collection("visitors").update_one(
        {"siteId": tenant.site_id, "visitorId": "v-held"}, {"$set": {"restricted": True}})
    assert (await fetch(_recent(tenant), token=tenant.token)).json()["events"] == []
    other = await make_tenant()
    assert (await fetch(_recent(tenant), token=other.token)).code == 404
