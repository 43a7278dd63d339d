"""Retention tests: two visitors seeded with data of every kind through the real endpoints, and
purgers built on the app's store with a notifier that remembers what it was asked to send."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from config.metrics import Metrics
from documents import retention
from tasks.purge import RetentionPurger
from tests.support.app import Fetch, Tenant
from tests.support.visitor_data import SeededVisitor, seed_visitor

#: Every kind, as an overdue notice names them.
ALL_KINDS = [kind.key for kind in retention.KINDS]
#: When the purgers' runs are overdue: two intervals of an hour, and an hour.
OVERDUE_AFTER = timedelta(hours=3)


def as_stored(moment: datetime) -> datetime:
    """`moment` to the millisecond, as the stores keep it."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


class RecordingAlerts:
    """Remembers every retention alert instead of sending it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, list[str]]] = []
        #: The `since` of each overdue notice, in order.
        self.since: list[datetime] = []

    async def retention_alert(self, site_id: str, *, problem: str, kinds: list[str],
                              since: datetime | None = None) -> None:
        """Record the call."""
        self.calls.append((site_id, problem, kinds))
        if since is not None:
            self.since.append(since)


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


def make_purger(store: Any, alerts: Any | None = None, *, batch: int = 200,
                purges: bool = True) -> RetentionPurger:
    """A purger on `store` (not started: tests call `purge(now)` and `measure(now)` with their
    own clock); with `purges` False, what a server process runs beside a worker."""
    return RetentionPurger(store, Metrics(), alerts or RecordingAlerts(), interval_seconds=3600,
                           batch=batch, purges=purges)
