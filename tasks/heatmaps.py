"""Heatmaps for the dashboard, and the worker job that renders a page's background image.

The view reads the counts kept at ingest (documents/heatmaps.py) in one indexed query and says
why a page has no image. The render job replays the full snapshot of a recent recording of the
page at that width class in headless Chromium (Debian's, through Playwright), stops at a time
and a size limit, and stores a full-page PNG with the recording it came from and the boxes of
the clicked elements.

A recording is whatever its uploader wrote, so the browser fetches nothing itself (SSRF): a
recording whose page is not on one of the site's allowed origins is not rendered, and every
request the page makes is answered by `SiteResources`, which fetches only GETs over http(s) from
the site's allowed origins, through the address guard (privacy/addresses.py), without following
redirects. Chromium is pointed at a proxy that does not exist and resolves no name, and the page's
Content-Security-Policy allows no scheme but http(s), so nothing goes round the route.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import logging
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tornado.httpclient import HTTPClientError

from config.background import PeriodicTask
from derived import daily_figures
from documents import heatmaps, recordings, sites
from documents.sites import normalise_origin
from documents.store import Store
from errors import InvalidInput
from privacy import addresses
from privacy.exclusion import exclusion_for, site_exclusion_rules
from privacy.heatmap_pages import page_group_rules, page_of

log = logging.getLogger(__name__)

#: An image older than this is rendered again from a newer recording, when there is one.
RERENDER_AFTER = timedelta(days=7)
#: Recordings looked at, newest first, for one of the page at the width class.
RECENT_RECORDINGS = 30
#: Debian's Chromium (`make system-deps`); a process without it renders nothing.
HEATMAP_CHROMIUM = "/usr/bin/chromium"
#: The replayer bundle (built by `make sdk`); rrweb rebuilds the snapshot in a sandboxed frame.
REPLAYER = Path(__file__).resolve().parent.parent / "sdk" / "dist" / "replayer.js"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync",
                  # Every request is answered by the route (SiteResources). Whatever the route
                  # does not see (a WebSocket, a preconnect) goes to a proxy whose name never
                  # resolves, loopback included, and Chromium resolves no name itself.
                  "--proxy-server=http://no-proxy.invalid:1", "--proxy-bypass-list=<-loopback>",
                  "--host-resolver-rules=MAP * ~NOTFOUND"]

#: The rendered page's Content-Security-Policy: resources over http(s) only (the route decides
#: which), no data:, file: or blob: resources, no connections, no frames of its own.
RENDER_POLICY = ("default-src 'none'; script-src 'unsafe-inline'; "
                 "style-src 'unsafe-inline' http: https:; img-src http: https:; "
                 "font-src http: https:; media-src http: https:")


@dataclass(frozen=True)
class RenderLimits:
    """What one render may take: wall time, decompressed recording, page height, PNG size."""

    seconds: float = 30.0
    recording_bytes: int = 32 * 1024 * 1024
    height_px: int = 12_000
    png_bytes: int = 8 * 1024 * 1024
    settle_ms: int = 500
    selectors: int = 500
    resource_bytes: int = 8 * 1024 * 1024
    resource_seconds: float = 10.0
    resources: int = 300


def _day(value: date) -> str:
    return value.isoformat()


def no_image_reason(site: dict[str, Any], page: str) -> str | None:
    """Why a page never gets a background image (excluded from replay), or None."""
    if exclusion_for(page, site_exclusion_rules(site)) != "none":
        return "excluded_from_replay"
    return None


async def pages_view(store: Store, site: dict[str, Any], first: date, last: date
                     ) -> dict[str, Any]:
    """The site's pages with views and interaction counts over the days.

    A page's views are its pageviews, read from the figure the overview's top pages read
    (`daily_figures.page_figures`), gathered by the site's grouping rules; the interaction counts
    are the heatmap's own.
    """
    rows = await heatmaps.read_pages(store, site["_id"], _day(first), _day(last))
    rules = page_group_rules(site)
    pageviews: Counter[str] = Counter()
    for row in await daily_figures.page_figures(store, site["_id"], first, last):
        pageviews[page_of(row["_id"], rules)] += row["pageviews"]
    return {"from": _day(first), "to": _day(last),
            "pages": heatmaps.summarise_pages(rows, pageviews)}


async def heatmap_view(store: Store, site: dict[str, Any], page: str, width: str, kind: str,
                       first: date, last: date) -> dict[str, Any]:
    """One page's heatmap: what to draw, and the image to draw it on (or why there is none)."""
    rows = await heatmaps.read_heatmap(store, site["_id"], page, width, kind, _day(first),
                                       _day(last))
    view: dict[str, Any] = {"page": page, "width": width, "kind": kind, "from": _day(first),
                            "to": _day(last), **heatmaps.summarise(rows, kind),
                            "image": None, "noImage": no_image_reason(site, page)}
    if view["noImage"] is None:
        image = await heatmaps.latest_image(store, site["_id"], page, width)
        now = datetime.now(UTC)
        if render_due(image, now):
            # Rendered off the request path by a HeatmapRenderer; shown on a later visit.
            await heatmaps.request_render(store, site["_id"], page, width, now)
        if image is None:
            view["noImage"] = "no_recording_rendered"
        else:
            meta = image["metadata"]
            view["image"] = {"id": image["_id"], "width": meta.get("viewportWidth"),
                             "height": meta.get("height"), "boxes": meta.get("boxes", {}),
                             "renderedAt": meta.get("renderedAt"),
                             "recordings": len(meta.get("sourceRecordingIds", []))}
    return view


