"""The daily figures behind the overview and the daily chart (derived/daily_figures.py), kept as
data arrives: the distinct visitors of any range are exact, whatever order pageviews arrive
in; what ingest keeps equals what the stored data adds up to; erasure takes a visitor's share
out, and a restriction takes it out until it is lifted."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, timedelta
from typing import Any

from derived import daily_figures, derivation, store_setup
from documents import error_records, migrations
from tasks.errors import keep_occurrence
from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest, send_errors

SHOP = "https://shop.example"
GB_IP, DE_IP = "81.2.69.160", "85.214.132.117"
PHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
         "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1")
DESKTOP = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
DAYS = 12


def _today() -> date:
    return datetime.now(UTC).date()


def _at(day: date, hour: int = 10) -> str:
    return datetime(day.year, day.month, day.day, hour, tzinfo=UTC).isoformat()


async def _overview(fetch: Fetch, tenant: Tenant, token: str, first: date, last: date
                    ) -> dict[str, Any]:
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/overview?from={first.isoformat()}"
                         f"&to={last.isoformat()}", token=token)
    assert answer.code == 200, answer
    return answer.json()


async def _figures(store, site_id: str) -> dict[str, dict[str, Any]]:
    """Every day document of the site, without zero counts (a moved visitor leaves a 0)."""
    kept: dict[str, dict[str, Any]] = {}
    for collection in (daily_figures.SITE_DAYS, daily_figures.PAGE_DAYS,
                       daily_figures.VISITOR_DAYS, daily_figures.ERROR_DAYS,
                       daily_figures.ERROR_VISITOR_DAYS, daily_figures.SESSION_DAYS):
        async for doc in store.collection(collection).find({"siteId": site_id}):
            fields = {}
            for key, value in doc.items():
                if isinstance(value, dict):  # counts per key: visitors, time on page...
                    value = {name: n for name, n in value.items() if n}
                if value != 0 and value != {}:
                    fields[key] = value
            if set(fields) - {"_id", "siteId", "day", "slot", "page"}:
                kept[f"{collection}/{doc['_id']}"] = fields
    return kept


async def _as_rebuilt(store, site_id: str) -> dict[str, dict[str, Any]]:
    await daily_figures.rebuild_site(store, site_id)
    return await _figures(store, site_id)


async def test_distinct_visitors_are_exact_for_every_range_whatever_the_arrival_order(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    rng = random.Random(2126)
    first = _today() - timedelta(days=DAYS - 1)
    active: dict[str, set[date]] = {}
    sends = []
    for n in range(14):
        visitor = f"v{n}"
        days = {first + timedelta(days=rng.randrange(DAYS)) for _ in range(rng.randint(1, 5))}
        active[visitor] = days
        ip, agent = (GB_IP, DESKTOP) if n % 3 else (DE_IP, PHONE)
        sends.extend((visitor, day, ip, agent) for day in days for _ in range(rng.randint(1, 2)))
    rng.shuffle(sends)  # a late pageview lands between days already counted
    for visitor, day, ip, agent in sends:
        await ingest("pageviews", {"visitorId": visitor, "url": f"{SHOP}/p", "ip": ip,
                                   "userAgent": agent, "occurredAt": _at(day)})
    await deps.derivation.fold()
    ranges = [(first + timedelta(days=a), first + timedelta(days=b))
              for a in range(0, DAYS, 2) for b in range(a, DAYS, 3)]
    for low, high in ranges:
        overview = await _overview(fetch, tenant, viewer_token, low, high)
        seen = {v for v, days in active.items() if any(low <= d <= high for d in days)}
        german = {v for v in seen if int(v[1:]) % 3 == 0}
        assert overview["figures"]["visitors"]["value"] == len(seen), (low, high)
        countries = {row["name"]: row["count"] for row in overview["countries"]}
        assert countries == {name: count for name, count in
                             (("DE", len(german)), ("GB", len(seen - german))) if count}
        devices = {row["name"]: row["count"] for row in overview["devices"]}
        assert devices.get("mobile", 0) == len(german)


async def _mixed_traffic(ingest: Ingest, deps, tenant: Tenant) -> None:
    """Pageviews (one retried), rage and dead clicks, a lead and an error, for three visitors
    over three days."""
    today = _today()
    for visitor, ip, agent in (("ada", GB_IP, DESKTOP), ("ben", DE_IP, PHONE),
                               ("cy", GB_IP, PHONE)):
        context = {"visitorId": visitor, "ip": ip, "userAgent": agent}
        for n, (back, page) in enumerate(((2, "/"), (1, "/cart"), (0, "/cart"),
                                          (0, "/blog/a.b"), (2, "/"))):
            # The last is a retry of the first: the same id, stored and counted once.
            await ingest("pageviews", {**context, "url": f"{SHOP}{page}",
                                       "pageviewId": f"{visitor}-{n % 4}",
                                       "occurredAt": _at(today - timedelta(days=back))})
        await ingest("recordings/interactions", {**context, "url": f"{SHOP}/cart",
                                                 "interactions": [
            {"kind": "rage_click", "selector": "#coupon", "count": 4},
            {"kind": "dead_click", "selector": "h1"}, {"kind": "click", "selector": "#buy"}]})
        await ingest("leads", {**context, "email": f"{visitor}@example.com",
                               "url": f"{SHOP}/cart", "occurredAt": _at(today, 11)})
        await keep_occurrence(deps.store, error_records.Occurrence(
            job_id=f"job-{visitor}", site_id=tenant.site_id, fingerprint="fp",
            type="TypeError", message="m", source="javascript",
            occurred_at=datetime.now(UTC) - timedelta(days=1), visitor_id=visitor,
            session_id=None, wp_user_id=None, ip_address=None, context={}, stack=None))
    await deps.derivation.fold()  # the derivation catches up, as it does within seconds


async def test_each_errors_visitors_are_exact_for_every_range_whatever_the_arrival_order(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    rng = random.Random(39)
    first = _today() - timedelta(days=DAYS - 1)
    hits = []  # (error, visitor, day), an occurrence each
    for n in range(10):
        for error in ("fp-a", "fp-b"):
            days = {first + timedelta(days=rng.randrange(DAYS)) for _ in range(rng.randint(0, 4))}
            hits.extend((error, f"v{n}", day) for day in days for _ in range(rng.randint(1, 2)))
    rng.shuffle(hits)  # a late occurrence lands between days already counted
    await send_errors(ingest, deps, [
        {"visitorId": visitor, "source": "javascript", "type": "TypeError", "message": error,
         "url": f"{SHOP}/cart", "occurredAt": _at(day, 8 + number % 12)}
        for number, (error, visitor, day) in enumerate(hits)])
    await deps.derivation.fold()
    for low, high in [(first + timedelta(days=a), first + timedelta(days=b))
                      for a in range(0, DAYS, 3) for b in range(a, DAYS, 4)]:
        answer = await fetch(f"/api/v1/sites/{tenant.site_id}/error-trends?from={low}"
                             f"&to={high}&sort=occurrences", token=viewer_token)
        assert answer.code == 200, answer
        listed = {row["message"]: row for row in answer.json()["items"]}
        for error in ("fp-a", "fp-b"):
            inside = [(visitor, day) for e, visitor, day in hits
                      if e == error and low <= day <= high]
            if not inside:
                assert error not in listed, (low, high)
                continue
            row = listed[error]
            assert row["occurrencesInRange"] == len(inside), (error, low, high)
            assert row["visitorsAffected"] == len({v for v, _ in inside}), (error, low, high)
            assert row["firstSeenInRange"][:10] == min(day for _, day in inside).isoformat()
            assert row["lastSeenInRange"][:10] == max(day for _, day in inside).isoformat()
    assert await _figures(deps.store, tenant.site_id) == await _as_rebuilt(deps.store,
                                                                            tenant.site_id)


async def test_what_ingest_keeps_is_what_the_stored_data_adds_up_to(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _mixed_traffic(ingest, deps, tenant)
    kept = await _figures(deps.store, tenant.site_id)
    assert kept == await _as_rebuilt(deps.store, tenant.site_id)
    today = _today()
    overview = await _overview(fetch, tenant, viewer_token, today - timedelta(days=6), today)
    assert {name: figure["value"] for name, figure in overview["figures"].items()} == {
        "visitors": 3, "pageviews": 12, "errors": 3, "leads": 3, "leadsPerVisitor": 1.0}
    assert overview["topPages"][0] == {"name": "/cart", "count": 6, "share": 0.5}
    assert {"name": "/blog/a.b", "count": 3, "share": 0.25} in overview["topPages"]
    assert overview["frustration"] == [{"page": "/cart", "rageClicks": 3, "deadClicks": 3}]
    daily = await fetch(f"/api/v1/sites/{tenant.site_id}/stats/daily?from="
                        f"{(today - timedelta(days=2)).isoformat()}&to={today.isoformat()}",
                        token=viewer_token)
    assert [day["pageviews"] for day in daily.json()] == [3, 3, 6]


async def test_erasure_takes_the_visitors_share_out_of_every_figure(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _mixed_traffic(ingest, deps, tenant)
    erased = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/ben/data", "DELETE",
                         token=tenant.token)
    assert erased.code == 200, erased
    assert erased.json()["counts"]["activeDays"] == 3
    kept = await _figures(deps.store, tenant.site_id)
    assert "ben" not in repr(kept)
    assert kept == await _as_rebuilt(deps.store, tenant.site_id)
    today = _today()
    overview = await _overview(fetch, tenant, viewer_token, today - timedelta(days=6), today)
    # Ben's error stays counted, as anyone's (decision "An erased visitor's errors stay
    # counted").
    assert {name: figure["value"] for name, figure in overview["figures"].items()} == {
        "visitors": 2, "pageviews": 8, "errors": 3, "leads": 2, "leadsPerVisitor": 1.0}
    assert [row["name"] for row in overview["countries"]] == ["GB"]


async def test_a_restriction_takes_the_share_out_until_it_is_lifted(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _mixed_traffic(ingest, deps, tenant)
    before = await _figures(deps.store, tenant.site_id)
    switch = f"/api/v1/sites/{tenant.site_id}/visitors/ada/restriction"
    for _ in range(2):  # asking twice takes the share out once
        answer = await fetch(switch, "PUT", json_body={"on": True}, token=tenant.token)
        assert answer.code == 200, answer
    held = await _figures(deps.store, tenant.site_id)
    today = _today()
    overview = await _overview(fetch, tenant, viewer_token, today - timedelta(days=6), today)
    assert overview["figures"]["visitors"]["value"] == 2
    assert overview["figures"]["pageviews"]["value"] == 8
    assert held == await _as_rebuilt(deps.store, tenant.site_id)
    for _ in range(2):
        answer = await fetch(switch, "PUT", json_body={"on": False}, token=tenant.token)
        assert answer.code == 200, answer
    assert await _figures(deps.store, tenant.site_id) == before


async def test_a_store_from_before_the_figures_gets_them_once_at_start_up(
        tenant: Tenant, deps, ingest: Ingest):
    await _mixed_traffic(ingest, deps, tenant)
    kept = await _figures(deps.store, tenant.site_id)
    # As a store written by the version before: no figures, the migration never run.
    for collection in (*daily_figures.COLLECTIONS, migrations.COLLECTION):
        await deps.store.collection(collection).delete_many({})
    await store_setup.prepare_store(deps.store)
    assert await _figures(deps.store, tenant.site_id) == kept
    assert await migrations.run_once(deps.store, "daily-figures-v1",
                                     derivation.rebuild_all_sites) is False


async def test_a_migration_runs_once_and_a_dead_claim_is_taken_over(store):
    ran = []

    async def migration(_store) -> None:
        ran.append(1)

    await store.collection(migrations.COLLECTION).insert_one({
        "_id": "m", "doneAt": None, "leaseUntil": datetime.now(UTC) + timedelta(minutes=5)})
    assert await migrations.run_once(store, "m", migration) is False  # running elsewhere
    await store.collection(migrations.COLLECTION).update_one(
        {"_id": "m"}, {"$set": {"leaseUntil": datetime.now(UTC) - timedelta(seconds=1)}})
    assert await migrations.run_once(store, "m", migration) is True  # that process died
    assert await migrations.run_once(store, "m", migration) is False
    assert ran == [1]
