"""`python -m bench.heatmaps`: a page's heatmap with 1,000,000 clicks, and the render job.

Counts 1,000,000 clicks on one page (40 elements, mostly near their middles, 30 days, desktop)
and 1,000 on a second page with `documents.heatmaps.contribution`, writes the sums in the
documents' shape, then asks the HTTP API for each page's 30-day heatmap. Baselines measured in
the same run: one indexed read of one count document, and the same API call for the 1,000-click
page. The render job replays a recording into a PNG in Debian's Chromium; its baseline is the
same browser launched to screenshot an empty page. Runs on SecantusDB through the real driver.
Peak memory is sampled for this process and read for the browser's processes from the kernel's
children accounting.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import random
import resource
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from bench.dsr.__main__ import RssSampler
from bench.tenant import create_tenant
from demo import demo_recording_events
from documents import heatmaps, recordings
from tasks.heatmaps import CHROMIUM_FLAGS, render_heatmap
from tests.support.secantus import running_secantus

CLICKS = 1_000_000
SMALL = 1_000
ELEMENTS = 40
DAYS = 30
CHROMIUM = "/usr/bin/chromium"
#: The bench shop's origin: a recording is rendered only on one of its site's allowed origins.
SHOP = "https://bench-shop.example"


def _near_middle(rng: random.Random) -> float:
    """Where in an element a click lands: mostly near its middle, as on a real button."""
    return min(0.999, max(0.0, rng.gauss(0.5, 0.12)))


async def _count_clicks(store: Any, site_id: str, page: str, count: int,
                       today: datetime) -> int:
    """Count `count` clicks into the page's documents, in the shape ingest writes; returns how
    many documents. Summed here first, as `add_to_aggregates` sums a batch, then written in
    bulk: a million single upserts would measure the embedded store's writes, not the read."""
    rng = random.Random(22)
    totals: dict[tuple[Any, ...], list[float]] = {}
    for n in range(count):
        share = heatmaps.contribution(
            {"kind": "click", "at": today - timedelta(days=n % DAYS),
             "selector": f"button#e{n % ELEMENTS}", "ox": _near_middle(rng),
             "oy": _near_middle(rng),
             "vw": 1280, "x": rng.randrange(1280), "y": rng.randrange(4000)}, page)
        key = (share["page"], share["width"], share["kind"], share["day"], share["target"],
               share["cell"])
        total = totals.setdefault(key, [0, 0.0, 0.0])
        total[0] += 1
        total[1] += share["x"]
        total[2] += share["y"]
    documents = [{"siteId": site_id, "page": key[0], "width": key[1], "kind": key[2],
                  "day": key[3], "target": key[4], "cell": key[5], "n": n, "xSum": x, "ySum": y}
                 for key, (n, x, y) in totals.items()]
    for start in range(0, len(documents), 10_000):
        await store.collection(heatmaps.COUNTS).insert_many(documents[start:start + 10_000])
    return len(documents)


async def _median_ms(work, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await work()
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 2)


async def _api(base_url: str, token: str, site_id: str, page: str, first: str, last: str):
    request = HTTPRequest(
        f"{base_url}/api/v1/sites/{site_id}/heatmaps/page?page={page}&kind=click"
        f"&width=desktop&from={first}&to={last}", headers={"Authorization": f"Bearer {token}"})
    answer = await AsyncHTTPClient().fetch(request)
    return json.loads(answer.body)


async def _blank_screenshot() -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                   args=CHROMIUM_FLAGS)
        page = await browser.new_page(viewport={"width": 1024, "height": 640})
        await page.set_content("<!doctype html><p>blank</p>")
        await page.screenshot(type="png", full_page=True)
        await browser.close()


