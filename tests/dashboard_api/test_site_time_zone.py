"""One clock (issue 41 point 7): a site's days run midnight to midnight in its time zone, in
every figure, fold and report, across a midnight and a daylight-saving change; a change of
zone takes effect when the site's day ends, and a report whose range it falls in says so."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from derived import daily_figures, derivation
from documents import activity, visitors
from tests.dashboard_api.test_daily_figures import _as_rebuilt, _figures
from tests.support.app import Fetch

SHOP = "https://shop.example"
BERLIN = ZoneInfo("Europe/Berlin")
#: Berlin's clocks went from 02:00 CET to 03:00 CEST on 2026-03-29 (01:00 UTC): a 23-hour day.
PAGEVIEWS = {  # visitor: the instant (UTC) of their one pageview, and its Berlin day
    "v1": (datetime(2026, 3, 28, 22, 30, tzinfo=UTC), "2026-03-28"),  # 23:30 CET
    "v2": (datetime(2026, 3, 28, 23, 30, tzinfo=UTC), "2026-03-29"),  # 00:30 CET, UTC's 28th
    "v3": (datetime(2026, 3, 29, 21, 30, tzinfo=UTC), "2026-03-29"),  # 23:30 CEST
    "v4": (datetime(2026, 3, 29, 22, 30, tzinfo=UTC), "2026-03-30"),  # 00:30 CEST, UTC's 29th
}


async def _stored_pageview(deps, site_id: str, visitor: str, at: datetime) -> None:
    """A pageview stored as ingest stores one (the profile, its record and the fact that
    counts it), at an instant older than ingest takes from a client."""
    async def write(session: Any) -> None:
        await visitors.touch(deps.store, site_id, visitor, seen_at=at,
                             facts=visitors.VisitorFacts(), counts={"pageviews": 1},
                             session=session)
        await activity.append_pageview(deps.store, site_id, visitor, {
            "id": f"{visitor}-pv", "at": at, "url": f"{SHOP}/p", "sessionId": f"{visitor}-s"},
            ordinal=1, session=session)
        await derivation.add_fact(deps.store, site_id, visitor, daily_figures.PAGEVIEW,
                                  [{"at": at, "url": f"{SHOP}/p", "sessionId": f"{visitor}-s",
                                    "source": {}, "product": False}], session=session)
    await deps.store.transaction(write)


async def _read(fetch: Fetch, tenant, path: str) -> Any:
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/{path}", token=tenant.token)
    assert answer.code == 200, answer
    return answer.json()


async def test_days_are_the_sites_across_a_midnight_and_a_daylight_saving_change(
        fetch: Fetch, make_tenant, deps):
    tenant = await make_tenant(settings={"timeZone": "Europe/Berlin"})
    for visitor, (at, _day) in PAGEVIEWS.items():
        await _stored_pageview(deps, tenant.site_id, visitor, at)
    await deps.derivation.fold()

    # Per Berlin day: the 28th has v1, the 29th (23 hours) v2 and v3, the 30th v4; cut by UTC
    # it would be two and two.
    days = await _read(fetch, tenant, "stats/daily?from=2026-03-28&to=2026-03-30")
    assert [(day["day"], day["pageviews"]) for day in days] == [
        ("2026-03-28", 1), ("2026-03-29", 2), ("2026-03-30", 1)]
    overview = await _read(fetch, tenant, "overview?from=2026-03-29&to=2026-03-29")
    assert overview["figures"]["visitors"]["value"] == 2
    assert overview["traffic"]["sessions"] == 2
    # A report that reads stored records by instant cuts the same days.
    sessions = await _read(fetch, tenant, "sessions?from=2026-03-29&to=2026-03-29")
    assert sorted(row["visitorId"] for row in sessions["items"]) == ["v2", "v3"]
    visitors = await _read(fetch, tenant, "visitors?lastSeenFrom=2026-03-30&lastSeenTo=2026-03-30")
    assert [row["visitorId"] for row in visitors["items"]] == ["v4"]
    # The fold and a rebuild from the stored data agree.
    assert await _figures(deps.store, tenant.site_id) == await _as_rebuilt(deps.store,
                                                                            tenant.site_id)


async def test_a_change_of_zone_takes_effect_when_the_sites_day_ends_and_is_shown(
        fetch: Fetch, make_tenant, deps):
    tenant = await make_tenant(settings={"timeZone": "Europe/Berlin"})
    before = datetime.now(UTC)
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", token=tenant.token,
                         json_body={"settings": {"timeZone": "America/New_York"}})
    assert answer.code == 200, answer
    [change] = answer.json()["timeZoneChanges"]
    # The Berlin day running when it was asked ends first: New York's days begin there (its
    # first is longer, from Berlin's midnight to New York's next one).
    today = before.astimezone(BERLIN).date()
    tomorrow = today + timedelta(days=1)
    expected = datetime.combine(tomorrow, time(), BERLIN).astimezone(UTC)
    assert change == {"at": expected.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                      "zone": "America/New_York"}
    # A report whose range holds the change says so; the settings name the new zone.
    overview = await _read(fetch, tenant, f"overview?from={today}&to={tomorrow}")
    assert overview["zoneChanges"] == [{"at": change["at"], "day": tomorrow.isoformat(),
                                        "from": "Europe/Berlin", "to": "America/New_York"}]
    assert answer.json()["settings"]["timeZone"] == "America/New_York"
    earlier = await _read(fetch, tenant, f"overview?from={today - timedelta(days=3)}&to={today}")
    assert earlier["zoneChanges"] == []

    # Asked again before it took effect, the pending change is replaced, not stacked.
    again = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", token=tenant.token,
                        json_body={"settings": {"timeZone": "Asia/Tokyo"}})
    assert [zone["zone"] for zone in again.json()["timeZoneChanges"]] == ["Asia/Tokyo"]
    refused = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", token=tenant.token,
                          json_body={"settings": {"timeZone": "Mars/Olympus_Mons"}})
    assert refused.code == 422 and refused.json()["error"]["field"] == "settings.timeZone"


def test_a_change_between_far_apart_zones_never_runs_a_day_backwards():
    """From the earliest zone to the latest and back: each instant's day is never before the
    day of an instant before it, and every day has one start."""
    from documents import sites

    for old, new in (("Pacific/Kiritimati", "Pacific/Pago_Pago"),
                     ("Pacific/Pago_Pago", "Pacific/Kiritimati"),
                     ("Europe/Berlin", "America/Los_Angeles")):
        site = {"settings": {"timeZone": old}}
        now = datetime(2026, 6, 10, 11, 0, tzinfo=UTC)
        clock = sites.day_clock({**site, sites.TIME_ZONES: sites.zone_history(site, new, now)})
        moments = [now + timedelta(minutes=15 * n) for n in range(4 * 24 * 4)]
        days = [clock.date_of(moment) for moment in moments]
        assert days == sorted(days), (old, new)
        for moment, day in zip(moments, days, strict=True):
            start, end = clock.bounds(day, day)
            assert start <= moment < end, (old, new, moment)


async def test_the_shop_gives_its_zone_only_to_a_site_without_one(fetch: Fetch, make_tenant):
    async def send(tenant, zone: str):
        return await fetch("/ingest/shop", "POST", json_body={"timeZone": zone},
                           headers={"X-Service-Key": tenant.api_key})

    fresh = await make_tenant()
    answer = await send(fresh, "Europe/Berlin")
    assert (answer.code, answer.json()) == (200, {"ok": True, "timeZone": "Europe/Berlin"})
    assert (await send(fresh, "Asia/Tokyo")).json()["timeZone"] == "Europe/Berlin"
    chosen = await make_tenant(name="chosen", settings={"timeZone": "America/Chicago"})
    assert (await send(chosen, "Europe/Berlin")).json()["timeZone"] == "America/Chicago"
    refused = await send(fresh, "+02:00")
    assert refused.code == 422 and refused.json()["error"]["field"] == "timeZone"
