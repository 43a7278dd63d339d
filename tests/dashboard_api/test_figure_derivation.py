"""Figures derived off the request path (derived/derivation.py): ingest writes raw facts and
touches no figure; the fold counts each fact once, whatever folders race or die; erasure and
restriction stay exact whether or not a fact was folded; the lag is visible."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from derived import daily_figures, derivation, visits
from documents import heatmaps, recordings
from tests.dashboard_api.test_daily_figures import (
    DE_IP,
    DESKTOP,
    GB_IP,
    PHONE,
    SHOP,
    _as_rebuilt,
    _at,
    _figures,
    _mixed_traffic,
    _overview,
    _today,
)
from tests.support.app import Fetch, Tenant
from tests.support.faulty_store import FaultPlan, InjectedFault
from tests.support.ingest import Ingest

#: Every collection a figure lives in (a recording's marks are its `marks` field), and what
#: only the fold writes: visits and marks waiting for their recording.
FIGURES = {*daily_figures.COLLECTIONS, heatmaps.COUNTS, visits.COLLECTION, recordings.MARKS_PENDING}
WRITES = {"insert_one", "insert_many", "update_one", "update_many", "replace_one", "delete_one",
          "delete_many", "find_one_and_update", "find_one_and_delete"}


async def _pending(store, site_id: str) -> int:
    return await store.collection(derivation.COLLECTION).count_documents({"siteId": site_id})


async def _pageviews(ingest: Ingest, visitors: int = 6, days: int = 3) -> None:
    """A few visitors over a few days and pages, one pageview retried."""
    today = _today()
    for n in range(visitors):
        ip, agent = (GB_IP, DESKTOP) if n % 2 else (DE_IP, PHONE)
        for back in range(days):
            await ingest("pageviews", {"visitorId": f"v{n}", "ip": ip, "userAgent": agent,
                                       "pageviewId": f"v{n}-{back}",
                                       "url": f"{SHOP}/p{(n + back) % 4}",
                                       "occurredAt": _at(today - timedelta(days=back))})
    await ingest("pageviews", {"visitorId": "v0", "ip": DE_IP, "userAgent": PHONE,
                               "pageviewId": "v0-0", "url": f"{SHOP}/p0",
                               "occurredAt": _at(today)})


async def _ingest_writes(deps, faults: FaultPlan, send) -> set[tuple[str, str]]:
    """The writes made inside transactions while `send()` runs."""
    faults.clear()
    faults.record_calls = True
    try:
        await send()
        await deps.queue.join()
    finally:
        faults.record_calls = False
    return {call for call in faults.transaction_calls if call[1] in WRITES}


async def test_no_ingest_transaction_writes_a_figure_only_its_own_fact(
        tenant: Tenant, deps, ingest: Ingest, faults: FaultPlan):
    context = {"visitorId": "ada", "sessionId": "ada-s", "ip": GB_IP, "url": f"{SHOP}/cart"}
    await ingest("pageviews", {"visitorId": "warm", "url": f"{SHOP}/"})
    await ingest("recordings/start", {**context, "recordingId": str(uuid.uuid4())})
    # Placed, an order counts in no figure yet (revenue is paid orders); its payment does.
    await ingest("commerce", {"eventId": "o-1-placed", "type": "order_placed",
                              "visitorId": "ada", "orderId": "o-1", "total": "20.00",
                              "currency": "EUR"})
    sends = {
        "pageview": lambda: ingest("pageviews", context),
        "interactions": lambda: ingest("recordings/interactions", {**context, "interactions": [
            {"kind": "rage_click", "selector": "#coupon", "count": 4, "x": 5, "y": 5,
             "vw": 1280}, {"kind": "scroll_depth", "depth": 60}]}),
        "lead": lambda: ingest("leads", {**context, "email": "ada@example.com"}),
        "error": lambda: ingest("errors", {**context, "source": "javascript",
                                           "type": "TypeError", "message": "m"}),
        "order paid": lambda: ingest("commerce", {"eventId": "o-1-paid", "type": "order_paid",
                                                  "orderId": "o-1"}),
    }
    for name, send in sends.items():
        written = await _ingest_writes(deps, faults, send)
        touched = {collection for collection, _ in written}
        assert not touched & (FIGURES | {"recordings"}), (name, written)
        assert (derivation.COLLECTION, "insert_one") in written, name
    assert await _figures(deps.store, tenant.site_id) == {}
    assert await deps.store.collection(heatmaps.COUNTS).count_documents({}) == 0
    assert await _pending(deps.store, tenant.site_id) == 6


async def test_each_fact_is_folded_once_when_folders_race_and_one_dies_mid_batch(
        tenant: Tenant, deps, ingest: Ingest, faults):
    store, site_id = deps.store, tenant.site_id
    await _pageviews(ingest)
    facts = await _pending(store, site_id)
    assert facts == 18  # the retried pageview was stored, and so recorded, once

    # A folder dies half-way through its batch: nothing of it stays, every fact is still there.
    faults.fail(daily_figures.SITE_DAYS, "update_one", skip=1)
    with pytest.raises(InjectedFault):
        await derivation.fold_partition(store, site_id, batch=5)
    faults.clear()
    assert await _pending(store, site_id) == facts
    assert await _figures(store, site_id) == {}

    # Its lease outlives it: other folders leave the site alone until the lease runs out.
    now = datetime.now(UTC)
    assert await derivation.claim(store, site_id, "dead folder", now=now)
    assert await derivation.fold_all(store, "other", now=now) == derivation.FoldPass(0, 1)
    later = now + derivation.LEASE + timedelta(seconds=1)
    assert await derivation.claim(store, site_id, "other", now=later)
    await derivation.release(store, site_id, "other")

    # Two folders without leases race over the same facts, batch after batch.
    folded = 0
    while await _pending(store, site_id):
        done = await asyncio.gather(*(derivation.fold_partition(store, site_id, batch=4)
                                      for _ in range(2)))
        folded += sum(done)
    assert folded == facts
    kept = await _figures(store, site_id)
    assert kept == await _as_rebuilt(store, site_id)
    assert sum(doc.get("pageviews", 0) for key, doc in kept.items()
               if key.startswith(daily_figures.SITE_DAYS)) == facts


async def test_an_erasure_between_ingest_and_folding_leaves_no_share_behind(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _mixed_traffic(ingest, deps, tenant)
    # Ben comes back on a new day and a new page; none of it is folded yet.
    today = _today()
    for n, page in enumerate(("/ben-only", "/cart")):
        await ingest("pageviews", {"visitorId": "ben", "ip": DE_IP, "userAgent": PHONE,
                                   "url": f"{SHOP}{page}", "pageviewId": f"ben-late-{n}",
                                   "occurredAt": _at(today - timedelta(days=4))})
    await ingest("pageviews", {"visitorId": "ada", "ip": GB_IP, "userAgent": DESKTOP,
                               "url": f"{SHOP}/late", "occurredAt": _at(today, 12)})
    assert await _pending(deps.store, tenant.site_id) == 3
    erased = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/ben/data", "DELETE",
                         token=tenant.token)
    assert erased.code == 200, erased
    assert erased.json()["counts"]["pendingFigureFacts"] == 2
    await deps.derivation.fold()
    kept = await _figures(deps.store, tenant.site_id)
    assert "ben" not in repr(kept)
    assert kept == await _as_rebuilt(deps.store, tenant.site_id)
    overview = await _overview(fetch, tenant, viewer_token, today - timedelta(days=6), today)
    # Ben's error stays counted, as anyone's.
    assert {name: figure["value"] for name, figure in overview["figures"].items()} == {
        "visitors": 2, "pageviews": 9, "errors": 3, "leads": 2, "leadsPerVisitor": 1.0}


async def test_a_restriction_between_ingest_and_folding_is_exact_both_ways(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest):
    await _mixed_traffic(ingest, deps, tenant)
    await ingest("pageviews", {"visitorId": "ada", "ip": GB_IP, "userAgent": DESKTOP,
                               "url": f"{SHOP}/late", "occurredAt": _at(_today(), 12)})
    switch = f"/api/v1/sites/{tenant.site_id}/visitors/ada/restriction"
    assert (await fetch(switch, "PUT", json_body={"on": True}, token=tenant.token)).code == 200
    await deps.derivation.fold()
    assert await _figures(deps.store, tenant.site_id) == await _as_rebuilt(deps.store,
                                                                            tenant.site_id)
    await ingest("pageviews", {"visitorId": "cy", "ip": GB_IP, "userAgent": PHONE,
                               "url": f"{SHOP}/late", "occurredAt": _at(_today(), 13)})
    assert (await fetch(switch, "PUT", json_body={"on": False}, token=tenant.token)).code == 200
    await deps.derivation.fold()
    assert await _figures(deps.store, tenant.site_id) == await _as_rebuilt(deps.store,
                                                                            tenant.site_id)


async def test_the_lag_is_in_the_metrics_and_the_overview_until_the_fold_catches_up(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    before = datetime.now(UTC)
    await ingest("pageviews", {"visitorId": "ada", "url": f"{SHOP}/"})
    await asyncio.sleep(0.05)
    assert await deps.derivation.measure() > 0
    metrics = (await fetch("/metrics")).body.decode()
    assert "derivation_lag_seconds 0.0\n" not in metrics
    assert "derivation_lag_seconds " in metrics
    today = _today()
    overview = await _overview(fetch, tenant, viewer_token, today, today)
    assert overview["figuresAsOf"] is not None
    assert datetime.fromisoformat(overview["figuresAsOf"].replace("Z", "+00:00")) >= (
        before - timedelta(seconds=1))
    assert overview["figures"]["pageviews"]["value"] == 0

    assert await deps.derivation.fold() == 1
    assert await deps.derivation.measure() == 0
    assert "derivation_lag_seconds 0.0\n" in (await fetch("/metrics")).body.decode()
    overview = await _overview(fetch, tenant, viewer_token, today, today)
    assert overview["figuresAsOf"] is None
    assert overview["figures"]["pageviews"]["value"] == 1


async def test_an_erasure_before_the_fold_leaves_no_heatmap_cell_or_page_figure_behind(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest):
    def batch(visitor: str, selector: str, page: str) -> dict:
        return {"visitorId": visitor, "ip": GB_IP, "userAgent": DESKTOP, "url": f"{SHOP}{page}",
                "interactions": [
                    {"kind": "rage_click", "selector": selector, "count": 4, "x": 5, "y": 5,
                     "ox": 0.5, "oy": 0.5, "vw": 1280},
                    {"kind": "dead_click", "selector": "h1", "ox": 0.5, "oy": 0.5, "vw": 1280},
                    {"kind": "scroll_depth", "depth": 60, "vw": 1280}]}

    await ingest("recordings/interactions", batch("bob", "#coupon", "/cart"))
    await ingest("recordings/interactions", batch("ada", "#coupon", "/cart"))
    await deps.derivation.fold()
    # Ada comes back; her new clicks are stored but not folded when she is erased.
    await ingest("recordings/interactions", batch("ada", "#only-ada", "/ada-page"))
    await ingest("recordings/interactions", batch("ada", "#coupon", "/cart"))
    erased = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/ada/data", "DELETE",
                         token=tenant.token)
    assert erased.code == 200, erased
    await deps.derivation.fold()

    cells = await deps.store.collection(heatmaps.COUNTS).find(
        {"siteId": tenant.site_id}).to_list(None)
    counted = {(cell["page"], cell["kind"], cell["target"]): cell.get("n", cell.get("views"))
               for cell in cells if cell.get("n", cell.get("views"))}
    assert counted == {("/cart", "rage_click", "#coupon"): 1, ("/cart", "dead_click", "h1"): 1,
                       ("/cart", "scroll", ""): 1}
    kept = await _figures(deps.store, tenant.site_id)
    assert "ada-page" not in repr(kept) and "/ada-page" not in repr(cells)
    assert kept == await _as_rebuilt(deps.store, tenant.site_id)
    assert await _pending(deps.store, tenant.site_id) == 0
