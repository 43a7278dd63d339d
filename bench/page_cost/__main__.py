"""`python -m bench.page_cost [--runs N] [--seconds S]`: what a tracker costs a shop's page, beside
Sentry's and PostHog's session replay (issue 28 point 18).

In Debian's Chromium driven by Playwright, a generated ~3,800-element product page (page.py) is
visited by a scripted shopper for VISIT_SECONDS (scrolling, the gallery, the tabs, the cart),
with one of four trackers in its head:

- `none`: no tracker, the baseline measured in the same run;
- `ours`: our loader against a real service process (embedded store, recordings on);
- `sentry`: @sentry/browser with Replay (session sample rate 1.0);
- `posthog`: posthog-js with session recording.

Sentry and PostHog come from the npm registry at the exact versions in vendors/package.json
(`npm ci` runs when vendors/node_modules is missing) and send to a local stub collector that
accepts and counts their uploads; our loader's uploads are counted by a proxy in front of the
service (servers.py). Per visit, in a fresh browser context (cold cache, no storage):

- load event start (navigation timing, ms from navigation start);
- long tasks before load: their summed duration (PerformanceObserver 'longtask', buffered);
- main-thread script and task time over the load and the visit (CDP Performance.getMetrics
  ScriptDuration and TaskDuration; a worker's time, such as Sentry's compression, is not in it);
- bytes uploaded to the collector: request bodies, including what is sent as the page is left.

RUNS rounds (BENCH_PAGE_COST_RUNS or --runs, default 12) each visit every variant once, in an
order rotated every round, after one unmeasured warm-up visit each. Each figure is the median
over the rounds, with its ratio to the no-tracker median. Timings are printed, never asserted:
on a shared machine they are rough, the ratios are what counts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from bench.loadgen import ROOT, free_port, start_process, wait_for_port
from bench.page_cost.page import tracker_tags
from bench.page_cost.servers import (
    SENTRY_BUNDLE,
    VENDORS,
    Uploads,
    collector_app,
    listen,
    proxy_app,
    shop_app,
)
from handlers.sdk import SDK_DIST
from tests.support.browser import CHROMIUM, VISITOR_USER_AGENT
from tests.support.processes import stop

RUNS = int(os.environ.get("BENCH_PAGE_COST_RUNS", "12"))
VISIT_SECONDS = float(os.environ.get("BENCH_PAGE_COST_SECONDS", "30"))
TRACKERS = ("none", "ours", "sentry", "posthog")
#: One step of the scripted shopper every STEP_SECONDS.
STEP_SECONDS = 1.5
#: After leaving the page: time for the beacons sent on leaving to arrive.
LEAVE_SECONDS = 3.0
VIEWPORT = {"width": 1280, "height": 800}
#: `navigator.webdriver` stays false, as for a shopper: posthog-js captures nothing from a
#: browser that says it is automated (its bot filter), and the same browser serves every variant.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage",
                 "--disable-blink-features=AutomationControlled"]
VENDOR_PACKAGES = ("@sentry/browser", "posthog-js")

#: Installed before any of the page's scripts: every long task of the document.
OBSERVE = """(() => {
  window.__longTasks = [];
  try {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        window.__longTasks.push({ startTime: e.startTime, duration: e.duration });
      }
    }).observe({ type: 'longtask', buffered: true });
  } catch (e) { /* no long task timing: reported as none */ }
})();"""

READ = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const load = nav.loadEventStart;
  const tasks = window.__longTasks || [];
  const before = tasks.filter((t) => t.startTime < load);
  const sum = (list) => list.reduce((total, t) => total + t.duration, 0);
  return { loadEventStart: load, domContentLoaded: nav.domContentLoadedEventStart,
           longTasksBeforeLoadMs: sum(before), longTasksBeforeLoad: before.length,
           longTasksMs: sum(tasks), longTasks: tasks.length,
           elements: document.getElementsByTagName('*').length,
           // What explains a load event: the scripts fetched, and the first paint.
           scripts: performance.getEntriesByType('resource')
             .filter((e) => e.initiatorType === 'script')
             .map((e) => ({ name: e.name.split('?')[0].split('/').pop(),
                            start: Math.round(e.startTime), end: Math.round(e.responseEnd) })),
           firstContentfulPaint: (performance.getEntriesByName('first-contentful-paint')[0]
                                  || { startTime: null }).startTime,
           beforeLoad: before.map((t) => [Math.round(t.startTime), Math.round(t.duration)]) };
}"""