def render_due(image: dict[str, Any] | None, now: datetime) -> bool:
    """Render when a page has no image at a width class, or when its image is a week old."""
    if image is None:
        return True
    rendered = image["metadata"].get("renderedAt")
    if rendered is None:
        return True
    if rendered.tzinfo is None:
        rendered = rendered.replace(tzinfo=UTC)
    return now - rendered >= RERENDER_AFTER


async def _segments_events(store: Store, site_id: str, recording_id: str, budget: int
                           ) -> list[dict[str, Any]] | None:
    events: list[dict[str, Any]] = []
    used = 0
    for segment in await recordings.list_segments(store, site_id, recording_id):
        data = b"".join([chunk async for chunk in
                         recordings.stream_segment(store, site_id, segment["_id"])])
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as unpacked:
            raw = unpacked.read(budget - used + 1)
        used += len(raw)
        if used > budget:
            return None
        events.extend(json.loads(raw))
    return sorted(events, key=lambda event: event.get("timestamp", 0))


def origin_of(url: str) -> str | None:
    """The URL's origin as the site's allowed origins are written, or None when it has none."""
    parts = urlsplit(url)
    try:
        return normalise_origin(f"{parts.scheme}://{parts.netloc}")
    except (InvalidInput, ValueError):
        return None


def allowed_origins(site: dict[str, Any]) -> frozenset[str]:
    """The site's allowed origins (stored before they were checked as strictly: re-checked)."""
    return frozenset(filter(None, (origin_of(o) for o in site.get("allowedOrigins", []))))


def _snapshot_of(events: list[dict[str, Any]], page: str, width: str,
                 rules: list[Any], origins: frozenset[str]) -> list[dict[str, Any]] | None:
    """The first meta event of the page at the width class, on one of the site's origins, and
    the full snapshot after it."""
    for index, event in enumerate(events):
        data = event.get("data") or {}
        if event.get("type") != 4 or not isinstance(data.get("href"), str):
            continue
        if origin_of(data["href"]) not in origins:
            continue  # written by whoever uploaded it; not a page of this site
        if page_of(data["href"], rules) != page or \
                heatmaps.width_class(int(data.get("width") or 0)) != width:
            continue
        for later in events[index + 1:]:
            if later.get("type") == 4:
                break
            if later.get("type") == 2:
                return [event, later]
    return None


async def find_snapshot(store: Store, site: dict[str, Any], page: str, width: str,
                        limits: RenderLimits) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """A recent recording of the page at the width class, and its meta + full snapshot."""
    rules = page_group_rules(site)
    origins = allowed_origins(site)
    if not origins:
        return None
    for status in ("ended", "active"):
        cursor = recordings.latest_of_status(store, site["_id"], status,
                                             limit=RECENT_RECORDINGS)
        async for recording in cursor:
            if not any(page_of(p["url"], rules) == page for p in recording.get("pages", [])):
                continue
            events = await _segments_events(store, site["_id"], recording["_id"],
                                            limits.recording_bytes)
            snapshot = _snapshot_of(events or [], page, width, rules, origins)
            if snapshot:
                return recording, snapshot
    return None


_BOXES = """selectors => {
  const frame = document.querySelector('#root iframe');
  const doc = frame.contentDocument;
  const boxes = {};
  for (const selector of selectors) {
    let el = null;
    try { el = doc.querySelector(selector); } catch (e) { continue; }
    if (!el) continue;
    const r = el.getBoundingClientRect();
    boxes[selector] = [r.left + doc.defaultView.scrollX, r.top + doc.defaultView.scrollY,
                       r.width, r.height];
  }
  return boxes;
}"""

