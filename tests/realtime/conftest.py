"""A real redis-server for the live-bus tests, one per test session; the `slow` marker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.redis_server import running_redis


def pytest_configure(config: pytest.Config) -> None:
    """Declare `slow` here too, so that `filterwarnings = error` accepts it in this folder."""
    config.addinivalue_line("markers", "slow: takes seconds (real Redis or Celery); "
                            "runs in make test, deselect with -m 'not slow'")


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """URL of a redis-server started for this run."""
    with running_redis() as url:
        yield url
