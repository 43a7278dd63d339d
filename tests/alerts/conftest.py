"""Fixtures for alert rules: the dashboard data API's viewer, a recording sender and an
evaluator over the test's store."""

from __future__ import annotations

from typing import Any

import pytest

from config.metrics import Metrics
from tasks.alerts import AlertEvaluator
from tests.dashboard_api.conftest import viewer_token

__all__ = ["viewer_token"]


class Outbox:
    """An alert sender that keeps what it is asked to send."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.muted: list[list[str]] = []

    async def alert(self, site_id: str, rule: dict[str, Any], event: dict[str, Any], *,
                    muted_addresses: list[str]) -> None:
        self.events.append(event)
        self.muted.append(muted_addresses)

    def of(self, what: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event["type"] == f"alert.{what}"]


@pytest.fixture
def outbox() -> Outbox:
    return Outbox()


@pytest.fixture
def evaluator(deps: Any, outbox: Outbox) -> AlertEvaluator:
    return AlertEvaluator(deps.store, Metrics(), outbox, interval_seconds=60,
                          purge_interval_seconds=3600)