#: The scripted shopper: one step every STEP_SECONDS, round and round until the visit is over.
STEPS: tuple[tuple[str, Any], ...] = (
    ("wheel", 500), ("click", ".thumbs button:nth-child(3)"), ("wheel", 400),
    ("click", ".thumbs button:nth-child(6)"), ("fill", ("#qty", "2")), ("click", "#buy"),
    ("click", ".tabs button[data-pane=p-specs]"), ("wheel", 700),
    ("click", ".tabs button[data-pane=p-reviews]"), ("wheel", 900),
    ("click", "#more-reviews"), ("wheel", 1200), ("click", ".card button"),
    ("hover", ".menu:nth-child(3) > a"), ("click", ".tabs button[data-pane=p-qa]"),
    ("click", "#p-qa details:nth-of-type(2) summary"), ("wheel", 1500),
    ("click", ".tabs button[data-pane=p-desc]"), ("wheel", -2500), ("click", "#buy"),
)


async def _step(page: Any, kind: str, arg: Any) -> None:
    if kind == "wheel":
        await page.mouse.wheel(0, arg)
    elif kind == "click":
        await page.click(arg, timeout=3000)
    elif kind == "fill":
        await page.fill(arg[0], arg[1], timeout=3000)
    elif kind == "hover":
        await page.hover(arg, timeout=3000)


async def _shop(page: Any, seconds: float) -> int:
    """The shopper's visit; how many steps failed (the figures stand, the count is reported)."""
    from playwright.async_api import Error as PlaywrightError

    started, failed, n = time.monotonic(), 0, 0
    while time.monotonic() - started < seconds - STEP_SECONDS / 2:
        kind, arg = STEPS[n % len(STEPS)]
        try:
            await _step(page, kind, arg)
        except PlaywrightError:
            failed += 1
        n += 1
        await asyncio.sleep(max(0.0, started + n * STEP_SECONDS - time.monotonic()))
    await asyncio.sleep(max(0.0, started + seconds - time.monotonic()))
    return failed


async def _visit(browser: Any, shop: str, tracker: str, seconds: float,
                 uploads: Uploads) -> dict[str, Any]:
    """One visit of the product page with `tracker`, in a fresh context."""
    context = await browser.new_context(user_agent=VISITOR_USER_AGENT, viewport=VIEWPORT)
    try:
        await context.add_init_script(OBSERVE)
        page = await context.new_page()
        await page.goto(f"{shop}/blank")  # same site: the product page keeps this renderer
        cdp = await context.new_cdp_session(page)
        await cdp.send("Performance.enable")
        uploads.reset()
        await page.goto(f"{shop}/{tracker}", wait_until="load")
        failed = await _shop(page, seconds)
        metrics = {m["name"]: m["value"]
                   for m in (await cdp.send("Performance.getMetrics"))["metrics"]}
        timing = await page.evaluate(READ)
        await page.goto(f"{shop}/blank")  # the page is left: trackers send what they hold
        await asyncio.sleep(LEAVE_SECONDS)
    finally:
        await context.close()
    return {
        "load_event_start_ms": round(timing["loadEventStart"], 1),
        "dom_content_loaded_ms": round(timing["domContentLoaded"], 1),
        "long_tasks_before_load_ms": round(timing["longTasksBeforeLoadMs"], 1),
        "long_tasks_before_load": timing["longTasksBeforeLoad"],
        "long_tasks_visit_ms": round(timing["longTasksMs"], 1),
        "script_ms": round(metrics.get("ScriptDuration", 0.0) * 1000, 1),
        "task_ms": round(metrics.get("TaskDuration", 0.0) * 1000, 1),
        "layout_style_ms": round((metrics.get("LayoutDuration", 0.0)
                                  + metrics.get("RecalcStyleDuration", 0.0)) * 1000, 1),
        "js_heap_mb": round(metrics.get("JSHeapUsedSize", 0.0) / 1e6, 2),
        "uploaded_bytes": uploads.bytes,
        "upload_requests": uploads.requests,
        "uploads_refused": uploads.refused,
        "uploaded_by_path": dict(uploads.by_path),
        "elements": timing["elements"],
        "scripts": timing["scripts"],
        "first_contentful_paint_ms": timing["firstContentfulPaint"],
        "long_tasks_before_load_list": timing["beforeLoad"],
        "steps_failed": failed,
    }


def _run(args: list[str], cwd: Path) -> None:
    subprocess.run(args, cwd=cwd, check=True, stdout=subprocess.DEVNULL)


