"""`python -m bench.alerts`: the alert rules' evaluation, per site per pass, with 1,000 sites'
rules (issue 42 point 5).

Seeds BENCH_ALERTS_SITES sites (1,000 by default), each with one rule of every kind and a shop's
day of folded figures: today's and the four same weekdays' sessions by stage, a few error
occurrences on checkout in the last hour, 40 paid orders in the last four weeks, a lead. Then,
in one process on the embedded default (MONGODB_URI runs it on that store):

1. the baseline: a pass over BASELINE_SITES sites, timed per site before the others are seeded;
2. a pass over every site, timed per site, and its ratio to the baseline (the evaluation should
   cost the same per site whatever the number of sites);
3. each kind alone over every site: milliseconds per site and the store reads it needs per site,
   by collection (counted by a wrapper of the store's collections, here, not in the service).

Each pass is run once untimed first (episodes opened, evaluations recorded), so the timed passes
measure the steady state, where nothing new fires. No assertion on time: the figures are printed
and returned for bench/__main__.py.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.tenant import create_tenant
from config.metrics import Metrics
from derived import alert_figures, daily_figures, journeys
from documents import alerts, commerce, error_records, leads, sites
from documents.store import Store
from tasks.alerts import AlertEvaluator

SITES = int(os.environ.get("BENCH_ALERTS_SITES", "1000"))
BASELINE_SITES = 10
#: The store operations that read.
READS = frozenset({"find", "find_one", "aggregate", "count_documents", "distinct"})


class CountingStore:
    """The store, with every read on a collection counted by (collection, operation)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.reads: Counter[tuple[str, str]] = Counter()

    def collection(self, name: str) -> Any:
        return _CountingCollection(self._store.collection(name), name, self.reads)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class _CountingCollection:
    def __init__(self, collection: Any, name: str, reads: Counter[tuple[str, str]]) -> None:
        self._collection = collection
        self._name = name
        self._reads = reads

    def __getattr__(self, operation: str) -> Any:
        if operation in READS:
            self._reads[(self._name, operation)] += 1
        return getattr(self._collection, operation)


class Silent:
    """A sender that sends nothing: the bench measures the evaluation, not the channels."""

    async def alert(self, site_id: str, rule: dict[str, Any], event: dict[str, Any], *,
                    muted_addresses: list[str]) -> None:
        return None


async def seed_site(store: Store, template: dict[str, Any], n: int, now: datetime) -> str:
    """A site with one rule of every kind and a day of folded figures."""
    site_id = str(uuid.uuid4())
    await store.collection(sites.COLLECTION).insert_one({
        **template, "_id": site_id, "name": f"Bench {n}", "apiKeyHash": f"bench-{site_id}",
        "publicKey": f"bench-{site_id}", "createdAt": now - timedelta(days=60),
        "settings": {**template.get("settings", {}), "reportingCurrency": "EUR"}})
    today = now.date()
    days = [today - timedelta(weeks=weeks) for weeks in range(5)]
    await store.collection(daily_figures.SESSION_DAYS).insert_many([
        {"_id": daily_figures.session_day_id(site_id, day.isoformat(), journeys.STAGE, value),
         "siteId": site_id, "day": day.isoformat(), "dimension": journeys.STAGE,
         "value": value, "sessions": count}
        for day in days for value, count in (("00", 380), ("01", 20))])
    await store.collection(error_records.OCCURRENCES).insert_many([
        {"_id": str(uuid.uuid4()), "siteId": site_id, "errorId": f"e{k % 2}",
         "sessionId": f"s{k}", "visitorId": None, "page": "/checkout",
         "occurredAt": now - timedelta(minutes=5 + k)} for k in range(4)])
    await store.collection(commerce.ORDERS).insert_many([
        {"_id": commerce.order_id(site_id, f"o{k}"), "siteId": site_id, "orderId": f"o{k}",
         "status": "paid", "currency": "EUR", "total": 4000, "refunded": 0, "figure": [],
         "placedAt": now - timedelta(hours=16 * k + 1), "paidAt": now - timedelta(hours=16 * k),
         "updatedAt": now} for k in range(40)])
    await store.collection(leads.COLLECTION).insert_one({
        "_id": str(uuid.uuid4()), "siteId": site_id, "visitorId": "v", "name": "A",
        "email": "a@example.com", "createdAt": now - timedelta(hours=2)})
    site = {"_id": site_id, "organizationId": template["organizationId"]}
    for kind in alert_figures.KINDS:
        params = alert_figures.checked_params(kind, {"below": 5} if kind == "surveyScore"
                                              else {})
        await alerts.create_rule(store, site, {"kind": kind, "name": kind,
                                               "channels": ["webhook"]}, params, session=None)
    return site_id


