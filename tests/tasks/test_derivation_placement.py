"""Where the derivation runs: folding in the server on the embedded default, in the worker
when REDIS_URL is set, where the server only measures the lag (issue 30 point 4)."""

from __future__ import annotations

import asyncio

import pytest
import redis

from derived import derivation
from tasks.derivation import LAG_METRIC
from tasks.worker import background_work
from tests.support.app import Fetch, Tenant


async def _pageview(fetch: Fetch, tenant: Tenant) -> None:
    answer = await fetch("/ingest/pageviews", "POST", headers={"X-Service-Key": tenant.api_key},
                         json_body={"visitorId": "ada", "url": "https://shop.example/"})
    assert answer.code == 200, answer


async def _folded(deps, tenant: Tenant) -> bool:
    for _ in range(100):
        if await derivation.oldest_unfolded(deps.store, tenant.site_id) is None:
            return True
        await asyncio.sleep(0.05)
    return False


async def test_the_embedded_server_folds_in_the_background(fetch: Fetch, tenant: Tenant, deps):
    assert deps.derivation.folds
    deps.derivation.interval = 0.05
    deps.derivation.start()
    await _pageview(fetch, tenant)
    assert await _folded(deps, tenant)
    await deps.derivation.close()


class TestWithRedis:
    @pytest.fixture
    def settings_env(self, settings_env: dict[str, str], redis_url: str) -> dict[str, str]:
        redis.Redis.from_url(redis_url).flushdb()
        return {**settings_env, "REDIS_URL": redis_url}

    async def test_the_server_only_measures_and_the_worker_folds(
            self, fetch: Fetch, tenant: Tenant, deps, settings):
        assert not deps.derivation.folds
        deps.derivation.interval = 0.05
        deps.derivation.start()
        await _pageview(fetch, tenant)
        await asyncio.sleep(0.3)
        assert await derivation.oldest_unfolded(deps.store, tenant.site_id) is not None
        assert deps.metrics.gauge_value(LAG_METRIC) > 0
        await deps.derivation.close()

        deriver, renderer = background_work(settings, deps.store, deps.metrics)
        assert deriver.folds
        deriver.interval = 0.05
        deriver.start()
        assert await _folded(deps, tenant)
        await deriver.close()
        await renderer.close()
