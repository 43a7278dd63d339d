"""The derivation stage's runner: folds unfolded facts into the figures on a short interval.

The fold itself is derived/derivation.py. Where it runs: in the server process on the
embedded default (one process, nothing else to install), in the worker when REDIS_URL is set
(`visitor-service worker`), so that web processes in production only measure the lag. Several
runners may run side by side: a lease per site keeps them off each other's work, and the
fold's transactions keep every fact counted once even when two meet.

The lag, the age of the oldest fact not folded yet, is the gauge `derivation_lag_seconds`
in /metrics, read by every runner (folding or not) on each pass, with the facts set aside
because they cannot be folded (`derivation_facts_quarantined`; `visitor-service quarantine`
lists them and puts them back). A site whose fold fails is counted in
`derivation_site_failures_total` and tried again on the next pass; the other sites go on.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from config.background import PeriodicTask
from config.metrics import Metrics
from derived import derivation
from documents.accounts import new_id
from documents.store import Store

log = logging.getLogger(__name__)

LAG_METRIC = "derivation_lag_seconds"
LAG_HELP = "Age in seconds of the oldest fact not yet folded into the figures (0: none)."
FOLDED_METRIC = "derivation_facts_folded_total"
FOLDED_HELP = "Facts folded into the figures by this process."
QUARANTINED_METRIC = "derivation_facts_quarantined"
QUARANTINED_HELP = ("Facts set aside because they cannot be folded "
                    "(see `visitor-service quarantine`).")
SET_ASIDE_METRIC = "derivation_facts_set_aside_total"
SET_ASIDE_HELP = "Facts this process set aside, by reason."
SITE_FAILURES_METRIC = "derivation_site_failures_total"
SITE_FAILURES_HELP = "Passes over a site that failed or lost their lease (tried again next pass)."


class FigureDeriver:
    """Folds pending facts into the figures (or, with `folds` off, only measures the lag)."""

    def __init__(self, store: Store, metrics: Metrics, *, interval_seconds: float,
                 folds: bool) -> None:
        self.store = store
        self.metrics = metrics
        self.interval = interval_seconds
        self.folds = folds
        #: One owner name per process, so its leases are its own.
        self.owner = new_id()
        self.lag_seconds = 0.0
        self.quarantined = 0
        # A bad pass is logged and the next one retries: leases expire.
        steps = [("figure derivation", self.fold)] if folds else []
        self._loop = PeriodicTask("figure-derivation", [*steps, ("derivation lag", self.measure)],
                                  pause=lambda: self.interval, logger=log)
        metrics.gauge(LAG_METRIC, LAG_HELP, lambda: self.lag_seconds)
        metrics.gauge(QUARANTINED_METRIC, QUARANTINED_HELP, lambda: self.quarantined)

    async def fold(self) -> int:
        """Fold every pending fact this process can lease now; returns how many."""
        done = await derivation.fold_all(self.store, self.owner)
        if done.folded:
            self.metrics.count(FOLDED_METRIC, FOLDED_HELP, amount=done.folded)
        for reason in done.quarantined:
            self.metrics.count(SET_ASIDE_METRIC, SET_ASIDE_HELP, reason=reason)
        if done.failed_sites:
            self.metrics.count(SITE_FAILURES_METRIC, SITE_FAILURES_HELP, amount=done.failed_sites)
        return done.folded

    async def measure(self) -> float:
        """Read the lag from the store; returns it in seconds."""
        oldest = await derivation.oldest_unfolded(self.store)
        self.lag_seconds = (max(0.0, (datetime.now(UTC) - oldest).total_seconds())
                            if oldest is not None else 0.0)
        self.quarantined = await derivation.quarantined_count(self.store)
        return self.lag_seconds

    def start(self) -> None:
        """Run in the background until `close`."""
        self._loop.start()

    async def close(self) -> None:
        """Stop the background loop (a fold cut off here is undone by its transaction)."""
        await self._loop.close()
