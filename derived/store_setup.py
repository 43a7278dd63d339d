"""What the derived layer asks of the store, added to the raw families' (documents/): the
collections the fold keeps (unfolded facts and leases, the daily figures, visits), their
indexes and intended shard keys, and the start-up migrations that rebuild the figures.

`prepare_store` is what a process calls at start (server.build_deps, the worker): the raw
families' collections, indexes and migrations (`documents.prepare_store`), then these.
"""

from __future__ import annotations

import documents
from derived import daily_figures, derivation, visits
from documents import sharding
from documents.migrations import Migration
from documents.sharding import BY_SITE, BY_VISITOR, SITE, VISITOR, Placement
from documents.store import Index, Store

INDEXES: list[Index] = [*derivation.INDEXES, *daily_figures.INDEXES, *visits.INDEXES]
#: Collections created without an index of their own.
COLLECTIONS = (*daily_figures.COLLECTIONS, derivation.LEASES)
#: Run once per store, in this order, after the raw families' migrations.
MIGRATIONS: tuple[tuple[str, Migration], ...] = (
    ("daily-figures-v1", derivation.rebuild_all_sites),
    # Visits and the session figures (issue 31), from the pageviews stored before them.
    ("visits-v1", derivation.rebuild_all_sites),
    # Visits carry their journey, and the daily counts its outcome (derived/journeys.py).
    ("journeys-v1", derivation.rebuild_all_sites),
    # Visits carry what sessions are found by (issue 41 point 5, derived/visits.py).
    ("visit-filter-keys-v1", visits.add_filter_keys),
    # Each error's days, and the days it hit each visitor (the errors list, issue 39); the
    # engagement counts: bounces, session lengths, time on page, scroll depth (issue 41).
    ("error-days-engagement-v1", derivation.rebuild_all_sites),
    # A hit's sessions kept by outcome in one document per error (or page) and day.
    ("hit-days-v1", derivation.rebuild_all_sites),
    # Visits that a rebuild worked out from stored pageviews got no journey until then.
    ("journeys-v2", derivation.rebuild_all_sites),
)

#: Where each derived collection would live in a sharded cluster (documents/sharding.py says
#: why the plan exists and how it is checked).
SHARD_KEYS: dict[str, Placement] = {
    derivation.LEASES: Placement(None, "one lease per site"),
    # A visitor's share of the figures: erased and restricted with the visitor.
    daily_figures.VISITOR_DAYS: Placement(VISITOR, BY_VISITOR),
    daily_figures.ERROR_VISITOR_DAYS: Placement(VISITOR, BY_VISITOR),
    visits.COLLECTION: Placement(VISITOR, BY_VISITOR),
    derivation.COLLECTION: Placement(VISITOR, BY_VISITOR + "; folded per site"),
    # A site's own figures.
    daily_figures.SITE_DAYS: Placement(SITE, BY_SITE + " (read by `_id`, which starts with it)"),
    daily_figures.PAGE_DAYS: Placement(SITE, BY_SITE),
    daily_figures.SESSION_DAYS: Placement(SITE, BY_SITE),
    daily_figures.ERROR_DAYS: Placement(SITE, BY_SITE),
}
#: Query shapes on derived collections that do not name the shard key, and why they may scatter.
SCATTERS: dict[tuple[str, frozenset[str]], str] = {
    (derivation.COLLECTION, frozenset()): (
        "the lag gauge's one sorted read of the oldest fact, every few seconds: one index "
        "entry per shard"),
}


def declared_indexes() -> list[Index]:
    """Every index of the store: the raw families' and the derived layer's."""
    return [*documents.declared_indexes(), *INDEXES]


def declared_collections() -> list[str]:
    """Every collection start-up creates: the raw families' and the derived layer's."""
    return sorted({*documents.declared_collections(), *COLLECTIONS,
                   *(index.collection for index in INDEXES)})


def shard_keys() -> dict[str, Placement]:
    """Every collection's intended shard key: the raw families' and the derived layer's."""
    return {**sharding.SHARD_KEYS, **SHARD_KEYS}


def scatters() -> dict[tuple[str, frozenset[str]], str]:
    """Every query shape that may scatter over every shard, and why."""
    return {**sharding.SCATTERS, **SCATTERS}


async def prepare_store(store: Store) -> None:
    """Create every collection and index of the store and run the migrations not run yet;
    idempotent, never drops anything."""
    await documents.prepare_store(store, indexes=INDEXES, collections=COLLECTIONS,
                                  migrations=MIGRATIONS)