def ensure_sdk() -> None:
    """Our loader and recorder, built by `make sdk` when sdk/dist lacks them."""
    if not (SDK_DIST / "loader.js").exists() or not (SDK_DIST / "recorder.js").exists():
        _run(["make", "sdk"], ROOT)


def ensure_vendors() -> tuple[dict[str, str], str | None]:
    """Sentry's and PostHog's packages (`npm ci` when missing, then the Sentry bundle); their
    installed versions, and why they cannot be measured (None when they can)."""
    try:
        if shutil.which("npm") is None:
            return {}, "npm is not installed"
        lock = VENDORS / "package-lock.json"
        installed = VENDORS / "node_modules" / ".package-lock.json"
        if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
            _run(["npm", "ci", "--no-audit", "--no-fund"], VENDORS)
        if not SENTRY_BUNDLE.exists() or SENTRY_BUNDLE.stat().st_mtime < installed.stat().st_mtime:
            _run(["npm", "run", "--silent", "build"], VENDORS)
        versions = {name: json.loads((VENDORS / "node_modules" / name / "package.json")
                                     .read_text())["version"] for name in VENDOR_PACKAGES}
    except (OSError, subprocess.CalledProcessError, KeyError, ValueError) as exc:
        return {}, f"the npm packages could not be installed or built: {exc}"
    return versions, None


async def _start_service(workdir: Path) -> tuple[Any, int, dict[str, Any]]:
    """Our service as its own process on the embedded store (as bench.ingest starts it); its
    port and the demo login and site."""
    port = free_port()
    demo_file = workdir / "demo.json"
    password = secrets.token_urlsafe(16)
    service = start_process(["server.py", "serve"], {
        "LOG_LEVEL": "ERROR", "MONGODB_URI": "", "REDIS_URL": "", "PORT": str(port),
        "SITE_RATE_PER_SECOND": "1000000", "SITE_RATE_BURST": "1000000",
        "DEMO_FILE": str(demo_file), "DEMO_EMAIL": "bench@example.com",
        "DEMO_PASSWORD": password})
    await wait_for_port(port)
    for _ in range(300):
        if demo_file.exists() and demo_file.stat().st_size:
            break
        await asyncio.sleep(0.1)
    return service, port, json.loads(demo_file.read_text())


