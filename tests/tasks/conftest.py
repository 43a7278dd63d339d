"""Registers the `slow` marker: tests that take seconds, and still run in `make test`."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Declare the marker so that `filterwarnings = error` accepts it."""
    config.addinivalue_line("markers", "slow: takes seconds (real Redis, Celery or 1,000 jobs); "
                            "runs in make test, deselect with -m 'not slow'")
