"""A purge that does not run at all is noticed: every process checks that a run finished within
two purge intervals and an hour, says so in /metrics and on the Privacy page, and tells every
site's owner once per overdue episode through the site's purge-overdue alert rule, given to
every site that has none (issues 32 and 42)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from documents import alerts as alert_rules
from instants import format_instant
from tasks.purge import OVERDUE_METRIC
from tests.retention.conftest import (
    OVERDUE_AFTER,
    RecordingAlerts,
    as_stored,
    make_purger,
)
from tests.support.app import Fetch, Tenant


class RecordingSender(RecordingAlerts):
    """Also remembers the alert rules' episodes, as (site, kind, fired or resolved)."""

    def __init__(self) -> None:
        super().__init__()
        self.alerts: list[tuple[str, str, str]] = []
        self.events: list[dict[str, Any]] = []

    async def alert(self, site_id: str, rule: dict[str, Any], event: dict[str, Any], *,
                    muted_addresses: list[str]) -> None:
        self.alerts.append((site_id, rule["kind"], event["type"].removeprefix("alert.")))
        self.events.append(event)


async def test_a_purge_nobody_runs_is_noticed_by_the_servers_and_alerted_once_per_episode(
        deps, tenant: Tenant, fetch: Fetch):
    # The worker is down: only server processes, which read the purge's state, are running.
    alerts = RecordingSender()
    server, other_server = (make_purger(deps.store, alerts, purges=False) for _ in range(2))
    started = datetime.now(UTC)
    await server.measure(started)
    await other_server.measure(started + timedelta(minutes=1))
    await server.measure(started + OVERDUE_AFTER - timedelta(minutes=1))
    assert (server.overdue, alerts.calls, alerts.alerts) == (False, [], [])
    assert server.metrics.gauge_value(OVERDUE_METRIC) == 0
    # Nothing is given before the purge is overdue: a site's rules are its owner's.
    assert await alert_rules.list_rules(deps.store, tenant.site_id) == []

    await server.measure(started + OVERDUE_AFTER + timedelta(minutes=1))
    assert server.overdue and server.metrics.gauge_value(OVERDUE_METRIC) == 1
    # The site had no purge-overdue rule: it is given its built-in one, which fires.
    assert alerts.alerts == [(tenant.site_id, "purgeOverdue", "fired")]
    assert alerts.calls == []  # no retention notice of its own any more
    # Measured from when the first process started watching, since no run ever finished.
    assert alerts.events[0]["figures"]["overdueSince"] == format_instant(as_stored(started))
    assert alerts.events[0]["page"] == "privacy"
    rules = (await fetch(f"/api/v1/sites/{tenant.site_id}/alert-rules",
                         token=tenant.token)).json()["rules"]
    assert [(rule["kind"], rule["builtIn"], rule["evaluation"]["state"]) for rule in rules] == [
        ("purgeOverdue", True, "firing")]
    # The other server notices too, and neither tells the owner again in this episode.
    for hours in (4, 8, 30):
        await other_server.measure(started + timedelta(hours=hours))
        await server.measure(started + timedelta(hours=hours, minutes=1))
    assert other_server.overdue and len(alerts.alerts) == 1

    # The worker is back: a run finishes, the purge is no longer overdue, and the owner hears
    # that it is resolved, once.
    worker = make_purger(deps.store, alerts)
    back = started + timedelta(hours=31)
    assert await worker.purge(back) is not None
    await server.measure(back + timedelta(minutes=5))
    await other_server.measure(back + timedelta(minutes=6))
    assert not server.overdue and server.metrics.gauge_value(OVERDUE_METRIC) == 0
    assert not worker.overdue
    assert [what for _, _, what in alerts.alerts] == ["fired", "resolved"]

    # It stops again: a new episode, measured from that run's end, is alerted once more.
    await server.measure(back + OVERDUE_AFTER + timedelta(minutes=1))
    await other_server.measure(back + OVERDUE_AFTER + timedelta(minutes=2))
    assert [what for _, _, what in alerts.alerts] == ["fired", "resolved", "fired"]
    assert [event["figures"]["overdueSince"] for event in alerts.events
            if event["type"] == "alert.fired"] == [format_instant(as_stored(started)),
                                                   format_instant(as_stored(back))]


async def test_an_owner_mutes_the_built_in_rule_but_cannot_delete_it_and_it_is_not_given_twice(
        deps, tenant: Tenant, fetch: Fetch):
    alerts = RecordingSender()
    server = make_purger(deps.store, alerts, purges=False)
    started = datetime.now(UTC)
    await server.measure(started)
    await server.measure(started + OVERDUE_AFTER + timedelta(minutes=1))
    [rule] = await alert_rules.list_rules(deps.store, tenant.site_id)
    path = f"/api/v1/sites/{tenant.site_id}/alert-rules/{rule['_id']}"
    refused = await fetch(path, "DELETE", token=tenant.token)
    assert refused.code == 422 and "mute it instead" in refused.json()["error"]["message"]
    muted = await fetch(path, "PATCH", token=tenant.token, json_body={"muted": True})
    assert muted.code == 200

    # A worker runs once, then stops: the next episode is not sent to a site that muted it,
    # and the site is not given a second rule.
    worker = make_purger(deps.store, alerts)
    back = started + timedelta(hours=5)
    assert await worker.purge(back) is not None
    await server.measure(back + OVERDUE_AFTER + timedelta(minutes=1))
    assert [what for _, _, what in alerts.alerts] == ["fired"]
    assert len(await alert_rules.list_rules(deps.store, tenant.site_id)) == 1


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
