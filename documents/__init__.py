"""The data layer: the Store and one module per collection family, each with its indexes."""

from __future__ import annotations

from documents import accounts, activity, audit, engagement, leads, sites, visitors
from documents.store import Index


def declared_indexes() -> list[Index]:
    """Every index every collection family declares."""
    return [
        *accounts.INDEXES, *activity.INDEXES, *audit.INDEXES, *engagement.INDEXES,
        *leads.INDEXES, *sites.INDEXES, *visitors.INDEXES,
    ]
