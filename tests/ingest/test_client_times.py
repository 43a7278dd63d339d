"""Client times are believed within a window: not over 5 minutes ahead, not over 30 days old
(issue 28: an `occurredAt` in 1970 became the visitor's `lastSeen`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ingest.intake import MAX_PAST_AGE, parse_time
from tests.support.app import Fetch, Tenant, pageviews

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("given", [
    "1970-01-01T00:00:00Z", "2000-01-01T00:00:00+02:00", "2026-10-27T11:59:59Z",
    "2026-11-26T12:06:00Z", "3000-01-01T00:00:00Z", "not a time", None,
])
def test_a_time_outside_the_window_is_taken_as_the_time_of_receipt(given: str | None):
    assert parse_time(given, now=NOW) == NOW


@pytest.mark.parametrize("given", ["2026-10-27T12:00:00Z", "2026-11-26T12:04:59Z",
                                   "2026-11-20T10:00:00+01:00"])
def test_a_time_inside_the_window_is_kept(given: str):
    assert parse_time(given, now=NOW) == datetime.fromisoformat(given).astimezone(UTC)


async def _pageview(fetch: Fetch, tenant: Tenant, visitor: str, at: str) -> None:
    answer = await fetch("/ingest/pageviews", "POST", headers={"X-Service-Key": tenant.api_key},
                         json_body={"visitorId": visitor, "url": "https://shop.example/",
                                    "occurredAt": at})
    assert answer.code == 200, answer


async def _profile(fetch: Fetch, tenant: Tenant, visitor: str) -> dict:
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/{visitor}",
                         token=tenant.token)
    assert answer.code == 200, answer
    return answer.json()


async def test_a_pageview_dated_1970_shows_the_visitor_as_seen_now_not_in_1970(
        fetch: Fetch, deps, tenant: Tenant):
    before = datetime.now(UTC) - timedelta(seconds=5)
    await _pageview(fetch, tenant, "v-1970", "1970-01-01T00:00:00Z")

    profile = await _profile(fetch, tenant, "v-1970")
    for field in ("firstSeen", "lastSeen"):
        seen = datetime.fromisoformat(profile[field].replace("Z", "+00:00"))
        assert seen >= before, (field, profile[field])
    [stored] = await pageviews(deps, tenant.site_id)
    assert stored["at"].replace(tzinfo=UTC) >= before


async def test_a_pageview_from_a_fortnight_ago_keeps_its_time(fetch: Fetch, tenant: Tenant):
    at = (datetime.now(UTC) - timedelta(days=14)).replace(microsecond=0)
    assert timedelta(days=14) < MAX_PAST_AGE
    await _pageview(fetch, tenant, "v-late", at.isoformat().replace("+00:00", "Z"))

    profile = await _profile(fetch, tenant, "v-late")
    assert profile["lastSeen"].startswith(at.isoformat()[:19])