async def timed_pass(evaluator: AlertEvaluator, site_ids: list[str], now: datetime) -> float:
    """Milliseconds per site of one pass over `site_ids`."""
    started = time.perf_counter()
    for site_id in site_ids:
        await evaluator.evaluate_site(site_id, now)
    return (time.perf_counter() - started) * 1000 / len(site_ids)


async def measure() -> dict[str, Any]:
    """The baseline pass, the pass over every site, then each kind alone with its reads."""
    environ = {"MONGODB_URI": os.environ["MONGODB_URI"]} if os.environ.get("MONGODB_URI") \
        else {}
    tenant = await create_tenant(environ)
    store = tenant.deps.store
    try:
        now = datetime.now(UTC)
        counting = CountingStore(store)
        evaluator = AlertEvaluator(counting, Metrics(), Silent(),  # type: ignore[arg-type]
                                   interval_seconds=60, purge_interval_seconds=3600)
        # The baseline is timed before the other sites exist: a store whose reads grow with
        # the data of every site shows here as a ratio above 1.
        site_ids = [await seed_site(store, tenant.site, n, now) for n in range(BASELINE_SITES)]
        await timed_pass(evaluator, site_ids, now)
        baseline_ms = await timed_pass(evaluator, site_ids, now)
        site_ids += [await seed_site(store, tenant.site, n, now)
                     for n in range(BASELINE_SITES, SITES)]
        await timed_pass(evaluator, site_ids, now)
        counting.reads.clear()
        all_ms = await timed_pass(evaluator, site_ids, now)
        pass_reads = sum(counting.reads.values()) / SITES
        kinds: dict[str, Any] = {}
        for kind in alert_figures.KINDS:
            counting.reads.clear()
            started = time.perf_counter()
            await evaluator.evaluate_kind(kind, now)
            ms = (time.perf_counter() - started) * 1000 / SITES
            kinds[kind] = {"ms_per_site": round(ms, 3),
                           "reads_per_site": {f"{name}.{operation}": round(count / SITES, 2)
                                              for (name, operation), count
                                              in sorted(counting.reads.items())}}
        return {"sites": SITES, "rules_per_site": len(alert_figures.KINDS),
                "baseline_sites": BASELINE_SITES,
                "baseline_ms_per_site": round(baseline_ms, 3),
                "pass_ms_per_site": round(all_ms, 3),
                "ratio": round(all_ms / baseline_ms, 3) if baseline_ms else None,
                "pass_reads_per_site": round(pass_reads, 2), "kinds": kinds}
    finally:
        await tenant.deps.close()


def main() -> dict[str, Any]:
    """Run the benchmark and print its table."""
    figures = asyncio.run(measure())
    print(f"alert evaluation, {figures['sites']} sites x {figures['rules_per_site']} rules")
    print(f"  pass: {figures['pass_ms_per_site']} ms per site (baseline, "
          f"{figures['baseline_sites']} sites: {figures['baseline_ms_per_site']} ms; ratio "
          f"{figures['ratio']}), {figures['pass_reads_per_site']} reads per site")
    print(f"  {'kind':<20} {'ms/site':>8}  reads per site")
    for kind, found in figures["kinds"].items():
        reads = ", ".join(f"{name} {count}" for name, count in found["reads_per_site"].items())
        print(f"  {kind:<20} {found['ms_per_site']:>8}  {reads}")
    return figures


if __name__ == "__main__":
    main()
