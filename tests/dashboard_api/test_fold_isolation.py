"""One site's facts can never stop another's figures (issue 38 points 1 and 4): a fact the fold
cannot apply is set aside with its reason, counted in /metrics and listed for the operator, and
every other fact and site goes on being folded; a sum never leaves the store's 64-bit integers;
and on the embedded default the fold never holds the event loop."""

from __future__ import annotations

import asyncio
import gc
import random
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from derived import daily_figures, derivation
from tests.dashboard_api.test_daily_figures import SHOP, _today
from tests.support.app import Fetch, Tenant

#: What a long history of large orders left in one day's revenue: 500 cents short of the
#: largest sum the store keeps.
NEAR_THE_TOP = 2**63 - 1 - 500


async def _send(fetch: Fetch, tenant: Tenant, kind: str, body: dict) -> None:
    answer = await fetch(f"/ingest/{kind}", "POST", json_body=body,
                         headers={"X-Service-Key": tenant.api_key})
    assert answer.code == 200, (kind, answer)


async def _site_day(deps, tenant: Tenant, who: str) -> dict:
    doc_id = daily_figures.site_day_id(tenant.site_id, _today().isoformat(),
                                       daily_figures.slot_of(who))
    return await deps.store.collection(daily_figures.SITE_DAYS).find_one({"_id": doc_id}) or {}


async def _pageviews_today(deps, tenant: Tenant) -> int:
    today = _today()
    period = daily_figures.period(
        await daily_figures.site_days(deps.store, tenant.site_id, today, today), today, today)
    return period.pageviews


async def test_a_sum_that_would_overflow_sets_its_fact_aside_and_every_site_keeps_updating(
        fetch: Fetch, make_tenant, deps):
    rich, other = await make_tenant("rich"), await make_tenant("other")
    await deps.store.collection(daily_figures.SITE_DAYS).update_one(
        {"_id": daily_figures.site_day_id(rich.site_id, _today().isoformat(),
                                          daily_figures.slot_of("whale"))},
        {"$set": {"revenue": {"EUR": NEAR_THE_TOP}, "orders": {"EUR": 1},
                  "siteId": rich.site_id, "day": _today().isoformat(),
                  "slot": daily_figures.slot_of("whale")}}, upsert=True)
    for step in ({"eventId": "o1-placed", "type": "order_placed", "total": "10.00",
                  "currency": "EUR"}, {"eventId": "o1-paid", "type": "order_paid"}):
        await _send(fetch, rich, "commerce", {"visitorId": "whale", "orderId": "o1", **step})
    for tenant in (rich, other):
        for n in range(3):
            await _send(fetch, tenant, "pageviews",
                        {"visitorId": f"v{n}", "url": f"{SHOP}/p{n}"})

    await deps.derivation.fold()
    await deps.derivation.measure()

    # Both sites' pageviews are in their figures; the order that would overflow is not.
    assert await _pageviews_today(deps, rich) == 3
    assert await _pageviews_today(deps, other) == 3
    assert (await _site_day(deps, rich, "whale"))["revenue"] == {"EUR": NEAR_THE_TOP}
    # It is set aside, counted, and listed with its reason (and no visitor data).
    assert await deps.store.collection(derivation.COLLECTION).count_documents({}) == 1
    metrics = (await fetch("/metrics")).body.decode()
    assert "derivation_facts_quarantined 1\n" in metrics
    assert 'derivation_facts_set_aside_total{reason="FigureOverflow"} 1' in metrics
    assert "derivation_lag_seconds 0.0\n" in metrics  # the set-aside fact is not a lag
    [listed] = await derivation.quarantined_facts(deps.store)
    assert (listed["siteId"], listed["kind"], listed["quarantined"]["reason"]) == (
        rich.site_id, daily_figures.ORDER, "FigureOverflow")
    assert "whale" not in repr(listed)

    # New data keeps flowing on both sites.
    for tenant in (rich, other):
        await _send(fetch, tenant, "pageviews", {"visitorId": "late", "url": f"{SHOP}/"})
    await deps.derivation.fold()
    assert (await _pageviews_today(deps, rich), await _pageviews_today(deps, other)) == (4, 4)

    # Once the operator has dealt with the cause, the fact is put back and counted once.
    await deps.store.collection(daily_figures.SITE_DAYS).update_one(
        {"_id": daily_figures.site_day_id(rich.site_id, _today().isoformat(),
                                          daily_figures.slot_of("whale"))},
        {"$set": {"revenue.EUR": 0, "orders.EUR": 0}})
    assert await derivation.requeue_quarantined(deps.store, rich.site_id) == 1
    await deps.derivation.fold()
    await deps.derivation.measure()
    assert (await _site_day(deps, rich, "whale"))["revenue"] == {"EUR": 1000}
    assert "derivation_facts_quarantined 0\n" in (await fetch("/metrics")).body.decode()