async def _allow_origin(port: int, demo: dict[str, Any], origin: str) -> None:
    """The shop's origin as the demo site's allowed origin, through the dashboard API."""
    client, base = AsyncHTTPClient(), f"http://127.0.0.1:{port}"
    login = await client.fetch(HTTPRequest(f"{base}/auth/login", method="POST", body=json.dumps(
        {"email": demo["email"], "password": demo["password"]}),
        headers={"Content-Type": "application/json"}))
    token = json.loads(login.body)["accessToken"]
    await client.fetch(HTTPRequest(
        f"{base}/api/v1/sites/{demo['siteId']}", method="PATCH",
        body=json.dumps({"allowedOrigins": [origin], "settings": {"recordings": True}}),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"}))


def _quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    quarter = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else ordered * 3
    return {"median": round(statistics.median(ordered), 1), "p25": round(quarter[0], 1),
            "p75": round(quarter[2], 1)}


FIGURES = ("load_event_start_ms", "long_tasks_before_load_ms", "script_ms", "task_ms",
           "layout_style_ms", "long_tasks_visit_ms", "uploaded_bytes", "upload_requests",
           "js_heap_mb")


def summarise(visits: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per tracker and figure: median and quartiles, the added amount and the ratio against
    the no-tracker median of the same run."""
    summary: dict[str, Any] = {}
    base = {f: statistics.median(v[f] for v in visits["none"]) for f in FIGURES}
    for tracker, runs in visits.items():
        summary[tracker] = {}
        for figure in FIGURES:
            q = _quantiles([run[figure] for run in runs])
            q["added"] = round(q["median"] - base[figure], 1)
            q["ratio"] = round(q["median"] / base[figure], 2) if base[figure] else None
            summary[tracker][figure] = q
    return summary


def table(summary: dict[str, Any]) -> str:
    """Figures down, trackers across: median, then added and ratio against no tracker."""
    labels = {"load_event_start_ms": "load event start, ms",
              "long_tasks_before_load_ms": "long tasks before load, ms",
              "script_ms": "main-thread script, ms (load + visit)",
              "task_ms": "main-thread tasks, ms (load + visit)",
              "layout_style_ms": "layout + style, ms",
              "long_tasks_visit_ms": "long tasks, whole visit, ms",
              "uploaded_bytes": "uploaded, KB", "upload_requests": "upload requests",
              "js_heap_mb": "JS heap used at the end, MB"}
    trackers = list(summary)
    lines = ["| figure (median) | " + " | ".join(trackers) + " |",
             "|---|" + "---:|" * len(trackers)]
    for figure, label in labels.items():
        cells = []
        for tracker in trackers:
            q = summary[tracker][figure]
            scale = 1024 if figure == "uploaded_bytes" else 1
            value = q["median"] / scale
            text = f"{value:.1f}" if scale > 1 or figure == "js_heap_mb" else f"{value:.0f}"
            if tracker != "none" and figure not in ("uploaded_bytes", "upload_requests"):
                added = q["added"] / scale
                text += f" ({added:+.0f}" if figure != "js_heap_mb" else f" ({added:+.1f}"
                text += f", {q['ratio']}x)" if q["ratio"] is not None else ")"
            cells.append(text)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def measure(runs: int, seconds: float) -> dict[str, Any]:
    """Start everything, warm each variant up once, then `runs` rotated rounds."""
    from playwright.async_api import async_playwright

    ensure_sdk()
    versions, vendors_missing = ensure_vendors()
    trackers = [t for t in TRACKERS if vendors_missing is None or t in ("none", "ours")]
    uploads = Uploads()
    workdir = Path(tempfile.mkdtemp(prefix="bench-page-cost-"))
    service, service_port, demo = await _start_service(workdir)
    servers = []
    try:
        proxy, proxy_port = listen(proxy_app(uploads, f"http://127.0.0.1:{service_port}"))
        collector, collector_port = listen(collector_app(uploads))
        pages: dict[str, str] = {}
        shop, shop_port = listen(shop_app(pages), "localhost")
        shop_origin = f"http://localhost:{shop_port}"
        servers = [proxy, collector, shop]
        collector_origin = f"http://127.0.0.1:{collector_port}"
        for tracker in trackers:
            pages[tracker] = tracker_tags(
                tracker, service=f"http://127.0.0.1:{proxy_port}",
                public_key=demo["publicKey"], cdn=collector_origin, collector=collector_origin)
        await _allow_origin(service_port, demo, shop_origin)

        visits: dict[str, list[dict[str, Any]]] = {t: [] for t in trackers}
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                                       args=CHROMIUM_ARGS)
            try:
                for tracker in trackers:  # warm-up: the service, the servers, the browser
                    await _visit(browser, shop_origin, tracker, min(5.0, seconds), uploads)
                for round_ in range(runs):
                    order = trackers[round_ % len(trackers):] + trackers[:round_ % len(trackers)]
                    for tracker in order:
                        result = await _visit(browser, shop_origin, tracker, seconds, uploads)
                        visits[tracker].append(result)
                        print(f"round {round_ + 1}/{runs} {tracker:<8} load "
                              f"{result['load_event_start_ms']:>7} ms, long tasks before load "
                              f"{result['long_tasks_before_load_ms']:>6} ms, script "
                              f"{result['script_ms']:>7} ms, uploaded "
                              f"{result['uploaded_bytes']:>8} B in "
                              f"{result['upload_requests']} requests", flush=True)
                browser_version = browser.version
            finally:
                await browser.close()
    finally:
        for server in servers:
            server.stop()
        stop(service)
        shutil.rmtree(workdir, ignore_errors=True)
    summary = summarise(visits)
    return {"runs": runs, "visit_seconds": seconds, "chromium": browser_version,
            "elements": visits["none"][0]["elements"], "versions": versions,
            "not_measured": {t: vendors_missing for t in TRACKERS if t not in trackers},
            "summary": summary, "table": table(summary), "visits": visits}


def main(runs: int | None = None, seconds: float | None = None) -> dict[str, Any]:
    """Measure, print the figures, return them."""
    figures = asyncio.run(measure(runs or RUNS, seconds or VISIT_SECONDS))
    print(f"\n{figures['runs']} rounds of a {figures['visit_seconds']:.0f} s visit, "
          f"{figures['elements']} elements, Chromium {figures['chromium']}, "
          f"{json.dumps(figures['versions'])}")
    for tracker, why in figures["not_measured"].items():
        print(f"{tracker}: not measured ({why})")
    print("each cell: median (added against no tracker, ratio); rough timings, shared cores\n")
    print(figures["table"])
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, help=f"rounds (default {RUNS})")
    parser.add_argument("--seconds", type=float, help=f"visit length (default {VISIT_SECONDS})")
    options = parser.parse_args()
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / "page_cost.json").write_text(json.dumps(main(options.runs, options.seconds),
                                                       indent=2) + "\n", encoding="utf-8")
