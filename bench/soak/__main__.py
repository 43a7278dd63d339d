"""`python -m bench.soak`: minutes of mixed traffic against the service, and whether it holds.

The service runs as its own process on the embedded default (in-memory store, in-process queue
and bus), on loopback. For BENCH_SOAK_SECONDS (default 300) this process sends pageviews,
errors, recording segments and leads at fixed rates, keeps live WebSocket clients subscribed,
and now and then downloads a CSV export and a visitor export and erases a visitor. It reports:

* per kind, what was sent, what the service stored and what it dropped, by reason, from the
  service's own /metrics (answered to loopback callers), and whether those add up;
* p50 and p99 latency per endpoint, over the whole run and for the first and last tenth
  (the first tenth is the baseline measured in the same run);
* RSS at start and at end, and the part of the growth that stored data does not explain
  (the embedded store keeps everything in memory: stored bytes are estimated from the counts
  and an in-run calibration of how much memory the store takes per byte of payload);
* the error queue's depth over time (the `error_queue_depth` gauge).
"""

from __future__ import annotations

import asyncio
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import websocket_connect

from bench.loadgen import free_port, start_process, wait_for_port

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

    async def paced(self, rate: float, send: Any) -> None:
        """Call `send(n)` `rate` times a second until the deadline, on schedule."""
        started = time.monotonic()
        sent = 0
        in_flight: set[asyncio.Task[Any]] = set()
        while time.monotonic() < self.deadline:
            task = asyncio.ensure_future(send(self._next()))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
            sent += 1
            await asyncio.sleep(max(0.0, started + sent / rate - time.monotonic()))
        if in_flight:
            await asyncio.gather(*in_flight)

    def _ingest_headers(self, content_type: str = "application/json") -> dict[str, str]:
        return {"X-Service-Key": self.demo["apiKey"], "Content-Type": content_type}

    async def send_pageview(self, n: int) -> None:
        """POST /ingest/pageviews."""
        await self.call("POST /ingest/pageviews", "pageview", "/ingest/pageviews",
                        method="POST", body=json.dumps(_pageview(n)).encode(),
                        headers=self._ingest_headers())

    async def send_error(self, n: int) -> None:
        """POST /ingest/errors."""
        await self.call("POST /ingest/errors", "error", "/ingest/errors", method="POST",
                        body=json.dumps(_error(n)).encode(), headers=self._ingest_headers())

    async def send_lead(self, n: int) -> None:
        """POST /ingest/leads."""
        await self.call("POST /ingest/leads", "lead", "/ingest/leads", method="POST",
                        body=json.dumps(_lead(n)).encode(), headers=self._ingest_headers())

    async def send_segment(self, n: int) -> None:
        """POST /ingest/recordings/segment: one segment per recording, a fresh recording each."""
        headers = {**self._ingest_headers("application/octet-stream"),
                   "X-Recording-Id": str(uuid.uuid4()), "X-Segment-Seq": "0",
                   "X-Visitor-Id": f"soak-{n % VISITORS}", "X-Page-Url": "https://shop.example/"}
        await self.call("POST /ingest/recordings/segment", "segment",
                        "/ingest/recordings/segment", method="POST", body=_segment(n),
                        headers=headers)

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
        """Parse /metrics into {'name{labels}': value}."""
        response = await self.client.fetch(self.base_url + "/metrics", raise_error=False)
        values: dict[str, float] = {}
        for line in response.body.decode().splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                values[key] = float(value)
        return values

    async def sampler(self, pid: int) -> None:
        """RSS and queue depth every few seconds."""
        while time.monotonic() < self.deadline:
            metrics = await self.scrape()
            self.samples.append({"t": round(time.monotonic() - self.tally.started, 1),
                                 "rss_mb": rss_mb(pid),
                                 "queue_depth": metrics.get("error_queue_depth", 0.0)})
            await asyncio.sleep(SCRAPE_EVERY_SECONDS)


