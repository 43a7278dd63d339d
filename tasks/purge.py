"""The retention purge's runner: on an interval, removes what is past each site's retention.

The purge itself is privacy/retention.py. It runs where the derivation runs, with the same
shape (tasks/derivation.py): in the server process on the embedded default, in the worker when
REDIS_URL is set; server processes then only read its state for /metrics. One runner at a time
across every process: it holds the lease `documents.retention.LEASE_KEY` in the background
loops' lease collection (`derived.derivation.claim`, one upsert on a unique `_id`) and renews
it before every batch; a runner that finds it held skips the pass, and one that loses it stops.

A pass that fails is counted (`retention_purge_failures_total`), recorded on the run (which the
next pass resumes) and notified to the owner of the site it failed on, at most once a day per
site; a site whose oldest item is still past its retention after a pass ("behind") is notified
the same way. `retention_purge_last_success_timestamp` is when the last run finished.

A purge that does not run at all (the worker down or misconfigured) raises nothing, so every
process, purging or not, also checks on each pass that a run finished recently enough
(`documents.retention.overdue_after`: two intervals and an hour). When none did, the purge is
overdue: `retention_purge_overdue` says so in /metrics, the Privacy page says so, and each
site's owner hears of it through the site's purge-overdue alert rule (tasks/alerts.py): the
first process to notice an overdue episode gives every site without such a rule its built-in
one, and every process evaluates those rules on each pass, since the worker that evaluates the
other rules may be the process that is down. The rule's episode key lets one process send each
episode, and its "resolved" message when a run finishes again.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from config.background import PeriodicTask
from config.metrics import Metrics
from derived import derivation
from documents import alerts as alert_rules
from documents import retention, sites
from documents.accounts import new_id
from documents.store import Store
from instants import format_instant
from privacy.retention import PurgeFailed, PurgeReport, purge_all
from tasks.alerts import AlertEvaluator

log = logging.getLogger(__name__)

LAST_SUCCESS_METRIC = "retention_purge_last_success_timestamp"
LAST_SUCCESS_HELP = "Unix time the last retention purge run finished (0: never)."
REMOVED_METRIC = "retention_purge_removed_total"
REMOVED_HELP = "Items the retention purge removed or anonymised in this process, by kind."
FAILURES_METRIC = "retention_purge_failures_total"
FAILURES_HELP = "Retention purge passes that failed in this process."
#: How long the runner holds the purge between renewals (it renews before every batch).
LEASE = timedelta(minutes=5)
#: An owner hears of a failing or lagging purge at most this often per site.
ALERT_EVERY = timedelta(days=1)
OVERDUE_METRIC = "retention_purge_overdue"
OVERDUE_HELP = ("1 when no retention purge run has finished for two purge intervals and an hour "
                "(no process is purging), else 0.")
OVERDUE_KIND = "purgeOverdue"


class RetentionAlerts(Protocol):
    """Where purge problems go (tasks.notifications.Notifier): a failing or lagging purge as a
    retention notice, an overdue one as the purge-overdue rule's alert."""

    async def retention_alert(self, site_id: str, *, problem: str, kinds: list[str],
                              since: datetime | None = None) -> None: ...

    async def alert(self, site_id: str, rule: dict[str, Any], event: dict[str, Any], *,
                    muted_addresses: list[str]) -> None: ...


