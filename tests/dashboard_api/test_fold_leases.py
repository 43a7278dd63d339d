"""The fold's lease excludes for real (issue 38 point 2): each batch renews it first and checks
it last, so a folder stopped past its lease commits nothing, and two folders that meet on one
batch count each fact once. Both stores: on the wire the two folders' transactions really
overlap on the server."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from derived import daily_figures, derivation
from tests.dashboard_api.test_daily_figures import _as_rebuilt, _figures
from tests.dashboard_api.test_figure_derivation import _pageviews, _pending
from tests.support.app import Tenant
from tests.support.faulty_store import FaultPlan, FaultyStore
from tests.support.ingest import Ingest


def _pageviews_counted(figures: dict[str, dict]) -> int:
    return sum(doc.get("pageviews", 0) for key, doc in figures.items()
               if key.startswith(daily_figures.SITE_DAYS))


async def _each_counted_once(store, site_id: str, facts: int) -> None:
    """Nothing is pending, the figures are what a rebuild makes, and each pageview is in them
    once."""
    assert await _pending(store, site_id) == 0
    kept = await _figures(store, site_id)
    assert kept == await _as_rebuilt(store, site_id)
    assert _pageviews_counted(kept) == facts


async def test_a_folder_stopped_past_its_lease_commits_nothing_and_each_fact_counts_once(
        tenant: Tenant, deps, ingest: Ingest):
    store, site_id = deps.store, tenant.site_id
    await _pageviews(ingest)
    facts = await _pending(store, site_id)
    assert facts == 18

    # Folder A leases the site for a second, reads its first batch of five, and is stopped
    # between that read and its commit for two seconds: past its lease.
    plan = FaultPlan()
    stopped = plan.pause(derivation.COLLECTION, "delete_many", seconds=2.0)
    short = timedelta(seconds=1)
    assert await derivation.claim(store, site_id, "A", now=datetime.now(UTC), lease=short)
    folder_a = asyncio.create_task(derivation.fold_site(
        FaultyStore(store, plan), derivation.Lease(site_id, "A", short), batch=5))
    await asyncio.wait_for(stopped.wait(), 30)

    # Folder B takes the site once A's lease has run out, and folds every fact.
    lease_b = await derivation.claim_when_free(store, site_id, "B")
    folded_by_b = await derivation.fold_site(store, lease_b, batch=5)

    # A's batch was not committed: B folded all eighteen, A learnt it had lost the site.
    with pytest.raises(derivation.LeaseLost):
        await folder_a
    assert folded_by_b.folded == facts
    await _each_counted_once(store, site_id, facts)


async def test_a_lease_held_by_another_folder_stops_every_batch(tenant: Tenant, deps,
                                                                ingest: Ingest):
    store, site_id = deps.store, tenant.site_id
    await _pageviews(ingest, visitors=2, days=1)
    assert await derivation.claim(store, site_id, "B", now=datetime.now(UTC))
    # A folder that never held the site, or whose lease B took, folds nothing at all.
    with pytest.raises(derivation.LeaseLost):
        await derivation.fold_site(store, derivation.Lease(site_id, "A"))
    assert await _pending(store, site_id) == 2  # two visitors' pageviews, one sent twice
    assert await derivation.fold_all(store, "A") == derivation.FoldPass(0, 1)


async def test_two_folders_meeting_on_one_batch_count_each_fact_once(tenant: Tenant, deps,
                                                                     ingest: Ingest):
    store, site_id = deps.store, tenant.site_id
    await _pageviews(ingest)
    facts = await _pending(store, site_id)
    retried = store.transactions_retried

    # Without leases, A reads the oldest five and stops before deleting them; B reads the
    # same five meanwhile (on a replica set; the embedded store lets B in after A) and commits.
    plan = FaultPlan()
    stopped = plan.pause(derivation.COLLECTION, "delete_many", seconds=0.5)
    folder_a = asyncio.create_task(
        derivation.fold_partition(FaultyStore(store, plan), site_id, batch=5))
    await asyncio.wait_for(stopped.wait(), 30)
    folded_by_b = await derivation.fold_partition(store, site_id, batch=5)
    folded_by_a = await folder_a
    assert (folded_by_a, folded_by_b) == (5, 5)
    if not store.embedded:
        # A's delete met B's commit: MongoDB aborted A, and A ran again on the next five.
        assert store.transactions_retried > retried

    while await derivation.fold_partition(store, site_id, batch=5):
        pass
    await _each_counted_once(store, site_id, facts)


async def test_the_purge_waits_for_the_folder_that_holds_a_site(tenant: Tenant, deps,
                                                                ingest: Ingest):
    from tests.retention.conftest import make_purger

    store, site_id = deps.store, tenant.site_id
    await _pageviews(ingest, visitors=2, days=1)
    assert await derivation.claim(store, site_id, "folder", now=datetime.now(UTC))
    purging = asyncio.create_task(make_purger(store).purge(datetime.now(UTC)))
    await asyncio.sleep(1.0)
    assert not purging.done()
    assert await _pending(store, site_id) == 2  # the purge has not folded behind the folder
    await derivation.release(store, site_id, "folder")
    assert await asyncio.wait_for(purging, 60) is not None
    # The purge folded what was pending under the lease, before anything went.
    assert await _pending(store, site_id) == 0
    assert _pageviews_counted(await _figures(store, site_id)) == 2
