"""The data layer: the Store and one module per raw collection family with its indexes. The
derived layer above (derived/) keeps the figures folded from them and the dashboard's read
models; derived/store_setup.py hands its own collections, indexes and migrations to
`prepare_store`."""

from __future__ import annotations

from collections.abc import Iterable

from documents import (
    account_links,
    account_mail,
    accounts,
    activity,
    alerts,
    audit,
    commerce,
    digests,
    engagement,
    error_outbox,
    error_records,
    funnels,
    heatmaps,
    ingest_drops,
    interactions,
    leads,
    migrations,
    notifications,
    recordings,
    requests,
    retention,
    segments,
    sites,
    statement_nonces,
    surveys,
    two_factor,
    visitors,
)
from documents.migrations import Migration, run_once
from documents.store import Index, Store


def declared_indexes() -> list[Index]:
    """Every index every raw collection family declares."""
    return [
        *account_links.INDEXES, *account_mail.INDEXES,
        *accounts.INDEXES, *activity.INDEXES, *alerts.INDEXES, *audit.INDEXES, *commerce.INDEXES,
        *digests.INDEXES,
        *engagement.INDEXES, *error_outbox.INDEXES, *error_records.INDEXES, *heatmaps.INDEXES,
        *funnels.INDEXES,
        *ingest_drops.INDEXES, *interactions.INDEXES,
        *leads.INDEXES, *notifications.INDEXES, *recordings.INDEXES,
        *requests.INDEXES, *retention.INDEXES, *segments.INDEXES, *sites.INDEXES,
        *statement_nonces.INDEXES,
        *surveys.INDEXES, *two_factor.INDEXES, *visitors.INDEXES,
    ]


def declared_collections() -> list[str]:
    """Every raw collection start-up creates: those with indexes, and those declared bare."""
    named = {index.collection for index in declared_indexes()}
    return sorted(named | {*accounts.COLLECTIONS, migrations.COLLECTION,
                           notifications.CHANNELS, *two_factor.COLLECTIONS})


async def prepare_store(store: Store, *, indexes: Iterable[Index], collections: Iterable[str],
                        migrations: Iterable[tuple[str, Migration]]) -> None:
    """Create every declared collection and index, the raw families' and those the layer above
    gives (`indexes`, and `collections` declared bare), then run the data migrations not run
    yet: the raw families', then the given ones (`migrations`, by name, in order), so that what
    is derived is rebuilt from raw data already migrated; idempotent, never drops anything."""
    indexes = list(indexes)
    named = {index.collection for index in indexes}
    await store.ensure_collections(sorted({*declared_collections(), *named, *collections}))
    await store.ensure_indexes([*declared_indexes(), *indexes])
    await run_once(store, "recording-facts-v1", recordings.backfill_facts)
    await run_once(store, "error-titles-v1", error_records.drop_repeated_types)
    await run_once(store, "recording-footage-v1", recordings.backfill_footage)
    for name, migration in migrations:
        await run_once(store, name, migration)
