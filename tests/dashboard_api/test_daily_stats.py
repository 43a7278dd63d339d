"""Pageviews and errors per day for the dashboard's charts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from documents import error_records
from tasks.errors import keep_occurrence
from tests.support.app import Fetch, Tenant


async def _occurrence(store, site_id: str, job: str, at: datetime, visitor_id: str) -> None:
    await keep_occurrence(store, error_records.Occurrence(
        job_id=job, site_id=site_id, fingerprint="fp", type="TypeError", message="m",
        source="javascript", occurred_at=at, visitor_id=visitor_id, session_id=None,
        wp_user_id=None, ip_address=None, context={}, stack=None))


async def test_daily_stats_count_distinct_pageviews_and_errors_per_day(
        fetch: Fetch, tenant: Tenant, deps, ingest, viewer_token: str):
    # Recent days: a client time over 30 days old is taken as the time of receipt.
    first = datetime.now(UTC).date() - timedelta(days=10)
    day = [(first + timedelta(days=n)).isoformat() for n in range(5)]
    for visitor, pageview, at in (("a", "pv-1", f"{day[0]}T08:00:00Z"),
                                  ("a", "pv-1", f"{day[0]}T08:00:00Z"),  # a retry
                                  ("b", "pv-2", f"{day[0]}T23:59:00Z"),
                                  ("b", "pv-3", f"{day[2]}T00:00:00Z"),
                                  ("b", "pv-4", f"{day[4]}T00:00:00Z")):
        await ingest("pageviews", {"visitorId": visitor, "pageviewId": pageview,
                                   "url": "https://shop.example/", "occurredAt": at})
    third = datetime.fromisoformat(day[2]).replace(tzinfo=UTC)
    await _occurrence(deps.store, tenant.site_id, "j1", third + timedelta(hours=1), "a")
    await _occurrence(deps.store, tenant.site_id, "j2", third + timedelta(hours=2), "b")
    await deps.derivation.fold()
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/stats/daily?from={day[0]}"
                         f"&to={day[3]}", token=viewer_token)
    assert answer.code == 200, answer
    assert answer.json() == [
        {"day": day[0], "pageviews": 2, "errors": 0},
        {"day": day[1], "pageviews": 0, "errors": 0},
        {"day": day[2], "pageviews": 1, "errors": 2},
        {"day": day[3], "pageviews": 0, "errors": 0},
    ]


async def test_daily_stats_default_to_the_last_thirty_days(fetch: Fetch, tenant: Tenant,
                                                           deps, ingest):
    await ingest("pageviews", {"visitorId": "a", "url": "https://shop.example/"})
    await deps.derivation.fold()
    days = (await fetch(f"/api/v1/sites/{tenant.site_id}/stats/daily",
                        token=tenant.token)).json()
    assert len(days) == 30
    assert days[-1] == {"day": datetime.now(UTC).date().isoformat(), "pageviews": 1,
                        "errors": 0}


async def test_daily_stats_leave_out_restricted_visitors(fetch: Fetch, tenant: Tenant, deps,
                                                         ingest):
    await ingest("pageviews", {"visitorId": "a", "url": "https://shop.example/"})
    await ingest("pageviews", {"visitorId": "b", "url": "https://shop.example/"})
    await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/b/restriction", "PUT",
                token=tenant.token, json_body={"on": True})
    await deps.derivation.fold()
    days = (await fetch(f"/api/v1/sites/{tenant.site_id}/stats/daily",
                        token=tenant.token)).json()
    assert days[-1]["pageviews"] == 1


async def test_a_reversed_or_oversized_range_is_refused(fetch: Fetch, tenant: Tenant):
    path = f"/api/v1/sites/{tenant.site_id}/stats/daily"
    assert (await fetch(path + "?from=2026-02-05&to=2026-02-01", token=tenant.token)).code == 422
    assert (await fetch(path + "?from=2020-01-01&to=2026-01-01", token=tenant.token)).code == 422
    assert (await fetch(path + "?from=yesterday", token=tenant.token)).code == 422
