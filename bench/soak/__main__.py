"""`python -m bench.soak`: minutes of mixed traffic against the service, and whether it holds.

The service runs as its own process on the embedded default (in-memory store, in-process queue
and bus), on loopback. For BENCH_SOAK_SECONDS (default 300) this process sends pageviews,
errors, recording segments and leads at fixed rates, keeps live WebSocket clients subscribed,
and now and then downloads a CSV export and a visitor export and erases a visitor. It reports:

* per kind, what was sent, what the service stored and what it dropped, by reason, from the
  service's own /metrics (answered to loopback callers), and whether those add up;
* p50 and p99 latency per endpoint, over the whole run and for the first and last tenth
  (the first tenth is the baseline measured in the same run);
* RSS at start and at end, and the part of the growth that stored data does not explain, over
  the whole run and over each half. The embedded store keeps everything in memory, so stored
  data is the items stored of each kind times the bytes one such item takes, calibrated after
  the run by replaying the run's own items through the service's real code in this process
  (`calibrate`). The second half is the figure to read for a leak: early on the allocator
  first fills the free space start-up left behind (RSS grows less than the data) and grows its
  pools, which settles; a leak keeps growing;
* the error queue's depth over time (the `error_queue_depth` gauge).
"""

from __future__ import annotations

import asyncio
import gc
import gzip
import json
import os
import random
import re
import statistics
import tempfile
import time
import tracemalloc
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tornado.netutil
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import websocket_connect

import server
from bench.loadgen import free_port, run_load, start_process, wait_for_port
from config import load_settings
from demo import seed_demo
from derived import store_setup
from documents.store import Store

SECONDS = float(os.environ.get("BENCH_SOAK_SECONDS", "300"))
#: Requests per second per kind: a busy shop, well inside one process's capacity, so that
#: latency and memory show drift rather than saturation.
RATES = {"pageview": 40.0, "error": 15.0, "segment": 4.0, "lead": 2.0}
LIVE_CLIENTS = 5
EXPORT_EVERY_SECONDS = 20.0
ERASE_EVERY_SECONDS = 30.0
SCRAPE_EVERY_SECONDS = 5.0
VISITORS = 500
ORIGIN = "https://shop.example"
UA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"

#: The calibration replays at most this many of the run's items of each kind. Replaying the run's
#: own count is what makes the figure honest: a visitor's profile, its first pageview bucket, a
#: session link or an error aggregate is made once and then only grows, and the profile's recent
#: activity list stops growing at its bound, so bytes per item depend on how many came before.
#: Past the cap, the replayed items' average stands for the rest (a little high).
CALIBRATION_MAX_ITEMS = int(os.environ.get("BENCH_SOAK_CALIBRATION_ITEMS", "20000"))
#: Items of each kind sent to a throwaway site before measuring: first calls compile schemas, fill
#: caches and grow the allocator's pools, none of which is stored data (the service did the same
#: while seeding its demo data, before its start figure was taken).
CALIBRATION_WARMUP_ITEMS = 100
MB = 1024 * 1024  # RSS is read in KiB from /proc, so stored bytes are counted in the same MiB

_LABEL = re.compile(r'(\w+)="([^"]*)"')

#: /metrics kind for each kind this generator sends.
METRIC_KIND = {"pageview": "pageview", "error": "error", "segment": "recording_segment",
               "lead": "lead"}


@dataclass
class Tally:
    """What the generator saw: answers by kind and status, latencies by endpoint."""

    started: float = field(default_factory=time.monotonic)
    sent: Counter[str] = field(default_factory=Counter)
    answers: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    accepted_bytes: Counter[str] = field(default_factory=Counter)
    #: Which numbered items of each kind were answered 200, in order: what `calibrate` replays.
    accepted_serials: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    latencies: dict[str, list[tuple[float, float]]] = field(
        default_factory=lambda: defaultdict(list))
    live_events: int = 0
    live_dropped: int = 0

    def record(self, endpoint: str, kind: str | None, status: int, seconds: float,
               body_bytes: int = 0) -> None:
        """Count one answer."""
        self.latencies[endpoint].append((time.monotonic() - self.started, seconds * 1000.0))
        if kind is not None:
            self.sent[kind] += 1
            self.answers[kind][status] += 1
            if status == 200:
                self.accepted_bytes[kind] += body_bytes


