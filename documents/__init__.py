"""The data layer: the Store and one module per collection family with its indexes. What the
dashboard shows is read through the families by derived/views/."""

from __future__ import annotations

from documents import (
    accounts,
    activity,
    audit,
    commerce,
    derivation,
    engagement,
    error_outbox,
    error_records,
    funnels,
    heatmaps,
    interactions,
    leads,
    migrations,
    notifications,
    recordings,
    requests,
    retention,
    rollups,
    sites,
    statement_nonces,
    surveys,
    visitors,
    visits,
)
from documents.store import Index, Store


def declared_indexes() -> list[Index]:
    """Every index every collection family declares."""
    return [
        *accounts.INDEXES, *activity.INDEXES, *audit.INDEXES, *commerce.INDEXES,
        *derivation.INDEXES,
        *engagement.INDEXES, *error_outbox.INDEXES, *error_records.INDEXES, *heatmaps.INDEXES,
        *funnels.INDEXES,
        *interactions.INDEXES,
        *leads.INDEXES, *notifications.INDEXES, *recordings.INDEXES,
        *requests.INDEXES, *retention.INDEXES, *rollups.INDEXES, *sites.INDEXES,
        *statement_nonces.INDEXES,
        *surveys.INDEXES, *visitors.INDEXES, *visits.INDEXES,
    ]


def declared_collections() -> list[str]:
    """Every collection start-up creates: those with indexes, and those declared bare."""
    named = {index.collection for index in declared_indexes()}
    return sorted(named | {*accounts.COLLECTIONS, *rollups.COLLECTIONS, migrations.COLLECTION,
                           derivation.LEASES, notifications.CHANNELS})


async def prepare_store(store: Store) -> None:
    """Create every declared collection and index, and run the data migrations not run yet;
    idempotent, never drops anything."""
    await store.ensure_collections(declared_collections())
    await store.ensure_indexes(declared_indexes())
    await migrations.run_once(store, "daily-figures-v1", derivation.rebuild_all_sites)
    await migrations.run_once(store, "recording-facts-v1", recordings.backfill_facts)
    await migrations.run_once(store, "error-titles-v1", error_records.drop_repeated_types)
    await migrations.run_once(store, "recording-footage-v1", recordings.backfill_footage)
    # Visits and the session figures (issue 31), from the pageviews stored before them.
    await migrations.run_once(store, "visits-v1", derivation.rebuild_all_sites)
    # Visits carry their journey, and the daily counts its outcome (documents/journeys.py).
    await migrations.run_once(store, "journeys-v1", derivation.rebuild_all_sites)
