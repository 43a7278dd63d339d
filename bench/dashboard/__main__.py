"""`python -m bench.dashboard [--quick | --scale F] [--samples N]`: the dashboard API's latency.

A site of 20,000 visitors, 200,000 pageviews, 5,000 error records (occurrences of 100 errors),
2,000 recordings with 20,000 clicks (rage and dead clicks among them), 1,000 leads and the
commerce events of 4,000 carts, 2,000 checkouts and 1,000 paid orders, spread over 60 days, is
written straight into the collections in the shapes ingest writes (bulk
inserts through the store, not HTTP, so setup takes seconds), then each dashboard API call the
pages make is timed through HTTP: p50 and p95 of `--samples` calls. The same is done on a site
with twice the data, and each figure is reported with its growth (p50 at 2x / p50 at 1x): about
1 for a call that reads a page through an index, about 2 for one that reads the whole range.

The store is the one MONGODB_URI names, the embedded one when it is unset; the embedded store's
own speed is not a target (issue 21), so compare growth there rather than milliseconds.
`--quick` (scale 0.02, 3 samples) is a smoke run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from bench.tenant import create_tenant
from derived import daily_figures
from documents import activity, commerce, error_records, interactions, segments, visitors
from documents.recordings import backfill_facts
from documents.store import Store
from ingest.commerce import commerce_event

#: The issue's site at scale 1.
BASE = {"visitors": 20_000, "pageviews": 200_000, "occurrences": 5_000, "errors": 100,
        "recordings": 2_000, "clicks": 20_000, "leads": 1_000, "carts": 4_000}
DAYS = 60
COUNTRIES = ("DE", "GB", "FR", "NL", "US", "AT", "CH", "SE")
DEVICES = ("desktop", "desktop", "mobile", "mobile", "mobile", "tablet")
PAGES = [f"/product/{n}" for n in range(200)] + ["/", "/cart", "/checkout", "/blog"]
BROWSERS = (("Chrome", "Windows"), ("Safari", "iOS"), ("Firefox", "Linux"), ("Chrome", "Android"))
SHOP = "https://shop.example"


def _scaled(scale: float) -> dict[str, int]:
    return {key: max(1, round(value * scale)) for key, value in BASE.items()}


async def seed(store: Store, site_id: str, counts: dict[str, int], now: datetime) -> None:
    """The site's data, in bulk, in the shapes ingest and the error worker write."""
    rng = random.Random(21)
    start = now - timedelta(days=DAYS)

    def moment() -> datetime:
        return start + timedelta(seconds=rng.uniform(0, DAYS * 86400))

    per_visitor = max(1, counts["pageviews"] // counts["visitors"])
    profiles, buckets = [], []
    # Each visitor's first session's start: its carts, orders and most of its errors happen
    # in it, so the sessions list's outcome filters find sessions as they would on a shop.
    first_sessions: dict[str, datetime] = {}
    for n in range(counts["visitors"]):
        visitor_id = f"v{n}"
        # Sessions of five pageviews half a minute apart, each starting at a moment of its own.
        starts = sorted(moment() for _ in range(0, per_visitor, 5))
        first_sessions[visitor_id] = starts[0]
        events = sorted(({"id": f"{visitor_id}-{k}",
                          "at": starts[k // 5] + timedelta(seconds=30 * (k % 5)),
                          "url": SHOP + rng.choice(PAGES), "title": "Page", "referrer": None,
                          "sessionId": f"{visitor_id}-s{k // 5}", "duration": 12.5}
                         for k in range(per_visitor)), key=lambda event: event["at"])
        times = [event["at"] for event in events]
        for event in events:
            if "/product/" in event["url"]:
                event["product"] = {"productId": event["url"].rsplit("/", 1)[1], "via": "server"}
            if rng.random() < 0.2:
                event["source"] = {"referrerDomain": rng.choice(("google.com", "bing.com")),
                                   **({"utmSource": "newsletter"} if rng.random() < 0.3 else {})}
        for sequence in range(0, len(events), activity.BUCKET_CAP):
            part = events[sequence:sequence + activity.BUCKET_CAP]
            buckets.append({"_id": activity.bucket_id(site_id, visitor_id,
                                                      sequence // activity.BUCKET_CAP),
                            "siteId": site_id, "visitorId": visitor_id,
                            "sequence": sequence // activity.BUCKET_CAP, "count": len(part),
                            "events": part, "firstAt": part[0]["at"], "lastAt": part[-1]["at"]})
        profiles.append({
            "_id": visitors.profile_id(site_id, visitor_id), "siteId": site_id,
            "visitorId": visitor_id, "displayName": visitors.default_display_name(visitor_id),
            "displayNameSource": "default", "restricted": False, "objected": False,
            "firstSeen": times[0], "lastSeen": times[-1],
            "wpUserId": str(n) if n % 10 == 0 else None,
            "location": {"country": rng.choice(COUNTRIES)},
            "device": {"type": rng.choice(DEVICES), "browser": "Chrome", "os": "Android"},
            "counts": {"pageviews": len(events)}})
    await _insert(store, "visitors", profiles)
    await _insert(store, activity.COLLECTION, buckets)

    recordings, clicks, windows = [], [], []
    for _ in range(counts["recordings"]):
        # A recording of the visitor's first session, as the loader records one.
        visitor_id = f"v{rng.randrange(counts['visitors'])}"
        at = first_sessions[visitor_id]
        until = at + timedelta(seconds=rng.uniform(30, 900))
        recording_id = str(uuid.UUID(int=rng.getrandbits(128)))
        windows.append((visitor_id, at, until))
        recordings.append({
            "_id": recording_id, "siteId": site_id, "visitorId": visitor_id,
            "sessionId": f"{visitor_id}-s0", "wpUserId": None, "status": "ended", "startedAt": at,
            "lastActivityAt": until, "endedAt": until, "endReason": "idle",
            "pages": [{"url": SHOP + rng.choice(PAGES), "at": at}], "lastPageUrl": None,
            "continuesFrom": None})
        per_recording = max(1, counts["clicks"] // counts["recordings"])
        events = [{"id": f"{recording_id}-{k}",
                   "kind": rng.choice(("click", "click", "click", "rage_click", "dead_click")),
                   "at": at + (until - at) * rng.random(), "url": SHOP + rng.choice(PAGES),
                   "sessionId": f"{visitor_id}-s0", "recordingId": recording_id,
                   "selector": "#buy"}
                  for k in range(per_recording)]
        events.sort(key=lambda event: event["at"])
        clicks.append({"_id": str(uuid.UUID(int=rng.getrandbits(128))), "siteId": site_id,
                       "visitorId": visitor_id, "count": len(events), "events": events,
                       "firstAt": events[0]["at"], "lastAt": events[-1]["at"],
                       "createdAt": events[0]["at"]})
    await _insert(store, "recordings", recordings)
    await _insert(store, interactions.COLLECTION, clicks)

    errors: dict[str, dict[str, Any]] = {}
    occurrences = []
    for n in range(counts["occurrences"]):
        fingerprint = f"fp-{rng.randrange(counts['errors'])}"
        # A third happen during a recording, as errors do when replays are on.
        if n % 3 == 0 and windows:
            visitor_id, begin, until = rng.choice(windows)
            at = begin + (until - begin) * rng.random()
        else:
            visitor_id = f"v{rng.randrange(counts['visitors'])}"
            at = first_sessions[visitor_id] + timedelta(seconds=rng.uniform(0, 150))
        error_id = error_records.error_id_for(site_id, fingerprint)
        browser, system = rng.choice(BROWSERS)
        page = rng.choice(PAGES)
        occurrences.append({
            "_id": str(uuid.UUID(int=rng.getrandbits(128))), "siteId": site_id,
            "visitorId": visitor_id, "sessionId": f"{visitor_id}-s0", "wpUserId": None,
            "errorId": error_id,
            "fingerprint": fingerprint, "type": "TypeError", "message": f"fault {fingerprint}",
            "source": "javascript", "occurredAt": at, "url": SHOP + page, "page": page,
            "browser": browser, "os": system, "deviceType": rng.choice(DEVICES),
            "context": {"release": "1.0"}})
        error = errors.setdefault(error_id, {
            "_id": error_id, "siteId": site_id, "fingerprint": fingerprint, "type": "TypeError",
            "message": f"fault {fingerprint}", "source": "javascript", "status": "open",
            "occurrenceCount": 0, "firstSeen": at, "lastSeen": at, "context": {},
            "lastStack": "TypeError\n    at f (app.js:1:1)", "recentJobIds": []})
        error["occurrenceCount"] += 1
        error["firstSeen"] = min(error["firstSeen"], at)
        error["lastSeen"] = max(error["lastSeen"], at)
    await _insert(store, error_records.OCCURRENCES, occurrences)
    await _insert(store, error_records.ERRORS, list(errors.values()))

    leads = []
    for n in range(counts["leads"]):
        visitor_id = f"v{rng.randrange(counts['visitors'])}"
        leads.append({"_id": f"lead-{n}", "siteId": site_id, "visitorId": visitor_id,
                      "sessionId": None, "createdAt": moment(), "kind": "form",
                      "email": f"{visitor_id}@example.com", "name": f"Person {n}",
                      "fields": {}, "url": SHOP + "/checkout", "orderCompleted": False})
    await _insert(store, "leads", leads)
    # Carts in sessions; half of them reach the checkout, half of those a paid order. Stored
    # through the commerce module as ingest stores them, with their own times.
    for n in range(counts["carts"]):
        visitor_id = f"v{rng.randrange(counts['visitors'])}"
        context = {"visitorId": visitor_id, "sessionId": f"{visitor_id}-s0"}
        at = first_sessions[visitor_id] + timedelta(minutes=1)
        steps = [{"eventId": f"cart-{n}", "type": "add_to_cart", "productId": "1", **context}]
        if n % 2 == 0:
            steps.append({"eventId": f"checkout-{n}", "type": "checkout_started", **context})
        if n % 4 == 0:
            steps += [{"eventId": f"placed-{n}", "type": "order_placed", "orderId": f"o{n}",
                       "total": "42.50", "currency": "EUR", **context},
                      {"eventId": f"paid-{n}", "type": "order_paid", "orderId": f"o{n}"}]
        for k, step in enumerate(steps):
            event = commerce_event(site_id, step, now=now)
            event["occurredAt"] = at + timedelta(minutes=k)
            await commerce.record_event(store, site_id, event, session=None)
    for lead in leads:
        await store.collection("visitors").update_one(
            {"_id": visitors.profile_id(site_id, lead["visitorId"])},
            {"$inc": {"counts.leads": 1}})
    # The daily figures ingest keeps, computed from the seeded data as an upgrade would.
    await daily_figures.rebuild_site(store, site_id)
    # The recordings' country, device and marks, which ingest keeps as events arrive, given by
    # the backfill of recordings stored before they were kept, as an upgrade would.
    await backfill_facts(store)


async def _insert(store: Store, collection: str, documents: list[dict[str, Any]]) -> None:
    for offset in range(0, len(documents), 5_000):
        await store.collection(collection).insert_many(documents[offset:offset + 5_000])


async def _calls(store: Store, site_id: str, now: datetime) -> dict[str, str]:
    """Each dashboard API call the pages make, by name, with real ids from the seeded site."""
    error = await store.collection(error_records.ERRORS).find_one({"siteId": site_id})
    recording = await store.collection("recordings").find_one(
        {"siteId": site_id}, sort=[("startedAt", -1)])
    today = now.date().isoformat()
    week = (now - timedelta(days=6)).date().isoformat()
    # A shop that reports in EUR, with one saved segment: sessions that paid.
    await store.collection("sites").update_one(
        {"_id": site_id}, {"$set": {"settings.reportingCurrency": "EUR"}})
    segment = await segments.create_segment(store, site_id, {
        "name": "Buyers", "filters": {"converted": True}}, session=None)
    return {
        "overview, 30 days": "/overview",
        "overview, 7 days": f"/overview?from={week}&to={today}",
        "overview, today": f"/overview?from={today}&to={today}",
        "daily chart, 30 days": "/stats/daily",
        "error trends, 30 days": "/error-trends?limit=50",
        "error breakdown": f"/errors/{error['_id']}/breakdown",
        "error replays": f"/errors/{error['_id']}/replays",
        "visitors, first page": "/visitors?limit=25",
        "visitors, country": "/visitors?limit=25&country=DE",
        "visitors, device + has lead": "/visitors?limit=25&device=mobile&hasLead=true",
        "visitors, has error": "/visitors?limit=25&hasError=true",
        "visitors, search": "/visitors?limit=25&q=v12",
        "visitor profile": "/visitors/v1",
        "recordings, first page": "/recordings?limit=25",
        "recordings, has error": "/recordings?limit=25&has=error",
        "recordings, mobile + rage": "/recordings?limit=25&device=mobile&has=rage_click",
        "recording timeline": f"/recordings/{recording['_id']}/timeline",
        "leads, first page": "/leads?limit=25",
        # The orders list (issue 41 point 1): newest placings, paid ones, by value, by source.
        "orders, first page": "/orders?limit=25",
        "orders, paid": "/orders?limit=25&status=paid",
        "orders, by value": "/orders?limit=25&sort=value&currency=EUR",
        "orders, source": "/orders?limit=25&source=google.com",
        "funnel, shop, 30 days": "/funnels/shop/report",
        "funnel, shop, 7 days, source": f"/funnels/shop/report?from={week}&to={today}"
                                         "&source=google.com",
        "recordings, funnel drop-off": "/recordings?limit=25&funnel=shop&stoppedAt=1",
        "recordings, source": "/recordings?limit=25&source=google.com",
        "errors by revenue at risk": "/error-trends?limit=50&sort=revenueAtRisk",
        "pages by revenue at risk": "/revenue-at-risk/pages",
        # Sessions by outcome (issue 41 point 5): each filter one query on the visits' index.
        "sessions, first page": "/sessions?limit=25",
        "sessions, converted": "/sessions?limit=25&converted=true",
        "sessions, not converted": "/sessions?limit=25&converted=false",
        "sessions, order value": "/sessions?limit=25&minValue=40&maxValue=100",
        "sessions, utm source": "/sessions?limit=25&utmSource=newsletter",
        "sessions, entry page": "/sessions?limit=25&entry=/cart",
        "sessions, exit prefix": "/sessions?limit=25&exit=/product/*",
        "sessions, visited + mobile": "/sessions?limit=25&page=/checkout&device=mobile",
        "sessions, error": f"/sessions?limit=25&error={error['_id']}",
        "sessions, frustration": "/sessions?limit=25&frustration=/cart",
        "sessions, 3 filters": "/sessions?limit=25&converted=true&page=/checkout&country=DE",
        "recordings, segment": f"/recordings?limit=25&segment={segment['_id']}",
        "visitors, segment": f"/visitors?limit=25&segment={segment['_id']}",
        "funnel, shop, segment": f"/funnels/shop/report?segment={segment['_id']}",
    }


async def _time_calls(base_url: str, sign_in: Callable[[], Awaitable[str]], site_id: str,
                      calls: dict[str, str], samples: int) -> dict[str, dict[str, float]]:
    client = AsyncHTTPClient()
    figures = {}
    token = await sign_in()
    for name, path in calls.items():
        times: list[float] = []
        limited = 0
        while len(times) < samples + 1:
            started = time.perf_counter()
            answer = await client.fetch(HTTPRequest(
                f"{base_url}/api/v1/sites/{site_id}{path}",
                headers={"Authorization": f"Bearer {token}"}, request_timeout=600),
                raise_error=False)
            if answer.code == 401:
                # The access token ran out during a long run: sign in again, as the dashboard
                # refreshes, and time the call again.
                token = await sign_in()
                continue
            times.append((time.perf_counter() - started) * 1000)
            if answer.code == 503 and b"report_time_limit" in answer.body:
                limited += 1  # the report's time limit answered, as it does in production
            elif answer.code != 200:
                raise RuntimeError(f"{path}: {answer.code} {answer.body[:200]!r}")
        times = sorted(times[1:])  # the first call warms caches up; it is not counted
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        figures[name] = {"p50_ms": round(statistics.median(times), 1), "p95_ms": round(p95, 1),
                         "time_limited": limited}
    return figures


async def measure_at(scale: float, samples: int) -> dict[str, Any]:
    """Seed a fresh site at this scale and time every call."""
    tenant = await create_tenant({
        "MONGODB_URI": os.environ.get("MONGODB_URI", ""),
        "MONGODB_DATABASE": f"bench_dashboard_{secrets.token_hex(4)}"})
    settings, deps, site = tenant.settings, tenant.deps, tenant.site
    counts = _scaled(scale)
    now = datetime.now(UTC)
    started = time.perf_counter()
    await seed(deps.store, site["_id"], counts, now)
    seed_seconds = round(time.perf_counter() - started, 1)
    served = await tenant.serve()
    try:
        calls = await _calls(deps.store, site["_id"], now)
        figures = await _time_calls(served.base_url, tenant.sign_in, site["_id"], calls,
                                    samples)
    finally:
        served.http.stop()
        if not deps.store.embedded:
            await deps.store.client.drop_database(settings.mongodb_database)
        await deps.close()
    return {"scale": scale, "data": counts, "seed_seconds": seed_seconds, "calls": figures}


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.dashboard")
    parser.add_argument("--scale", type=float, default=float(
        os.environ.get("BENCH_DASHBOARD_SCALE", "1")), help="1 is the issue's site")
    parser.add_argument("--quick", action="store_true", help="scale 0.02, 3 samples")
    parser.add_argument("--samples", type=int, default=int(
        os.environ.get("BENCH_DASHBOARD_SAMPLES", "10")))
    arguments = parser.parse_args(argv)
    if arguments.quick:
        arguments.scale, arguments.samples = 0.02, 3
    return arguments


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Measure at the scale and at twice it, print a table, return the figures."""
    arguments = _arguments(sys.argv[1:] if argv is None and __name__ == "__main__"
                           else argv or [])
    single = asyncio.run(measure_at(arguments.scale, arguments.samples))
    # The first size's figures as soon as they are taken: at the size the second
    # takes the better part of an hour, and a run cut short should still have told something.
    print(f"data at 1x: {single['data']} (seeded in {single['seed_seconds']} s)")
    for name, one in single["calls"].items():
        limited = f"  {one['time_limited']}x 503" if one["time_limited"] else ""
        print(f"  {name:<30}{one['p50_ms']:>9}{one['p95_ms']:>9}{limited}", flush=True)
    double = asyncio.run(measure_at(arguments.scale * 2, arguments.samples))
    growth = {name: round(double["calls"][name]["p50_ms"]
                          / max(single["calls"][name]["p50_ms"], 0.1), 2)
              for name in single["calls"]}
    print(f"data at 1x: {single['data']} (seeded in {single['seed_seconds']} s); "
          f"2x seeded in {double['seed_seconds']} s; store: "
          f"{'MONGODB_URI' if os.environ.get('MONGODB_URI') else 'embedded'}")
    print(f"{'call':<30}{'p50 ms':>9}{'p95 ms':>9}{'p50 2x':>9}{'p95 2x':>9}{'growth':>8}")
    for name, one in single["calls"].items():
        two = double["calls"][name]
        # A call answered 503 by the report time limit (of samples + 1) is marked so.
        limited = "".join(f" {size}: {found['time_limited']}x 503"
                          for size, found in (("1x", one), ("2x", two)) if found["time_limited"])
        print(f"{name:<30}{one['p50_ms']:>9}{one['p95_ms']:>9}{two['p50_ms']:>9}"
              f"{two['p95_ms']:>9}{growth[name]:>8}{limited}")
    return {"single": single, "double": double, "growth_p50": growth}


if __name__ == "__main__":
    main()
