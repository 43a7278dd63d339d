"""The data layer: the Store and one module per collection family, each with its indexes."""

from __future__ import annotations

from documents import (
    accounts,
    activity,
    audit,
    engagement,
    error_outbox,
    error_records,
    heatmaps,
    interactions,
    leads,
    notifications,
    queries,
    recordings,
    requests,
    sites,
    statement_nonces,
    visitors,
)
from documents.store import Index


def declared_indexes() -> list[Index]:
    """Every index every collection family declares."""
    return [
        *accounts.INDEXES, *activity.INDEXES, *audit.INDEXES, *engagement.INDEXES,
        *error_outbox.INDEXES, *error_records.INDEXES, *heatmaps.INDEXES, *interactions.INDEXES,
        *leads.INDEXES, *notifications.INDEXES, *queries.INDEXES, *recordings.INDEXES,
        *requests.INDEXES, *sites.INDEXES, *statement_nonces.INDEXES, *visitors.INDEXES,
    ]
