"""Retention tests: two visitors seeded with data of every kind through the real endpoints, and
purgers built on the app's store with a notifier that remembers what it was asked to send."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from config.metrics import Metrics
from tasks.purge import RetentionPurger
from tests.support.app import Fetch, Tenant
from tests.support.visitor_data import SeededVisitor, seed_visitor


class RecordingAlerts:
    """Remembers every retention alert instead of sending it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, list[str]]] = []

    async def retention_alert(self, site_id: str, *, problem: str, kinds: list[str]) -> None:
        """Record the call."""
        self.calls.append((site_id, problem, kinds))


@dataclass
class Seeded:
    """Two visitors with data of every kind, and when they were seeded."""

    ada: SeededVisitor
    bob: SeededVisitor
    at: datetime


@pytest.fixture
async def seeded(fetch: Fetch, tenant: Tenant, deps: Any) -> Seeded:
    at = datetime.now(UTC)
    ada = await seed_visitor(fetch, tenant, deps)
    bob = await seed_visitor(fetch, tenant, deps, "bob-2", email="bob@example.com",
                             name="Bob Builder", phone="+44 20 7946 1111", wp_user_id=None)
    return Seeded(ada, bob, at)


def make_purger(store: Any, alerts: Any | None = None, *, batch: int = 200) -> RetentionPurger:
    """A purger on `store` (not started: tests call `purge(now)` with their own clock)."""
    return RetentionPurger(store, Metrics(), alerts or RecordingAlerts(), interval_seconds=3600,
                           batch=batch, purges=True)