_SIZE = """maxHeight => {
  const frame = document.querySelector('#root iframe');
  const doc = frame.contentDocument.documentElement;
  const height = Math.min(maxHeight, Math.max(doc.scrollHeight, 1));
  frame.style.border = '0';
  frame.style.height = height + 'px';
  frame.setAttribute('height', String(height));
  return height;
}"""


class SiteResources:
    """Answers the rendered page's requests: GETs over http(s) from the site's allowed origins,
    fetched by the service through the address guard, no redirects; everything else refused."""

    def __init__(self, origins: frozenset[str], *, allow_private: bool,
                 limits: RenderLimits) -> None:
        self.origins = origins
        self.allow_private = allow_private
        self.limits = limits
        self.fetched = 0
        #: Refused requests by reason, kept with the image: why a page may look unstyled.
        self.refused: Counter[str] = Counter()
        self._client = addresses.guarded_http_client(allow_private=allow_private,
                                                     max_body_size=limits.resource_bytes)

    async def answer(self, route: Any) -> None:
        """Fulfil the request from its origin, or abort it."""
        fetched = await self._fetch(route.request.method, route.request.url)
        if isinstance(fetched, str):
            self.refused[fetched] += 1
            await route.abort("blockedbyclient")
            return
        self.fetched += 1
        status, headers, body = fetched
        await route.fulfill(status=status, headers=headers, body=body)

    async def _fetch(self, method: str, url: str) -> tuple[int, dict[str, str], bytes] | str:
        """The answer to the request, or why it was refused."""
        if method != "GET":
            return "not a GET"
        if origin_of(url) not in self.origins:
            return "not an allowed origin"
        if self.fetched + sum(self.refused.values()) >= self.limits.resources:
            return "too many requests"
        try:
            if not self.allow_private:
                await addresses.check_url(url)
            response = await self._client.fetch(
                url, follow_redirects=False, raise_error=False,
                connect_timeout=self.limits.resource_seconds,
                request_timeout=self.limits.resource_seconds,
                headers={"User-Agent": "visitor-service-heatmap", "Accept": "*/*"})
        except addresses.ForbiddenAddress:
            return "internal address"
        except (ValueError, OSError, HTTPClientError):
            return "failed"
        if 300 <= response.code < 400:
            return "redirect"  # its target is not checked, so it is not followed
        if response.code == 599:
            return "failed"
        headers = {name.lower(): value for name, value in response.headers.get_all()
                   if name.lower() in ("content-type", "access-control-allow-origin")}
        return response.code, headers, response.body or b""

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()


async def _screenshot(chromium_path: str, resources: SiteResources,
                      snapshot: list[dict[str, Any]], selectors: list[str], limits: RenderLimits
                      ) -> tuple[bytes, int, dict]:
    from playwright.async_api import async_playwright  # the worker's dependency only

    meta = snapshot[0]["data"]
    viewport = {"width": int(meta.get("width") or 1280), "height": int(meta.get("height") or 800)}
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium_path, headless=True,
                                                   args=CHROMIUM_FLAGS)
        try:
            page = await browser.new_page(viewport=viewport, service_workers="block")
            await page.route("**/*", resources.answer)
            await page.set_content("<!doctype html><html><head><meta http-equiv="
                                   f"'Content-Security-Policy' content=\"{RENDER_POLICY}\">"
                                   "</head><body style='margin:0'><div id='root'></div></body>"
                                   "</html>")
            await page.add_script_tag(content=REPLAYER.read_text(encoding="utf-8"))
            await page.evaluate("events => { window.replayer = svcReplay(events, "
                                "document.getElementById('root')); window.replayer.pause(0); }",
                                snapshot)
            await page.wait_for_timeout(limits.settle_ms)
            height = await page.evaluate(_SIZE, limits.height_px)
            await page.set_viewport_size({"width": viewport["width"], "height": height})
            boxes = await page.evaluate(_BOXES, selectors[:limits.selectors])
            png = await page.locator("#root iframe").screenshot(type="png")
        finally:
            await browser.close()
    return png, height, boxes


