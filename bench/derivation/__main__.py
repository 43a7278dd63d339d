"""`python -m bench.derivation`: a backlog of facts folded by two workers at once (issue 38).

The backlog is real traffic: pageviews of VISITORS visitors on SITES sites over DAYS days, sent
in a shuffled order through the service's own ingest path (`ingest.activity.record_pageview`,
what POST /ingest/pageviews calls), which stores each pageview and its unfolded fact together.
Nothing folds while it is sent.

1. On SecantusDB (the real driver), two databases get an equal backlog of --facts pageviews.
   One worker process folds the first alone: the baseline. Two worker processes, each with a
   Motor client of its own, fold the second at once, leasing sites from each other
   (`derivation.fold_all` until nothing is pending). Throughput per worker, facts folded per
   second, and the two together against the one alone. Checked: the workers' folded facts add
   up to the backlog, no fact is left, the pageviews counted equal those sent, and every
   figure document (site, page, session and visitor days, zero counters aside) equals what
   `derivation.rebuild_site` then makes of the stored data.
2. On the embedded default, a backlog of --embedded-facts pageviews (by default as many)
   folded in-process while a 5 ms ticker runs on the same event loop: the longest stall (wall
   time between ticks beyond the 5 ms), the event-loop thread's longest CPU time between ticks
   and its longest garbage collection, against the same ticker with nothing else running.
   The same checks.

The embedded store is mongomock, which scans whole collections: at the full size its part
takes about two minutes on two shared cores (docs/performance.md).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from bench.loadgen import ROOT, cpu_seconds
from bench.tenant import BenchTenant, create_tenant
from derived import daily_figures, derivation
from documents import accounts
from documents.store import Store
from ingest.activity import record_pageview
from tests.support.secantus import running_secantus

T = TypeVar("T")

FACTS = 10_000
SITES = 4
VISITORS = 200
DAYS = 4
#: Pageviews sent at once while the backlog is built.
SENDERS = 8
TICK_SECONDS = 0.005
BASELINE_TICK_SECONDS = 3.0
SHOP = "https://shop.example"
DESKTOP = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
PHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
         "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1")
#: Addresses the GeoIP database places in Great Britain and Germany (as the tests use).
IPS = ("81.2.69.160", "85.214.132.117")
REFERRERS = (None, "https://www.google.com/", "https://news.example/story")
#: The fields that say which figure a document is, not what it counts.
KEY_FIELDS = {"_id", "siteId", "day", "slot", "page", "dimension", "value"}
FIGURES = (daily_figures.SITE_DAYS, daily_figures.PAGE_DAYS, daily_figures.SESSION_DAYS,
           daily_figures.VISITOR_DAYS)


def _pageviews(site_ids: list[str], facts: int, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """`facts` pageviews of VISITORS visitors spread over the sites and the last DAYS days,
    in a shuffled order (a late pageview lands between days already counted)."""
    rng = random.Random(seed)
    # In the past at any time of day: ingest takes a time ahead of its clock as now.
    now = datetime.now(UTC)
    sent = []
    for n in range(facts):
        visitor = n % VISITORS
        day = rng.randrange(DAYS)
        at = now - timedelta(days=day, minutes=1 + rng.randrange(600))
        sent.append((site_ids[visitor % len(site_ids)], {
            "visitorId": f"v{visitor}", "url": f"{SHOP}/p/{rng.randrange(40)}",
            "title": "Product", "ip": IPS[visitor // len(site_ids) % 2],
            "userAgent": PHONE if visitor % 3 == 0 else DESKTOP,
            "referrer": REFERRERS[rng.randrange(len(REFERRERS))],
            "sessionId": f"s{visitor}-{day}", "occurredAt": at.isoformat()}))
    rng.shuffle(sent)
    return sent


async def build_backlog(tenant: BenchTenant, facts: int, seed: int = 38) -> list[str]:
    """SITES sites (the tenant's and more of the same owner) and `facts` pageviews sent
    through ingest; the site ids."""
    store = tenant.deps.store
    owner = await accounts.find_user_by_email(store, "bench@example.com")
    user = await accounts.load_authenticated_user(store, owner["_id"], "")
    sites = {tenant.site["_id"]: tenant.site}
    for n in range(1, SITES):
        site, _ = await tenant.deps.keyring.create_site(
            user, tenant.site["organizationId"], f"Shop {n}", [SHOP], {})
        sites[site["_id"]] = site
    queue = _pageviews(sorted(sites), facts, seed)
    refused: list[str] = []

    async def sender() -> None:
        while queue:
            site_id, payload = queue.pop()
            outcome = await record_pageview(tenant.deps.intake, sites[site_id], payload)
            if not outcome.stored:
                refused.append(str(outcome.reason))

    await asyncio.gather(*(sender() for _ in range(SENDERS)))
    if refused:
        raise RuntimeError(f"ingest refused {len(refused)} pageviews: {sorted(set(refused))}")
    pending = await store.collection(derivation.COLLECTION).count_documents({})
    if pending != facts:
        raise RuntimeError(f"{pending} facts pending after sending {facts} pageviews")
    return sorted(sites)


async def _figures(store: Store, site_id: str) -> dict[str, dict[str, Any]]:
    """Every figure document of the site, without zero counts (a moved visitor leaves a 0)."""
    kept: dict[str, dict[str, Any]] = {}
    for collection in FIGURES:
        async for doc in store.collection(collection).find({"siteId": site_id}):
            visitors = {key: n for key, n in (doc.pop("visitors", None) or {}).items() if n}
            fields = {key: value for key, value in doc.items() if value != 0}
            if visitors:
                fields["visitors"] = visitors
            if set(fields) - KEY_FIELDS:
                kept[f"{collection}/{doc['_id']}"] = fields
    return kept


async def check(store: Store, site_ids: list[str], facts: int, folded: int) -> dict[str, Any]:
    """Whether every fact was counted once and the figures equal a rebuild's, site by site."""
    left = await store.collection(derivation.COLLECTION).count_documents({})
    counted = 0
    async for doc in store.collection(daily_figures.SITE_DAYS).find({}, {"pageviews": 1}):
        counted += int(doc.get("pageviews") or 0)
    documents = 0
    differing: dict[str, int] = {}
    for site_id in site_ids:
        folded_figures = await _figures(store, site_id)
        await derivation.rebuild_site(store, site_id)
        rebuilt = await _figures(store, site_id)
        documents += len(folded_figures)
        wrong = {key for key in folded_figures.keys() | rebuilt.keys()
                 if folded_figures.get(key) != rebuilt.get(key)}
        if wrong:
            differing[site_id] = len(wrong)
            print(f"FAILED: site {site_id}: {len(wrong)} figure documents differ from a "
                  f"rebuild, e.g. {sorted(wrong)[:3]}", flush=True)
    once = folded == facts and left == 0 and counted == facts
    if not once:
        print(f"FAILED: {facts} facts sent, {folded} folded, {left} left, {counted} pageviews "
              "counted", flush=True)
    return {"facts": facts, "folded": folded, "left": left, "pageviews_counted": counted,
            "counted_once": once, "figure_documents": documents,
            "equal_to_rebuild": not differing, "sites_differing": differing}


# Part 1: worker processes on SecantusDB --------------------------------------------------------


def _store_pid() -> int:
    """The SecantusDB server's process: the child of this one that runs secantusd."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and b"secantusd" in command:
            return int(entry.name)
    raise RuntimeError("the SecantusDB process was not found")


def _start_worker(uri: str, database: str, owner: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "bench.derivation.worker", uri, database, owner], cwd=ROOT,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def fold_with_workers(uri: str, database: str, count: int) -> list[dict[str, Any]]:
    """Start `count` workers on the database, let them go at once, and collect their reports."""
    workers = [_start_worker(uri, database, f"worker-{n + 1}") for n in range(count)]
    try:
        for worker in workers:
            assert worker.stdout is not None
            line = worker.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"a worker did not start: {line!r}")
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        reports = []
        for worker in workers:
            out, _ = worker.communicate(timeout=3600)
            if worker.returncode:
                raise RuntimeError(f"a worker exited with {worker.returncode}")
            reports.append(json.loads(out.strip().splitlines()[-1]))
        return reports
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()


async def _tenant_on(uri: str, database: str) -> BenchTenant:
    return await create_tenant({"MONGODB_URI": uri, "MONGODB_DATABASE": database})


async def wire(facts: int) -> dict[str, Any]:
    """One worker alone on one backlog, then two at once on an equal one."""
    figures: dict[str, Any] = {"facts": facts}
    with running_secantus() as uri:
        store_pid = _store_pid()
        tenants = {name: await _tenant_on(uri, f"bench_derivation_{name}")
                   for name in ("one_worker", "two_workers")}
        try:
            sites = {}
            for name, tenant in tenants.items():
                started = time.perf_counter()
                sites[name] = await build_backlog(tenant, facts)
                print(f"{name}: {facts} pageviews sent in "
                      f"{time.perf_counter() - started:.1f} s", flush=True)
            for name, count in (("one_worker", 1), ("two_workers", 2)):
                tenant = tenants[name]
                database = tenant.settings.mongodb_database
                store_cpu = cpu_seconds(store_pid)
                reports = await asyncio.to_thread(fold_with_workers, uri, database, count)
                store_cpu = cpu_seconds(store_pid) - store_cpu
                seconds = max(r["seconds"] for r in reports)
                folded = sum(r["folded"] for r in reports)
                figures[name] = {
                    "workers": reports, "seconds": seconds,
                    "store_cpu_seconds": round(store_cpu, 2),
                    "facts_per_second": round(folded / seconds, 1) if seconds else None,
                    "check": await check(tenant.deps.store, sites[name], facts, folded)}
                print(f"{name}: {json.dumps(figures[name])}", flush=True)
        finally:
            for tenant in tenants.values():
                await tenant.deps.close()
    one, two = figures["one_worker"]["facts_per_second"], figures["two_workers"]["facts_per_second"]
    figures["two_vs_one"] = round(two / one, 3) if one and two else None
    return figures


# Part 2: the embedded default, beside an event-loop ticker ------------------------------------


@dataclass
class Ticker:
    """Ticks every TICK_SECONDS on the running loop, noting the longest gaps between ticks:
    in wall time beyond the tick, and in CPU time of the loop's thread; and the longest
    garbage collection that ran on that thread (a full one walks every object of the process,
    the embedded store's documents included)."""

    ticks: int = 0
    longest_stall_ms: float = 0.0
    longest_cpu_ms: float = 0.0
    longest_gc_ms: float = 0.0
    running: bool = True
    ticked: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        loop_thread = threading.get_ident()
        collecting = 0.0

        def on_gc(phase: str, _info: dict[str, Any]) -> None:
            nonlocal collecting
            if threading.get_ident() != loop_thread:
                return
            if phase == "start":
                collecting = time.perf_counter()
            else:
                self.longest_gc_ms = max(self.longest_gc_ms,
                                         (time.perf_counter() - collecting) * 1000)

        gc.callbacks.append(on_gc)
        try:
            wall, cpu = time.perf_counter(), time.thread_time()
            while self.running:
                await asyncio.sleep(TICK_SECONDS)
                now, used = time.perf_counter(), time.thread_time()
                self.ticks += 1
                self.ticked.set()
                self.longest_stall_ms = max(self.longest_stall_ms,
                                            (now - wall - TICK_SECONDS) * 1000)
                self.longest_cpu_ms = max(self.longest_cpu_ms, (used - cpu) * 1000)
                wall, cpu = now, used
        finally:
            gc.callbacks.remove(on_gc)

    def figures(self) -> dict[str, Any]:
        return {"ticks": self.ticks, "longest_stall_ms": round(self.longest_stall_ms, 1),
                "longest_loop_cpu_ms": round(self.longest_cpu_ms, 1),
                "longest_loop_gc_ms": round(self.longest_gc_ms, 1)}


async def _ticking(work: Coroutine[Any, Any, T]) -> tuple[T, Ticker]:
    """Run `work` beside a ticker, started once the ticker has ticked; its result and the
    ticker."""
    ticker = Ticker()
    ticking = asyncio.create_task(ticker.run())
    try:
        await ticker.ticked.wait()
        result = await work
    finally:
        ticker.running = False
        await ticking
    return result, ticker


async def _fold_everything(store: Store) -> tuple[int, int]:
    """fold_all pass after pass until nothing is pending; facts folded and passes."""
    folded = passes = 0
    while True:
        done = await derivation.fold_all(store, "embedded")
        folded += done.folded
        passes += 1
        if await derivation.oldest_unfolded(store) is None:
            return folded, passes


async def embedded(facts: int) -> dict[str, Any]:
    """The embedded default: a fold of `facts` beside a 5 ms ticker, and the ticker alone."""
    tenant = await create_tenant()
    try:
        started = time.perf_counter()
        site_ids = await build_backlog(tenant, facts)
        sent_seconds = time.perf_counter() - started
        print(f"embedded: {facts} pageviews sent in {sent_seconds:.1f} s", flush=True)
        _, alone = await _ticking(asyncio.sleep(BASELINE_TICK_SECONDS))
        started = time.perf_counter()
        (folded, passes), beside = await _ticking(_fold_everything(tenant.deps.store))
        seconds = time.perf_counter() - started
        checked = await check(tenant.deps.store, site_ids, facts, folded)
    finally:
        await tenant.deps.close()
    return {"facts": facts, "send_seconds": round(sent_seconds, 1),
            "fold_seconds": round(seconds, 2), "passes": passes,
            "facts_per_second": round(folded / seconds, 1) if seconds else None,
            "ticker_during_fold": beside.figures(), "ticker_alone": alone.figures(),
            "check": checked}


# -------------------------------------------------------------------------------------------------


def _print(figures: dict[str, Any]) -> None:
    wire_figures = figures["secantus"]
    print(f"\nSecantusDB, a backlog of {wire_figures['facts']} facts on {SITES} sites:")
    print(f"{'run':<14}{'worker':<10}{'folded':>8}{'seconds':>9}{'facts/s':>9}{'CPU s':>8}"
          f"{'skipped':>9}")
    for name in ("one_worker", "two_workers"):
        for report in wire_figures[name]["workers"]:
            print(f"{name:<14}{report['owner']:<10}{report['folded']:>8}{report['seconds']:>9}"
                  f"{report['facts_per_second']:>9}{report['cpu_seconds']:>8}"
                  f"{report['skipped_sites']:>9}")
    one, two = wire_figures["one_worker"], wire_figures["two_workers"]
    print(f"total: one worker {one['facts_per_second']} facts/s, two workers "
          f"{two['facts_per_second']} facts/s: ratio {wire_figures['two_vs_one']}")
    print(f"SecantusDB's CPU during the fold: one worker {one['store_cpu_seconds']} s of "
          f"{one['seconds']} s, two workers {two['store_cpu_seconds']} s of {two['seconds']} s")
    for name in ("one_worker", "two_workers"):
        c = wire_figures[name]["check"]
        print(f"{name}: folded {c['folded']} of {c['facts']}, {c['left']} left, "
              f"{c['pageviews_counted']} pageviews counted: "
              f"{'counted once' if c['counted_once'] else 'FAILED'}; "
              f"{c['figure_documents']} figure documents "
              f"{'equal a rebuild' if c['equal_to_rebuild'] else 'FAILED: differ from a rebuild'}")
    e = figures["embedded"]
    size = ("" if e["facts"] == FACTS
            else f" (the issue's is {FACTS})")
    print(f"\nembedded default, a backlog of {e['facts']} facts{size}:")
    print(f"fold: {e['fold_seconds']} s, {e['facts_per_second']} facts/s, {e['passes']} passes")
    for name in ("ticker_alone", "ticker_during_fold"):
        t = e[name]
        print(f"{name.replace('_', ' ')}: longest stall {t['longest_stall_ms']} ms, longest "
              f"loop CPU between ticks {t['longest_loop_cpu_ms']} ms (longest garbage "
              f"collection on the loop {t['longest_loop_gc_ms']} ms), {t['ticks']} ticks")
    c = e["check"]
    print(f"embedded: {'counted once' if c['counted_once'] else 'FAILED: not counted once'}, "
          f"{c['figure_documents']} figure documents "
          f"{'equal a rebuild' if c['equal_to_rebuild'] else 'FAILED: differ from a rebuild'}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Measure, print a summary, return the figures."""
    parser = argparse.ArgumentParser(prog="python -m bench.derivation")
    parser.add_argument("--facts", type=int, default=FACTS,
                        help="the backlog on SecantusDB, per run (default %(default)s)")
    parser.add_argument("--embedded-facts", type=int, default=FACTS,
                        help="the backlog on the embedded store (default %(default)s)")
    args = parser.parse_args(argv or [])
    figures = {"secantus": asyncio.run(wire(args.facts)),
               "embedded": asyncio.run(embedded(args.embedded_facts))}
    _print(figures)
    return figures


if __name__ == "__main__":
    main(sys.argv[1:])