def rss_mb(pid: int) -> float:
    """The process's current resident set size in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024.0, 1)
    return 0.0


def store_bytes_per_payload_byte() -> float:
    """Calibration: memory the embedded store takes per byte of JSON payload kept.

    Inserts documents shaped like what ingest keeps into mongomock under tracemalloc, in this
    process; the service runs the same Python and the same store.
    """
    import mongomock

    collection = mongomock.MongoClient().db.calibration
    documents = [{**_pageview(n), "_id": str(uuid.uuid4()), "siteId": str(uuid.uuid4())}
                 for n in range(3000)]
    payload = sum(len(json.dumps(d)) for d in documents)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    collection.insert_many(documents)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return round(grown / payload, 2)


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


def _accounting(tally: Tally, metrics: dict[str, float]) -> dict[str, dict[str, Any]]:
    """Sent, stored and dropped per kind, and whether they add up."""
    table: dict[str, dict[str, Any]] = {}
    for kind, metric_kind in METRIC_KIND.items():
        ok = tally.answers[kind][200]
        refused = {str(status): n for status, n in tally.answers[kind].items() if status != 200}
        outcomes: Counter[str] = Counter()
        for key, value in metrics.items():
            if not key.startswith("ingest_items_total{"):
                continue
            labels = dict(_LABEL.findall(key))
            if labels.get("kind") != metric_kind:
                continue
            reason = labels.get("reason", "")
            outcomes[f"{labels['outcome']}:{reason}" if reason else labels["outcome"]] += int(value)
        if kind == "error":
            # Errors are acknowledged once queued; the worker stores them.
            stored = int(metrics.get('error_jobs_total{outcome="processed"}', 0))
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


async def measure() -> dict[str, Any]:
    """Start the service, run the soak, collect the figures."""
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    demo_file = workdir / "demo.json"
    service = start_process(["server.py", "serve"], {
        "PORT": str(port), "DEMO_FILE": str(demo_file), "LOG_LEVEL": "ERROR",
        "SITE_RATE_PER_SECOND": "1000000", "SITE_RATE_BURST": "1000000",
        "MONGODB_URI": "", "REDIS_URL": "", "PUBLIC_URL": f"http://127.0.0.1:{port}"})
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
            soak.paced(RATES["pageview"], soak.send_pageview),
            soak.paced(RATES["error"], soak.send_error),
            soak.paced(RATES["segment"], soak.send_segment),
            soak.paced(RATES["lead"], soak.send_lead),
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
        metrics = {key: value - metrics_start.get(key, 0.0)
                   for key, value in (await soak.scrape()).items()}
        metrics["error_queue_depth"] = metrics_start.get("error_queue_depth", 0.0) + metrics.get(
            "error_queue_depth", 0.0)
        rss_end = rss_mb(service.pid)
    finally:
        service.terminate()
        service.wait(timeout=30)
    factor = store_bytes_per_payload_byte()
    # Segments are kept as bytes in GridFS chunks (about their own size); the rest as documents.
    stored_mb = (sum(v for k, v in soak.tally.accepted_bytes.items() if k != "segment") * factor
                 + soak.tally.accepted_bytes["segment"]) / 1e6
    growth = rss_end - rss_start
    depths = [s["queue_depth"] for s in soak.samples]
    return {
        "seconds": SECONDS, "rates_per_second": RATES,
        "accounting": _accounting(soak.tally, metrics),
        "latency": _latency_rows(soak.tally, SECONDS),
        "live": {"clients": LIVE_CLIENTS, "events_received": soak.tally.live_events,
                 "clients_dropped": soak.tally.live_dropped},
        "rss": {"start_mb": rss_start, "end_mb": rss_end, "growth_mb": round(growth, 1),
                "stored_data_estimate_mb": round(stored_mb, 1),
                "store_bytes_per_payload_byte": factor,
                "unexplained_growth_mb": round(growth - stored_mb, 1)},
        "queue_depth": {"max": max(depths, default=0.0),
                        "mean": round(statistics.fmean(depths), 2) if depths else 0.0,
                        "series": [(s["t"], s["queue_depth"]) for s in soak.samples]},
        "rss_series": [(s["t"], s["rss_mb"]) for s in soak.samples],
    }


def main() -> dict[str, Any]:
    """Run the soak, print the tables, return the figures."""
    figures = asyncio.run(measure())
    print(f"soak: {figures['seconds']:.0f} s of mixed traffic on loopback, embedded default")
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
    depth = figures["queue_depth"]
    print(f"error queue depth: max {depth['max']}, mean {depth['mean']}; over time "
          + " ".join(f"{t:.0f}s:{d:.0f}" for t, d in depth["series"]))
    live = figures["live"]
    print(f"live: {live['clients']} clients received {live['events_received']} events, "
          f"{live['clients_dropped']} dropped")
    return figures


if __name__ == "__main__":
    main()