async def test_a_fact_that_cannot_be_read_is_set_aside_and_a_failing_site_waits_its_turn(
        fetch: Fetch, make_tenant, deps, faults):
    first, second = sorted([await make_tenant("a"), await make_tenant("b")],
                           key=lambda tenant: tenant.site_id)
    for tenant in (first, second):
        for n in range(2):
            await _send(fetch, tenant, "pageviews", {"visitorId": f"v{n}", "url": f"{SHOP}/"})
    # A fact written by a version with another record shape, between the first site's others.
    async def odd(session) -> None:
        await derivation.add_fact(deps.store, first.site_id, "v9", daily_figures.PAGEVIEW,
                                  [{"url": f"{SHOP}/"}], session=session)
    await deps.store.transaction(odd)
    await _send(fetch, first, "pageviews", {"visitorId": "v2", "url": f"{SHOP}/"})
    # And the store drops the connection on the first site's first batch.
    faults.fail(derivation.COLLECTION, "delete_many", times=1)

    done = await derivation.fold_all(deps.store)
    # The first site waits for the next pass; the second is folded meanwhile.
    assert (done.failed_sites, done.quarantined) == (1, ())
    assert (await _pageviews_today(deps, first), await _pageviews_today(deps, second)) == (0, 2)

    done = await derivation.fold_all(deps.store)
    # The odd fact is set aside with its reason; the three around it are counted.
    assert (done.folded, done.quarantined) == (3, ("KeyError",))
    assert await _pageviews_today(deps, first) == 3
    [listed] = await derivation.quarantined_facts(deps.store, first.site_id)
    assert listed["quarantined"]["reason"] == "KeyError"


@pytest.mark.embedded_only("the embedded default's event loop; on a replica set the store "
                           "answers over the network")
async def test_folding_4000_facts_never_holds_the_event_loop(tenant: Tenant, deps):
    """The fold's work, and the embedded store's, stay off the event loop: between two ticks
    of a 5 ms timer the loop's thread never spends 100 ms of its own CPU time, however long
    the fold (CPU time, not wall time, since two busy cores may leave any thread waiting; and
    not counting the garbage collector, which walks every object of the process on whichever
    thread allocates, the test run's own included: bench.derivation measured it at 99 ms)."""
    store, site_id = deps.store, tenant.site_id
    chance = random.Random(38)
    now = datetime.now(UTC)

    async def record(session) -> None:
        for _ in range(4000):
            who = f"v{chance.randrange(100)}"
            at = now - timedelta(days=chance.randrange(3), seconds=chance.randrange(3600))
            await derivation.add_fact(store, site_id, who, daily_figures.PAGEVIEW, [{
                "at": at, "url": f"{SHOP}/p{chance.randrange(40)}",
                "sessionId": f"{who}-{at.date()}", "source": {"medium": "direct"},
                "product": False}], country="DE", device="desktop", session=session)

    await store.transaction(record)
    longest = 0.0
    folding = True
    ticking = asyncio.Event()
    loop_thread = threading.get_ident()
    collecting: dict[str, float] = {"since": 0.0, "spent": 0.0}

    def collector(phase: str, _info: dict) -> None:
        if threading.get_ident() != loop_thread:
            return
        if phase == "start":
            collecting["since"] = time.thread_time()
        else:
            collecting["spent"] += time.thread_time() - collecting["since"]

    async def tick() -> None:
        nonlocal longest
        spent = time.thread_time() - collecting["spent"]
        ticking.set()
        while folding:
            await asyncio.sleep(0.005)
            now_spent = time.thread_time() - collecting["spent"]
            longest = max(longest, now_spent - spent)
            spent = now_spent

    gc.callbacks.append(collector)
    try:
        ticker = asyncio.create_task(tick())
        await ticking.wait()  # a fold that never let it run would otherwise measure nothing
        done = await derivation.fold_all(store)
        folding = False
        await ticker
    finally:
        gc.callbacks.remove(collector)
    assert done.folded == 4000
    assert longest < 0.1, f"the event loop's thread worked {longest * 1000:.0f} ms between ticks"