def _pageview(n: int) -> dict[str, Any]:
    return {"visitorId": f"soak-{n % VISITORS}", "url": f"https://shop.example/p/{n % 80}",
            "title": "Product", "ip": f"198.51.100.{n % 250}", "userAgent": UA,
            # One in twenty carries Global Privacy Control: acknowledged, dropped, counted.
            "gpc": n % 20 == 0}


def _error(n: int) -> dict[str, Any]:
    return {"visitorId": f"soak-{n % VISITORS}", "sessionId": f"s{n % 300}",
            "source": "javascript", "type": random.choice(["TypeError", "RangeError"]),
            "message": f"x is undefined at item {n}", "url": "https://shop.example/cart",
            "ip": "198.51.100.7", "userAgent": UA,
            "stack": f"TypeError: x\n    at f{n % 40} (https://shop.example/app.js:{n}:5)"}


def _lead(n: int) -> dict[str, Any]:
    return {"visitorId": f"soak-{n % VISITORS}", "email": f"lead{n}@example.com",
            "name": f"Lead {n}", "fields": {"company": "ACME", "note": "x" * 100}}


def _segment(n: int) -> bytes:
    events = [{"type": 4, "data": {"href": "https://shop.example/", "width": 1280,
                                   "height": 800}, "timestamp": n},
              {"type": 3, "data": {"source": 1, "positions": [{"x": n % 800, "y": 10}] * 20},
               "timestamp": n + 1}]
    return gzip.compress(json.dumps(events).encode())


@dataclass(frozen=True)
class ItemRequest:
    """One ingest request: its path, its body and its headers other than the API key."""

    path: str
    body: bytes
    headers: dict[str, str]


def _json_item(path: str, payload: dict[str, Any]) -> ItemRequest:
    return ItemRequest(path, json.dumps(payload).encode(), {"Content-Type": "application/json"})


def _segment_item(n: int) -> ItemRequest:
    """One segment per recording, a fresh recording each."""
    return ItemRequest("/ingest/recordings/segment", _segment(n), {
        "Content-Type": "application/octet-stream", "X-Recording-Id": str(uuid.uuid4()),
        "X-Segment-Seq": "0", "X-Visitor-Id": f"soak-{n % VISITORS}",
        "X-Page-Url": "https://shop.example/"})


#: The request for item number n of each kind the soak sends (the soak and the calibration).
ITEM_REQUESTS: dict[str, Callable[[int], ItemRequest]] = {
    "pageview": lambda n: _json_item("/ingest/pageviews", _pageview(n)),
    "error": lambda n: _json_item("/ingest/errors", _error(n)),
    "segment": _segment_item,
    "lead": lambda n: _json_item("/ingest/leads", _lead(n)),
}


def service_env(port: int) -> dict[str, str]:
    """The service's settings: the embedded default, with the per-site rate limit out of reach."""
    return {"PORT": str(port), "LOG_LEVEL": "ERROR", "SITE_RATE_PER_SECOND": "1000000",
            "SITE_RATE_BURST": "1000000", "MONGODB_URI": "", "REDIS_URL": "",
            "PUBLIC_URL": f"http://127.0.0.1:{port}"}