class RetentionPurger:
    """Runs the retention purge on an interval (or, with `purges` off, only reads its state)."""

    def __init__(self, store: Store, metrics: Metrics, alerts: RetentionAlerts, *,
                 interval_seconds: float, batch: int, purges: bool) -> None:
        self.store = store
        self.metrics = metrics
        self.alerts = alerts
        self.interval = interval_seconds
        self.batch = batch
        self.purges = purges
        #: One owner name per runner, so its lease is its own.
        self.owner = new_id()
        self.last_success = 0.0
        self.overdue = False
        self._overdue_rules = AlertEvaluator(store, metrics, alerts,
                                             interval_seconds=interval_seconds,
                                             purge_interval_seconds=interval_seconds)
        # A failed pass is logged by the exception's type only: a driver's message can quote a
        # document's values.
        steps = [("retention purge", self.purge)] if purges else []
        self._loop = PeriodicTask("retention-purge",
                                  [*steps, ("retention purge state", self.measure)],
                                  pause=lambda: self.interval, logger=log, traceback=False)
        metrics.gauge(LAST_SUCCESS_METRIC, LAST_SUCCESS_HELP, lambda: self.last_success)
        metrics.gauge(OVERDUE_METRIC, OVERDUE_HELP, lambda: float(self.overdue))

    async def purge(self, now: datetime | None = None) -> PurgeReport | None:
        """One pass measured from `now` (a pass resumed keeps its run's instant); None when
        another runner holds the purge."""
        if not await self._renew():
            return None
        try:
            report = await purge_all(self.store, self.owner, now=now or datetime.now(UTC),
                                     batch=self.batch, renew=self._renew)
        except Exception as exc:
            await self._failed(exc, now or datetime.now(UTC))
            raise
        finally:
            await derivation.release(self.store, retention.LEASE_KEY, self.owner)
        for kind, removed in report.removed.items():
            if removed:
                self.metrics.count(REMOVED_METRIC, REMOVED_HELP, amount=removed, kind=kind)
        for site_id, kinds in report.behind.items():
            await self._alert(site_id, "behind", kinds, now or datetime.now(UTC))
        await self.measure(now)
        return report

    async def measure(self, now: datetime | None = None) -> float:
        """Read when the last run finished from the store, and whether the purge is overdue at
        `now`, and evaluate the purge-overdue rules (each episode sent once, resolved when a
        run finishes again); returns the last finish as Unix time."""
        now = now or datetime.now(UTC)
        await retention.watch(self.store, now)
        clock = await retention.purge_clock(self.store, now=now,
                                            after=retention.overdue_after(self.interval))
        self.last_success = clock.last_completed_at.timestamp() if clock.last_completed_at \
            else 0.0
        self.overdue = clock.overdue_since is not None
        if clock.overdue_since is not None \
                and await retention.claim_overdue_notice(self.store, clock.overdue_since):
            log.error("retention purge overdue: no run has finished since",
                      extra={"since": format_instant(clock.overdue_since)})
            await alert_rules.give_built_in_rule(self.store, await sites.all_sites(self.store),
                                                 OVERDUE_KIND)
        await self._overdue_rules.evaluate_kind(OVERDUE_KIND, now)
        return self.last_success

    async def _renew(self) -> bool:
        # Leases are about live processes, so they run on the wall clock, not the pass's `now`.
        return await derivation.claim(self.store, retention.LEASE_KEY, self.owner,
                                      now=datetime.now(UTC), lease=LEASE)

    async def _failed(self, exc: Exception, now: datetime) -> None:
        self.metrics.count(FAILURES_METRIC, FAILURES_HELP)
        # The reason names the kind and the exception's type: never a document or a value.
        where = exc if isinstance(exc, PurgeFailed) else None
        reason = f"{type(exc.__cause__ or exc).__name__} while purging " + (
            where.kind if where else "(between kinds)")
        log.error("retention purge failed", extra={"reason": reason})
        for run in await retention.open_runs(self.store):
            if run.get("owner") == self.owner:
                await retention.fail_run(self.store, run["_id"], reason, datetime.now(UTC))
        if where is not None:
            await self._alert(where.site_id, "failed", [where.kind], now)

    async def _alert(self, site_id: str, problem: str, kinds: list[str], now: datetime) -> None:
        if await retention.claim_alert(self.store, site_id, now=now, every=ALERT_EVERY):
            await self.alerts.retention_alert(site_id, problem=problem, kinds=kinds)

    def start(self) -> None:
        """Run in the background until `close`."""
        self._loop.start()

    async def close(self) -> None:
        """Stop the background loop (a batch cut off here is undone by its transaction)."""
        await self._loop.close()
