"""Where the purge runs: in the server on the embedded default, in the worker when REDIS_URL is
set, where the server only reads when the last run finished, for /metrics."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
import redis

from tasks.purge import LAST_SUCCESS_METRIC
from tasks.worker import retention_purge


async def _old_recording(deps, site_id: str) -> None:
    """A recording of 2024, far past the default 90 days."""
    at = datetime(2024, 1, 1, tzinfo=UTC)
    await deps.store.collection("recordings").insert_one({
        "_id": "old-recording", "siteId": site_id, "visitorId": "v", "sessionId": "s",
        "status": "ended", "startedAt": at, "lastActivityAt": at, "endedAt": at, "pages": []})


async def _finished(deps, purger, within: float = 10.0) -> bool:
    for _ in range(int(within / 0.05)):
        if await deps.store.collection("recordings").count_documents({}) == 0 \
                and await purger.measure() > 0:
            return True
        await asyncio.sleep(0.05)
    return False


async def test_the_embedded_server_purges_in_the_background(deps, tenant):
    await _old_recording(deps, tenant.site_id)
    assert deps.purge.purges
    deps.purge.interval = 0.05
    deps.purge.start()
    assert await _finished(deps, deps.purge)
    await deps.purge.close()
    assert deps.metrics.gauge_value(LAST_SUCCESS_METRIC) > 0


class TestWithRedis:
    @pytest.fixture
    def settings_env(self, settings_env: dict[str, str], redis_url: str) -> dict[str, str]:
        redis.Redis.from_url(redis_url).flushdb()
        return {**settings_env, "REDIS_URL": redis_url}

    async def test_the_server_only_reads_and_the_worker_purges(self, deps, tenant, settings):
        await _old_recording(deps, tenant.site_id)
        assert not deps.purge.purges
        deps.purge.interval = 0.05
        deps.purge.start()
        await asyncio.sleep(0.3)
        assert await deps.store.collection("recordings").count_documents({}) == 1
        assert deps.metrics.gauge_value(LAST_SUCCESS_METRIC) == 0
        await deps.purge.close()

        purger = retention_purge(settings, deps.store, deps.metrics, deps.notifier)
        assert purger.purges
        purger.interval = 0.05
        purger.start()
        assert await _finished(deps, purger)
        await purger.close()
        # The server's reading sees the worker's run.
        assert await deps.purge.measure() > 0