async def _render_figures(deps: Any, site: dict[str, Any]) -> dict[str, Any]:
    url = f"{SHOP}/product/blue-mug"
    recording_id = str(uuid.uuid4())
    now = datetime.now(UTC)
    document = recordings.new_recording(recording_id, site["_id"], "bench-visitor", None, now)
    document.update({"status": "ended", "pages": [{"url": url, "at": now}]})
    await deps.store.collection("recordings").insert_one(document)
    events = demo_recording_events(url, int(now.timestamp() * 1000))
    await recordings.save_segment(deps.store, str(uuid.uuid4()), gzip.compress(
        json.dumps(events).encode()), {
        "siteId": site["_id"], "recordingId": recording_id, "visitorId": "bench-visitor",
        "sentFor": recording_id, "seq": 0, "startedAt": now, "consoleChecked": True,
        "rejected": None})

    baseline_ms = await _median_ms(_blank_screenshot, 3)
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024

    async def render() -> None:
        # The renderer draws only recordings of the site's allowed origins.
        assert await render_heatmap(deps.store, {**site, "allowedOrigins": [SHOP]},
                                    "/product/blue-mug", "desktop", chromium_path=CHROMIUM)

    with RssSampler() as sampler:
        before = sampler.peak
        render_ms = await _median_ms(render, 3)
    return {"render_ms": render_ms, "blank_browser_ms": baseline_ms,
            "render_ratio": round(render_ms / max(baseline_ms, 1e-3), 2),
            "service_rss_growth_mb": round(sampler.peak - before, 1),
            "browser_peak_rss_mb": round(max(
                children_before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024),
                1)}


async def measure(mongodb_uri: str) -> dict[str, Any]:
    """Count the clicks, then time the API, one indexed read and the render job."""
    tenant = await create_tenant({"MONGODB_URI": mongodb_uri,
                                  "MONGODB_DATABASE": "bench_heatmaps"})
    deps, site = tenant.deps, tenant.site
    today = datetime.now(UTC)
    start = time.perf_counter()
    documents_big = await _count_clicks(deps.store, site["_id"], "/big", CLICKS, today)
    count_seconds = time.perf_counter() - start
    await _count_clicks(deps.store, site["_id"], "/small", SMALL, today)

    served = await tenant.serve()
    base_url, token = served.base_url, served.token
    first = (today - timedelta(days=DAYS - 1)).strftime("%Y-%m-%d")
    last = today.strftime("%Y-%m-%d")
    try:
        answer = await _api(base_url, token, site["_id"], "/big", first, last)
        assert answer["total"] == CLICKS, answer["total"]
        big_ms = await _median_ms(
            lambda: _api(base_url, token, site["_id"], "/big", first, last), 5)
        small_ms = await _median_ms(
            lambda: _api(base_url, token, site["_id"], "/small", first, last), 5)
        one = {"siteId": site["_id"], "page": "/big", "width": "desktop", "kind": "click",
               "day": last, "target": "button#e0", "cell": 0}
        read_ms = await _median_ms(
            lambda: deps.store.collection(heatmaps.COUNTS).find_one(one), 50)
        render = await _render_figures(deps, site)
    finally:
        served.http.stop()
        await deps.close()
    return {"clicks": CLICKS, "count_documents": documents_big,
            "count_seconds": round(count_seconds, 1), "api_ms_1m_clicks": big_ms,
            "api_ms_1k_clicks": small_ms, "one_indexed_read_ms": read_ms,
            "api_vs_indexed_read": round(big_ms / max(read_ms, 1e-3), 1),
            "api_1m_vs_1k": round(big_ms / max(small_ms, 1e-3), 1), **render,
            "store": "SecantusDB on the wire"}


def main() -> dict[str, Any]:
    """Measure, print the figures, return them."""
    # On the wire (SecantusDB, the real driver): the embedded store checks a unique index by
    # scanning, so it cannot hold a busy page's counts in reasonable time.
    with running_secantus() as mongodb_uri:
        figures = asyncio.run(measure(mongodb_uri))
    width = max(len(name) for name in figures)
    for name, value in figures.items():
        print(f"{name:<{width}}  {value}")
    return figures


if __name__ == "__main__":
    main()
