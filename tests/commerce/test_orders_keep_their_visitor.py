"""A commerce event keeps its visitor alive for retention as a pageview does (issue 38 point 3):
a payment or refund weeks after the visit moves the visitor's last seen, so the retention purge
of profiles not seen for a while does not take the visitor, and their orders, away."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.retention.conftest import make_purger
from tests.support.app import Fetch, Tenant
from tests.support.commerce import orders_csv
from tests.support.ingest import Ingest

SHOP = "https://shop.example"


async def test_a_late_payment_keeps_the_visitor_and_the_order_past_the_profiles_retention(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest):
    now = datetime.now(UTC)
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH",
                         json_body={"settings": {"retentionDays": {"visitors": 30}}},
                         token=tenant.token)
    assert answer.code == 200, answer
    for visitor in ("ada", "ben"):
        await ingest("pageviews", {"visitorId": visitor, "url": f"{SHOP}/",
                                   "occurredAt": (now - timedelta(days=20)).isoformat()})
        await ingest("commerce", {"eventId": f"{visitor}-placed", "type": "order_placed",
                                  "visitorId": visitor, "orderId": f"{visitor}-1",
                                  "total": "59.90", "currency": "EUR",
                                  "occurredAt": (now - timedelta(days=20)).isoformat()})
    # The payment provider confirms ada's order today; ben's is never paid.
    await ingest("commerce", {"eventId": "ada-paid", "type": "order_paid", "orderId": "ada-1",
                              "occurredAt": now.isoformat()})
    # Fifteen days on, the 30-day cutoff is 15 days ago: ben, last seen 20 days ago, goes
    # with his order; ada was last seen at her payment.
    report = await make_purger(deps.store).purge(now + timedelta(days=15))
    assert report is not None and report.removed["visitors"] == 1
    rows = await orders_csv(fetch, tenant)
    assert {order: row["status"] for order, row in rows.items()} == {"ada-1": "paid"}
    profile = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/ada", token=tenant.token)
    assert profile.code == 200, profile
    assert profile.json()["lastSeen"].startswith(now.strftime("%Y-%m-%dT%H:%M"))
    gone = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/ben", token=tenant.token)
    assert gone.code == 404, gone