async def render_heatmap(store: Store, site: dict[str, Any], page: str, width: str, *,
                         chromium_path: str, limits: RenderLimits | None = None,
                         now: datetime | None = None, allow_private_addresses: bool = False
                         ) -> str | None:
    """Render and store the page's image at the width class; its file id, or None.

    None when the page is excluded from replay, when no recent recording shows it at that width
    on one of the site's allowed origins, or when a limit was hit (logged with the site id
    only). `allow_private_addresses` (HEATMAP_ALLOW_PRIVATE_ADDRESSES, off by default) lets the
    page's resources come from an allowed origin on a loopback or private address.
    """
    limits = limits or RenderLimits()
    if no_image_reason(site, page) is not None:
        return None
    found = await find_snapshot(store, site, page, width, limits)
    if found is None:
        return None
    recording, snapshot = found
    today = (now or datetime.now(UTC)).date()
    rows = await heatmaps.read_heatmap(store, site["_id"], page, width, "click",
                                       _day(today - timedelta(days=90)), _day(today))
    selectors = sorted({row["target"] for row in rows if row["target"]})
    for kind in ("rage_click", "dead_click"):
        rows = await heatmaps.read_heatmap(store, site["_id"], page, width, kind,
                                           _day(today - timedelta(days=90)), _day(today))
        selectors = sorted(set(selectors) | {row["target"] for row in rows if row["target"]})
    resources = SiteResources(allowed_origins(site), allow_private=allow_private_addresses,
                              limits=limits)
    try:
        async with asyncio.timeout(limits.seconds):
            png, height, boxes = await _screenshot(chromium_path, resources, snapshot,
                                                   selectors, limits)
    except TimeoutError:
        log.warning("heatmap render timed out", extra={"siteId": site["_id"]})
        return None
    finally:
        resources.close()
    if resources.refused:
        log.info("heatmap render refused requests of the recorded page",
                 extra={"siteId": site["_id"], "refused": dict(resources.refused)})
    if len(png) > limits.png_bytes:
        log.warning("heatmap image over the size limit", extra={"siteId": site["_id"]})
        return None
    return await heatmaps.store_heatmap(
        store, site["_id"], page, png, [recording["_id"]],
        details={"width": width, "viewportWidth": int(snapshot[0]["data"].get("width") or 0),
                 "height": height, "boxes": boxes, "renderedAt": now or datetime.now(UTC),
                 "requests": {"fetched": resources.fetched,
                              "refused": dict(resources.refused)}})


class HeatmapRenderer:
    """Works through the render requests the dashboard makes, in the background or on demand.

    Each request is leased, so several processes may run renderers side by side; one whose
    renderer died is taken up again when its lease runs out.
    """

    def __init__(self, store: Store, *, chromium_path: str, interval_seconds: float = 5.0,
                 lease_seconds: float = 120.0, limits: RenderLimits | None = None,
                 allow_private_addresses: bool = False) -> None:
        self.store = store
        self.chromium_path = chromium_path
        self.allow_private_addresses = allow_private_addresses
        self.interval = interval_seconds
        self.lease = timedelta(seconds=lease_seconds)
        self.limits = limits or RenderLimits()
        # A store outage must not end the loop; a browser's message can quote the recorded
        # page, so a failure is logged by its type only.
        self._loop = PeriodicTask("heatmap-renderer",
                                  [("heatmap renderer pass", self.render_waiting)],
                                  pause=lambda: self.interval, logger=log, traceback=False)

    async def render_waiting(self, limit: int = 10) -> int:
        """Handle up to `limit` waiting requests now; returns how many were handled."""
        handled = 0
        while handled < limit:
            request = await heatmaps.claim_render(self.store, datetime.now(UTC), self.lease)
            if request is None:
                break
            site = await sites.find_site(self.store, request["siteId"])
            if site is not None:
                try:
                    await render_heatmap(self.store, site, request["page"], request["width"],
                                         chromium_path=self.chromium_path, limits=self.limits,
                                         allow_private_addresses=self.allow_private_addresses)
                except Exception as exc:  # noqa: BLE001 - one broken page must not stop the others
                    # The type only: a browser's message can quote the recorded page.
                    log.error("heatmap render failed (%s)", type(exc).__name__,
                              extra={"siteId": site["_id"]})
            await heatmaps.finish_render(self.store, request["_id"])
            handled += 1
        return handled

    def start(self) -> bool:
        """Render in the background until `close`; False where there is no Chromium."""
        if not Path(self.chromium_path).exists():
            log.warning("no chromium: heatmap backgrounds are not rendered in this process")
            return False
        self._loop.start()
        return True

    async def close(self) -> None:
        """Stop the background loop."""
        await self._loop.close()