class Soak:
    """One soak run against a started service."""

    def __init__(self, base_url: str, demo: dict[str, Any], deadline: float) -> None:
        self.base_url = base_url
        self.demo = demo
        self.deadline = deadline
        self.client = AsyncHTTPClient(max_clients=64)
        self.tally = Tally()
        self.token = ""
        self.samples: list[dict[str, float]] = []
        self._serial = 0

    def _next(self) -> int:
        self._serial += 1
        return self._serial

    async def call(self, endpoint: str, kind: str | None, path: str, *, method: str = "GET",
                   body: bytes | None = None, headers: dict[str, str] | None = None) -> int:
        """One request; its status and latency go to the tally."""
        started = time.perf_counter()
        response = await self.client.fetch(HTTPRequest(
            self.base_url + path, method=method, body=body, headers=headers or {},
            request_timeout=60, allow_nonstandard_methods=True), raise_error=False)
        self.tally.record(endpoint, kind, response.code, time.perf_counter() - started,
                          len(body or b""))
        return response.code

    async def login(self) -> None:
        """The demo owner's access token, for exports, erasures and live sockets."""
        response = await self.client.fetch(HTTPRequest(
            self.base_url + "/auth/login", method="POST", headers={
                "Content-Type": "application/json"},
            body=json.dumps({"email": self.demo["email"], "password": self.demo["password"]})))
        self.token = json.loads(response.body)["accessToken"]

    async def paced(self, kind: str) -> None:
        """Send items of `kind` at its rate until the deadline, on schedule."""
        rate = RATES[kind]
        started = time.monotonic()
        sent = 0
        in_flight: set[asyncio.Task[Any]] = set()
        while time.monotonic() < self.deadline:
            task = asyncio.ensure_future(self.send(kind, self._next()))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
            sent += 1
            await asyncio.sleep(max(0.0, started + sent / rate - time.monotonic()))
        if in_flight:
            await asyncio.gather(*in_flight)

    async def send(self, kind: str, n: int) -> None:
        """POST item number `n` of `kind` to its /ingest endpoint."""
        item = ITEM_REQUESTS[kind](n)
        status = await self.call(f"POST {item.path}", kind, item.path, method="POST",
                                 body=item.body,
                                 headers={"X-Service-Key": self.demo["apiKey"], **item.headers})
        if status == 200:
            self.tally.accepted_serials[kind].append(n)

    async def exports(self) -> None:
        """A leads CSV and a visitor export now and then."""
        site = self.demo["siteId"]
        auth = {"Authorization": f"Bearer {self.token}"}
        while time.monotonic() + EXPORT_EVERY_SECONDS < self.deadline:
            await asyncio.sleep(EXPORT_EVERY_SECONDS)
            await self.call("GET leads.csv", None, f"/api/v1/sites/{site}/leads.csv",
                            headers=auth)
            visitor = f"soak-{random.randrange(VISITORS)}"
            await self.call("GET export.json", None,
                            f"/api/v1/sites/{site}/visitors/{visitor}/export.json", headers=auth)

    async def erasures(self) -> None:
        """Erase a visitor now and then (one that has pageviews, errors and leads)."""
        site = self.demo["siteId"]
        auth = {"Authorization": f"Bearer {self.token}"}
        while time.monotonic() + ERASE_EVERY_SECONDS < self.deadline:
            await asyncio.sleep(ERASE_EVERY_SECONDS)
            visitor = f"soak-{random.randrange(VISITORS)}"
            await self.call("DELETE visitor data", None,
                            f"/api/v1/sites/{site}/visitors/{visitor}/data", method="DELETE",
                            headers=auth)

    async def live_client(self) -> None:
        """A dashboard socket that reads every event until the deadline."""
        ws_url = self.base_url.replace("http://", "ws://") + "/dashboard/live"
        connection = await websocket_connect(HTTPRequest(
            ws_url, headers={"Origin": self.demo.get("publicUrl", self.base_url)}))
        await connection.write_message(json.dumps({"type": "auth", "token": self.token}))
        await connection.write_message(json.dumps({"type": "subscribe",
                                                   "siteIds": [self.demo["siteId"]]}))
        try:
            while time.monotonic() < self.deadline:
                try:
                    message = await asyncio.wait_for(connection.read_message(), timeout=1.0)
                except TimeoutError:
                    continue
                if message is None:
                    self.tally.live_dropped += 1
                    return
                if json.loads(message).get("type") in ("new_error", "new_lead"):
                    self.tally.live_events += 1
        finally:
            connection.close()

    async def scrape(self) -> dict[str, float]:
        """The service's /metrics."""
        response = await self.client.fetch(self.base_url + "/metrics", raise_error=False)
        return parse_metrics(response.body.decode())

    async def sampler(self, pid: int) -> None:
        """RSS, queue depth and items stored so far (of each kind) every few seconds."""
        while time.monotonic() < self.deadline:
            metrics = await self.scrape()
            self.samples.append({"t": round(time.monotonic() - self.tally.started, 1),
                                 "rss_mb": rss_mb(pid),
                                 "queue_depth": metrics.get("error_queue_depth", 0.0),
                                 "stored": stored_counts(metrics)})
            await asyncio.sleep(SCRAPE_EVERY_SECONDS)


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text as {'name{labels}': value}."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            values[key] = float(value)
    return values


