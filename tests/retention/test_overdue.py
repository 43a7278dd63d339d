"""A purge that does not run at all is noticed: every process checks that a run finished within
two purge intervals and an hour, says so in /metrics and on the Privacy page, and tells every
site's owner once per overdue episode (issue 32)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tasks.purge import OVERDUE_METRIC
from tests.retention.conftest import (
    ALL_KINDS,
    OVERDUE_AFTER,
    RecordingAlerts,
    as_stored,
    make_purger,
)
from tests.support.app import Fetch, Tenant


async def test_a_purge_nobody_runs_is_noticed_by_the_servers_and_notified_once_per_episode(
        deps, tenant: Tenant):
    # The worker is down: only server processes, which read the purge's state, are running.
    alerts = RecordingAlerts()
    server, other_server = (make_purger(deps.store, alerts, purges=False) for _ in range(2))
    started = datetime.now(UTC)
    await server.measure(started)
    await other_server.measure(started + timedelta(minutes=1))
    await server.measure(started + OVERDUE_AFTER - timedelta(minutes=1))
    assert (server.overdue, alerts.calls) == (False, [])
    assert server.metrics.gauge_value(OVERDUE_METRIC) == 0

    await server.measure(started + OVERDUE_AFTER + timedelta(minutes=1))
    assert server.overdue and server.metrics.gauge_value(OVERDUE_METRIC) == 1
    assert alerts.calls == [(tenant.site_id, "overdue", ALL_KINDS)]
    # Measured from when the first process started watching, since no run ever finished.
    assert alerts.since == [as_stored(started)]
    # The other server notices too, and neither tells the owner again in this episode.
    for hours in (4, 8, 30):
        await other_server.measure(started + timedelta(hours=hours))
        await server.measure(started + timedelta(hours=hours, minutes=1))
    assert other_server.overdue and len(alerts.calls) == 1

    # The worker is back: a run finishes, and the purge is no longer overdue.
    worker = make_purger(deps.store, alerts)
    back = started + timedelta(hours=31)
    assert await worker.purge(back) is not None
    await server.measure(back + timedelta(minutes=5))
    assert not server.overdue and server.metrics.gauge_value(OVERDUE_METRIC) == 0
    assert not worker.overdue and len(alerts.calls) == 1

    # It stops again: a new episode, measured from that run's end, is notified once more.
    await server.measure(back + OVERDUE_AFTER + timedelta(minutes=1))
    await other_server.measure(back + OVERDUE_AFTER + timedelta(minutes=2))
    assert alerts.calls == [(tenant.site_id, "overdue", ALL_KINDS)] * 2
    assert alerts.since == [as_stored(started), as_stored(back)]


async def test_a_run_resumed_long_after_it_began_is_not_overdue_once_it_finishes(
        deps, tenant: Tenant):
    # A run whose cutoffs were measured two days ago, finished now by a resumed pass.
    now = datetime.now(UTC)
    await deps.store.collection("retention_runs").insert_one({
        "_id": "resumed", "owner": "gone", "startedAt": now - timedelta(days=2),
        "now": now - timedelta(days=2), "completedAt": None, "done": [], "removed": {},
        "failures": 3, "lastError": "InjectedFault while purging leads"})
    alerts = RecordingAlerts()
    assert await make_purger(deps.store, alerts).purge(now) is not None
    server = make_purger(deps.store, alerts, purges=False)
    await server.measure(now + timedelta(minutes=1))
    assert not server.overdue and alerts.calls == []
    # /metrics still says when the run's cutoffs were measured from.
    assert server.last_success == as_stored(now - timedelta(days=2)).timestamp()


async def test_the_privacy_answer_and_metrics_say_since_when_the_purge_is_overdue(
        fetch: Fetch, tenant: Tenant, deps):
    now = datetime.now(UTC)
    finished = as_stored(now - timedelta(hours=4))
    await deps.store.collection("retention_runs").insert_one({
        "_id": "long-ago", "owner": "worker", "startedAt": finished, "now": finished,
        "completedAt": finished, "finishedAt": finished, "done": [], "removed": {},
        "failures": 0, "lastError": None})
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/retention", token=tenant.token)
    assert answer.code == 200, answer
    status = answer.json()
    assert status["overdueAfterSeconds"] == OVERDUE_AFTER.total_seconds()
    assert status["overdueSince"] == status["lastRunCompletedAt"]
    assert status["overdueSince"].startswith(finished.strftime("%Y-%m-%dT%H:%M:%S"))
    await deps.purge.measure()
    metrics = (await fetch("/metrics")).body.decode()
    assert f"{OVERDUE_METRIC} 1.0" in metrics.splitlines()

    # A run finished a minute ago: the purge keeps up.
    await deps.store.collection("retention_runs").update_one(
        {"_id": "long-ago"}, {"$set": {"completedAt": now - timedelta(minutes=1),
                                       "finishedAt": now - timedelta(minutes=1)}})
    status = (await fetch(f"/api/v1/sites/{tenant.site_id}/retention",
                          token=tenant.token)).json()
    assert status["overdueSince"] is None
    await deps.purge.measure()
    assert f"{OVERDUE_METRIC} 0.0" in (await fetch("/metrics")).body.decode().splitlines()
