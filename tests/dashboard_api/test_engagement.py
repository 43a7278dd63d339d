"""Engagement on the overview (issue 41 point 4): bounce rate, median session length, median
time on page and average scroll depth against the previous period, from the folded figures,
exact under a replaced time on page, erasure and a rebuild."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from typing import Any

from tests.dashboard_api.test_daily_figures import _as_rebuilt, _figures
from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest

SHOP = "https://shop.example"
CHROME = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
          "Chrome/126.0.0.0 Safari/537.36")
#: The last day of the period read: yesterday, so every moment of it is in the past.
LAST = datetime.now(UTC).date() - timedelta(days=1)


def _at(day: date, hour: int, seconds: int = 0) -> str:
    return (datetime(day.year, day.month, day.day, hour, tzinfo=UTC)
            + timedelta(seconds=seconds)).isoformat()


async def _visit(ingest: Ingest, visitor: str, day: date, offsets: list[int]) -> None:
    """A session of pageviews `offsets` seconds after 10:00 on `day`, ids <visitor><n>."""
    for n, offset in enumerate(offsets, 1):
        await ingest("pageviews", {"visitorId": visitor, "sessionId": f"{visitor}-s",
                                   "pageviewId": f"{visitor}{n}", "url": f"{SHOP}/p{n}",
                                   "userAgent": CHROME, "occurredAt": _at(day, 10, offset)})


async def _time_on_page(fetch: Fetch, tenant: Tenant, visitor: str, pageview: str,
                        seconds: float) -> None:
    answer = await fetch(f"/sdk/v1/{tenant.public_key}/time-on-page", "POST",
                         body=json.dumps({"visitorId": visitor, "pageviewId": pageview,
                                          "duration": seconds, "url": f"{SHOP}/p1"}),
                         headers={"Origin": SHOP, "Content-Type": "text/plain;charset=UTF-8",
                                  "User-Agent": CHROME})
    assert answer.json() == {"ok": True, "id": pageview}, answer


async def _scrolled(ingest: Ingest, visitor: str, day: date, *depths: tuple[int, int]) -> None:
    await ingest("recordings/interactions", {
        "visitorId": visitor, "url": f"{SHOP}/p1", "userAgent": CHROME,
        "interactions": [{"kind": "scroll_depth", "depth": depth, "from": start, "vw": 1280,
                          "at": _at(day, 10, 5)} for start, depth in depths]})


async def _engagement(fetch: Fetch, tenant: Tenant, token: str) -> dict[str, Any]:
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/overview?from="
                         f"{LAST - timedelta(days=1)}&to={LAST}", token=token)
    assert answer.code == 200, answer
    body = answer.json()
    assert body["previous"]["from"] == (LAST - timedelta(days=3)).isoformat()
    assert "first pageview to its last" in body["engagementMethod"]
    return body["engagement"]


async def test_engagement_is_counted_from_the_folded_figures_against_the_previous_period(
        fetch: Fetch, tenant: Tenant, ingest: Ingest, deps, viewer_token: str):
    day_before = LAST - timedelta(days=1)
    # This period: a bounces (one page, 30 s on it, scrolled to 50 %); b reads three pages
    # over 130 s (40 s, then 90 s replaced by 95 s; scrolled to the bottom); c two pages over
    # 20 s the day before (20 s and 200 s; scrolled to 30 %, then on to 70 %).
    await _visit(ingest, "a", LAST, [0])
    await _visit(ingest, "b", LAST, [0, 40, 130])
    await _visit(ingest, "c", day_before, [0, 20])
    for visitor, pageview, seconds in (("a", "a1", 30), ("b", "b1", 40), ("b", "b2", 90),
                                       ("c", "c1", 20), ("c", "c2", 200), ("b", "b2", 95),
                                       ("b", "b2", 60)):  # the last is shorter: ignored
        await _time_on_page(fetch, tenant, visitor, pageview, seconds)
    await _scrolled(ingest, "a", LAST, (0, 50))
    await _scrolled(ingest, "b", LAST, (0, 100))
    await _scrolled(ingest, "c", day_before, (0, 30), (30, 70))
    # The period before: d reads two pages over 60 s (60 s on the first), e bounces.
    await _visit(ingest, "d", LAST - timedelta(days=3), [0, 60])
    await _visit(ingest, "e", LAST - timedelta(days=2), [0])
    await _time_on_page(fetch, tenant, "d", "d1", 60)
    await deps.derivation.fold()

    # Sessions 3, bounces 1; lengths 0, 20, 130 s; times on page 20, 30, 40, 95, 200 s;
    # depths reached 50, 100 and 70 % (10 + 20 + 14 steps of 5 % over 3 views).
    assert await _engagement(fetch, tenant, viewer_token) == {
        "bounceRate": {"value": round(1 / 3, 4), "previous": 0.5,
                       "change": round(round(1 / 3, 4) - 0.5, 4)},
        "medianSessionSeconds": {"value": 20, "previous": 0, "change": None},
        "medianTimeOnPageSeconds": {"value": 40, "previous": 60,
                                    "change": round((40 - 60) / 60, 4)},
        "averageScrollDepth": {"value": round(44 * 5 / 3, 1), "previous": None,
                               "change": None}}
    assert await _figures(deps.store, tenant.site_id) == await _as_rebuilt(deps.store,
                                                                            tenant.site_id)

    erased = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/b/data", "DELETE",
                         token=tenant.token)
    assert erased.code == 200, erased
    # Without b: sessions a and c (0 and 20 s, the lower middle 0), times 20, 30, 200 s,
    # depths 50 and 70 %.
    engagement = await _engagement(fetch, tenant, viewer_token)
    assert {name: figure["value"] for name, figure in engagement.items()} == {
        "bounceRate": 0.5, "medianSessionSeconds": 0, "medianTimeOnPageSeconds": 30,
        "averageScrollDepth": 60.0}
    assert await _figures(deps.store, tenant.site_id) == await _as_rebuilt(deps.store,
                                                                            tenant.site_id)


async def test_a_period_with_nothing_measured_says_so_rather_than_zero(
        fetch: Fetch, tenant: Tenant, viewer_token: str):
    engagement = await _engagement(fetch, tenant, viewer_token)
    assert {name: figure["value"] for name, figure in engagement.items()} == {
        "bounceRate": None, "medianSessionSeconds": None, "medianTimeOnPageSeconds": None,
        "averageScrollDepth": None}