def rss_mb(pid: int) -> float:
    """The process's current resident set size in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024.0, 1)
    return 0.0


async def _drop_every_collection(store: Store) -> None:
    for name in await store.collection_names():
        await store.database.drop_collection(name)


def _traced_bytes() -> int:
    """Bytes the traced heap holds once unreachable cycles are gone."""
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def _raw_request(item: ItemRequest, api_key: str) -> bytes:
    """`item` as one HTTP/1.1 request for a keep-alive connection."""
    headers = {"Host": "127.0.0.1", "Content-Length": str(len(item.body)),
               "X-Service-Key": api_key, **item.headers}
    head = f"POST {item.path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return (head + "\r\n").encode() + item.body


async def calibrate(serials: dict[str, list[int]]) -> dict[str, Any]:
    """Bytes the embedded store holds per stored item of each kind, from the service's own code.

    Builds the service in this process the way the tests do (`server.build_deps` and `make_app`
    with the soak's settings, on a fresh embedded store, served on loopback) and replays the
    run's accepted items (`serials`, capped at CALIBRATION_MAX_ITEMS) kind after kind through
    the same endpoints, under tracemalloc, after a warm-up on a throwaway site that is then
    dropped. Errors count once the in-process worker has processed them and segments once the
    sweeper has checked them, as in the service. An item's bytes are all it left behind: its own
    document and what it added to others (the profile's recent activity and counters, the
    aggregate's `recentJobIds`, session links, GridFS chunks and metadata).

    Dropping every collection at the end shows how much of that growth the store itself held;
    what survives the drop is not stored data (a leak in ingest code would show there).
    """
    started = time.monotonic()
    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
    port = sockets[0].getsockname()[1]
    settings = load_settings({**os.environ, **service_env(port)})
    deps = await server.build_deps(settings)
    http = server.make_http_server(settings, server.make_app(settings, deps))
    http.add_sockets(sockets)

    async def sweep_segments() -> None:
        while await deps.segment_sweeper.sweep():
            pass

    # What must happen before an item of the kind is stored, as the service would do it.
    settle: dict[str, Callable[[], Awaitable[Any]]] = {
        "error": deps.queue.join,  # type: ignore[attr-defined]  # the in-process queue
        "segment": sweep_segments,
    }

    async def send_all(api_key: str, kind: str, numbers: list[int]) -> None:
        # One keep-alive connection, one request at a time: the client side of HTTP costs
        # little, and tracemalloc makes every allocation several times dearer.
        await run_load(port, lambda i: _raw_request(ITEM_REQUESTS[kind](numbers[i - 1]), api_key),
                       seconds=3600.0, connections=1, max_requests=len(numbers))
        if kind in settle:
            await settle[kind]()

    def stored_so_far(kind: str) -> int:
        return stored_counts(parse_metrics(deps.metrics.render()))[kind]

    async def new_site() -> str:
        demo = await seed_demo(deps.store, deps.keyring, deps.auth.passwords, email="",
                               password="", public_url=settings.public_url)
        return demo.apiKey

    bytes_per_item: dict[str, int] = {}
    replayed: dict[str, int] = {}
    stored: dict[str, int] = {}
    try:
        warm_key = await new_site()
        for kind in ITEM_REQUESTS:
            await send_all(warm_key, kind, list(range(1, CALIBRATION_WARMUP_ITEMS + 1)))
        await _drop_every_collection(deps.store)
        await deps.store.ensure_indexes(store_setup.declared_indexes())
        api_key = await new_site()
        # Only from here on: what the warm-up allocated is not the run's data.
        tracemalloc.start()
        base = _traced_bytes()
        # Pageviews first: in the run they are most of the traffic and make the profiles that
        # the other kinds then update, so the profiles' cost lands on them here too.
        for kind in ITEM_REQUESTS:
            numbers = serials.get(kind, [])[:CALIBRATION_MAX_ITEMS]
            stored_before = stored_so_far(kind)
            before = _traced_bytes()
            await send_all(api_key, kind, numbers)
            grown = _traced_bytes() - before
            replayed[kind] = len(numbers)
            stored[kind] = stored_so_far(kind) - stored_before
            bytes_per_item[kind] = round(grown / stored[kind]) if stored[kind] else 0
        top = _traced_bytes()
        await _drop_every_collection(deps.store)
        held = (top - _traced_bytes()) / (top - base) if top > base else 1.0
    finally:
        tracemalloc.stop()
        http.stop()
        await http.close_all_connections()
        await deps.close()
    return {"bytes_per_stored_item": bytes_per_item, "items_replayed": replayed,
            "items_stored": stored, "held_by_store_fraction": round(held, 3),
            "seconds": round(time.monotonic() - started, 1)}


def _percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(p / 100.0 * len(ordered)))], 2)


def _latency_rows(tally: Tally, seconds: float) -> dict[str, dict[str, float]]:
    rows = {}
    tenth = seconds / 10.0
    for endpoint, points in sorted(tally.latencies.items()):
        all_ms = [ms for _, ms in points]
        first = [ms for at, ms in points if at <= tenth] or all_ms
        last = [ms for at, ms in points if at >= seconds - tenth] or all_ms
        rows[endpoint] = {"count": len(all_ms), "p50_ms": _percentile(all_ms, 50),
                          "p99_ms": _percentile(all_ms, 99),
                          "first_tenth_p99_ms": _percentile(first, 99),
                          "last_tenth_p99_ms": _percentile(last, 99)}
    return rows


def _outcomes(metrics: dict[str, float], kind: str) -> Counter[str]:
    """`ingest_items_total` of one kind by outcome ("stored", "queued", "dropped:<reason>")."""
    outcomes: Counter[str] = Counter()
    for key, value in metrics.items():
        if not key.startswith("ingest_items_total{"):
            continue
        labels = dict(_LABEL.findall(key))
        if labels.get("kind") != METRIC_KIND[kind]:
            continue
        reason = labels.get("reason", "")
        outcomes[f"{labels['outcome']}:{reason}" if reason else labels["outcome"]] += int(value)
    return outcomes


def _processed_errors(metrics: dict[str, float]) -> int:
    # Errors are acknowledged once queued; the worker stores them.
    return int(metrics.get('error_jobs_total{outcome="processed"}', 0))


def stored_counts(metrics: dict[str, float]) -> dict[str, int]:
    """Items of each kind the service has stored, from its /metrics."""
    return {kind: _processed_errors(metrics) if kind == "error" else _outcomes(metrics, kind)[
        "stored"] for kind in METRIC_KIND}


def _accounting(tally: Tally, metrics: dict[str, float]) -> dict[str, dict[str, Any]]:
    """Sent, stored and dropped per kind, and whether they add up."""
    table: dict[str, dict[str, Any]] = {}
    for kind in METRIC_KIND:
        ok = tally.answers[kind][200]
        refused = {str(status): n for status, n in tally.answers[kind].items() if status != 200}
        outcomes = _outcomes(metrics, kind)
        if kind == "error":
            stored = _processed_errors(metrics)
            failed = int(metrics.get('error_jobs_total{outcome="failed"}', 0))
            waiting = int(metrics.get("error_queue_depth", 0))
            queued = outcomes.pop("queued", 0)
            dropped = {k: v for k, v in outcomes.items()}
            adds_up = (ok == queued + sum(dropped.values())
                       and queued == stored + failed + waiting)
            dropped["failed_jobs"] = failed
            dropped["still_queued"] = waiting
        else:
            stored = outcomes.pop("stored", 0)
            dropped = {k: v for k, v in outcomes.items()}
            adds_up = ok == stored + sum(dropped.values())
        dropped.update({f"http_{status}": n for status, n in refused.items()})
        adds_up = adds_up and tally.sent[kind] == ok + sum(int(n) for n in refused.values())
        table[kind] = {"sent": tally.sent[kind], "answered_ok": ok, "stored": stored,
                       "dropped": dropped, "adds_up": adds_up}
    return table


def _memory_figures(start: dict[str, Any], samples: list[dict[str, Any]], end: dict[str, Any],
                    tally: Tally, calibration: dict[str, Any]) -> dict[str, Any]:
    """RSS growth against the stored data that explains it: whole run, first and second half.

    `start`, `samples` and `end` are {t, rss_mb, stored: items stored so far by kind}; stored
    data is those counts times the calibrated bytes per stored item of each kind. Erasures during
    the run remove a little of it (one visitor in VISITORS each), which is not subtracted.
    """
    per_item = calibration["bytes_per_stored_item"]

    def stored_mb(since: dict[str, Any], until: dict[str, Any]) -> float:
        return sum((until["stored"][kind] - since["stored"][kind]) * per_item[kind]
                   for kind in per_item) / MB

    def span(since: dict[str, Any], until: dict[str, Any]) -> dict[str, float]:
        growth = until["rss_mb"] - since["rss_mb"]
        stored = stored_mb(since, until)
        return {"from_s": since["t"], "to_s": until["t"], "growth_mb": round(growth, 1),
                "stored_data_mb": round(stored, 1), "unexplained_mb": round(growth - stored, 1)}

    # The allocator's start-up effects settle in the first half; a leak grows in both.
    middle = min([start, *samples], key=lambda sample: abs(sample["t"] - SECONDS / 2))
    whole = span(start, end)
    by_kind = {kind: (end["stored"][kind] - start["stored"][kind]) * per_item[kind] / MB
               for kind in per_item}
    json_kinds = [kind for kind in per_item if kind != "segment"]
    json_bytes = sum(tally.accepted_bytes[kind] for kind in json_kinds)
    return {"start_mb": start["rss_mb"], "end_mb": end["rss_mb"], "growth_mb": whole["growth_mb"],
            "stored_data_estimate_mb": whole["stored_data_mb"],
            # The fixed factor this figure once rested on, now implied by the calibration.
            "store_bytes_per_payload_byte": round(
                sum(by_kind[kind] for kind in json_kinds) * MB / json_bytes, 2)
            if json_bytes else 0.0,
            "unexplained_growth_mb": whole["unexplained_mb"],
            "stored_data_by_kind_mb": {kind: round(mb, 2) for kind, mb in by_kind.items()},
            "first_half": span(start, middle), "second_half": span(middle, end),
            "calibration": calibration}


async def measure() -> dict[str, Any]:
    """Start the service, run the soak, collect the figures."""
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    demo_file = workdir / "demo.json"
    service = start_process(["server.py", "serve"],
                            {**service_env(port), "DEMO_FILE": str(demo_file)})
    try:
        await wait_for_port(port)
        for _ in range(100):
            if demo_file.exists():
                break
            await asyncio.sleep(0.1)
        demo = {**json.loads(demo_file.read_text()), "publicUrl": f"http://127.0.0.1:{port}"}
        soak = Soak(f"http://127.0.0.1:{port}", demo, time.monotonic() + SECONDS)
        await soak.login()
        rss_start = rss_mb(service.pid)
        # The demo data seeded at start went through ingest too; count only this run's.
        metrics_start = await soak.scrape()
        soak.tally = Tally()
        await asyncio.gather(
            *(soak.paced(kind) for kind in RATES),
            soak.exports(), soak.erasures(), soak.sampler(service.pid),
            *(soak.live_client() for _ in range(LIVE_CLIENTS)),
        )
        # Let the worker drain what is queued before the books are closed.
        for _ in range(300):
            metrics = await soak.scrape()
            if metrics.get("error_queue_depth", 0) == 0:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)
        final = await soak.scrape()
        metrics = {key: value - metrics_start.get(key, 0.0) for key, value in final.items()}
        metrics["error_queue_depth"] = metrics_start.get("error_queue_depth", 0.0) + metrics.get(
            "error_queue_depth", 0.0)
        rss_end = rss_mb(service.pid)
        load_average = [round(load, 2) for load in os.getloadavg()]
    finally:
        service.terminate()
        service.wait(timeout=30)
    accounting = _accounting(soak.tally, metrics)
    start = {"t": 0.0, "rss_mb": rss_start, "stored": stored_counts(metrics_start)}
    end = {"t": SECONDS, "rss_mb": rss_end, "stored": stored_counts(final)}
    rss = _memory_figures(start, soak.samples, end, soak.tally,
                          await calibrate(soak.tally.accepted_serials))
    depths = [s["queue_depth"] for s in soak.samples]
    return {
        "seconds": SECONDS, "rates_per_second": RATES, "load_average": load_average,
        "accounting": accounting,
        "latency": _latency_rows(soak.tally, SECONDS),
        "live": {"clients": LIVE_CLIENTS, "events_received": soak.tally.live_events,
                 "clients_dropped": soak.tally.live_dropped},
        "rss": rss,
        "queue_depth": {"max": max(depths, default=0.0),
                        "mean": round(statistics.fmean(depths), 2) if depths else 0.0,
                        "series": [(s["t"], s["queue_depth"]) for s in soak.samples]},
        "rss_series": [(s["t"], s["rss_mb"]) for s in soak.samples],
    }


def main() -> dict[str, Any]:
    """Run the soak, print the tables, return the figures."""
    figures = asyncio.run(measure())
    print(f"soak: {figures['seconds']:.0f} s of mixed traffic on loopback, embedded default; "
          f"load average at the end {' '.join(map(str, figures['load_average']))}")
    print(f"\n{'kind':<10}{'sent':>8}{'ok':>8}{'stored':>8}  {'adds up':<8} dropped by reason")
    for kind, row in figures["accounting"].items():
        print(f"{kind:<10}{row['sent']:>8}{row['answered_ok']:>8}{row['stored']:>8}  "
              f"{str(row['adds_up']):<8} {row['dropped'] or '-'}")
    print(f"\n{'endpoint':<34}{'count':>7}{'p50 ms':>9}{'p99 ms':>9}{'p99 first':>11}"
          f"{'p99 last':>10}")
    for endpoint, row in figures["latency"].items():
        print(f"{endpoint:<34}{row['count']:>7}{row['p50_ms']:>9}{row['p99_ms']:>9}"
              f"{row['first_tenth_p99_ms']:>11}{row['last_tenth_p99_ms']:>10}")
    rss = figures["rss"]
    print(f"\nRSS {rss['start_mb']} MB -> {rss['end_mb']} MB (+{rss['growth_mb']}); stored data "
          f"~{rss['stored_data_estimate_mb']} MB; unexplained {rss['unexplained_growth_mb']} MB")
    for name in ("first_half", "second_half"):
        half = rss[name]
        print(f"  {name.replace('_', ' ')} ({half['from_s']:.0f}-{half['to_s']:.0f} s): RSS "
              f"{half['growth_mb']:+} MB; stored data ~{half['stored_data_mb']} MB; unexplained "
              f"{half['unexplained_mb']} MB")
    calibration = rss["calibration"]
    print("  stored data by kind: " + ", ".join(
        f"{kind} {mb} MB ({calibration['bytes_per_stored_item'][kind]} B/item)"
        for kind, mb in rss["stored_data_by_kind_mb"].items()))
    print(f"  calibration: {sum(calibration['items_replayed'].values())} items replayed in "
          f"{calibration['seconds']} s; the store held "
          f"{calibration['held_by_store_fraction']:.0%} of the traced growth")
    depth = figures["queue_depth"]
    print(f"error queue depth: max {depth['max']}, mean {depth['mean']}; over time "
          + " ".join(f"{t:.0f}s:{d:.0f}" for t, d in depth["series"]))
    live = figures["live"]
    print(f"live: {live['clients']} clients received {live['events_received']} events, "
          f"{live['clients_dropped']} dropped")
    return figures


if __name__ == "__main__":
    main()
