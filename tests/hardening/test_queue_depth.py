"""The embedded error queue's depth is a gauge on /metrics, read at every scrape."""

from __future__ import annotations

import server
from tasks.errors import error_job
from tests.support.app import Fetch, Tenant
from tests.tasks.support import js_error


async def test_the_queue_depth_gauge_counts_waiting_jobs_and_falls_back_to_zero(
        fetch: Fetch, tenant: Tenant, deps: server.Deps):
    # enqueue never suspends, so the workers cannot take a job before all three are queued.
    for _ in range(3):
        await deps.queue.enqueue(error_job(tenant.site_id, js_error()))
    assert deps.metrics.gauge_value("error_queue_depth") == 3
    assert "# TYPE error_queue_depth gauge\nerror_queue_depth 3\n" in deps.metrics.render()
    await deps.queue.join()  # type: ignore[attr-defined]  # the embedded queue
    scraped = await fetch("/metrics")
    assert "\nerror_queue_depth 0\n" in scraped.body.decode()
