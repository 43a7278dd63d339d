"""The render job: a recording's full snapshot replayed in Debian's Chromium, stored as a PNG."""

from __future__ import annotations

import gzip
import json
import struct
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
import tornado.httpserver
import tornado.netutil
import tornado.web

from documents import heatmaps, recordings
from tasks.heatmaps import HeatmapRenderer, RenderLimits, render_due, render_heatmap
from tests.support.app import Tenant
from tests.support.browser import artifacts, chromium_path  # noqa: F401

CSS = "button#buy { display: block; width: 300px; height: 80px; margin-top: 400px; }"


class _Counted(tornado.web.RequestHandler):
    def initialize(self, hits: list[str], body: str, content_type: str) -> None:
        self.hits, self.body, self.content_type = hits, body, content_type

    def get(self) -> None:
        self.hits.append(self.request.path)
        self.set_header("Content-Type", self.content_type)
        self.finish(self.body)


async def _origin(hits: list[str], path: str, body: str, content_type: str
                  ) -> tuple[str, tornado.httpserver.HTTPServer]:
    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
    server = tornado.httpserver.HTTPServer(tornado.web.Application([
        (path, _Counted, {"hits": hits, "body": body, "content_type": content_type})]))
    server.add_sockets(sockets)
    return f"http://127.0.0.1:{sockets[0].getsockname()[1]}", server


@pytest.fixture
async def shop_tenant(make_tenant, origins) -> Tenant:
    """A tenant whose site allows the local shop's origin."""
    return await make_tenant("render", origins=(origins["shop"],))


#: The local test shop is on 127.0.0.1, which the renderer refuses unless told
#: (HEATMAP_ALLOW_PRIVATE_ADDRESSES); tests/heatmaps/test_render_ssrf.py holds the refusal.
LOCAL_SHOP = {"allow_private_addresses": True}


@pytest.fixture
async def origins() -> AsyncIterator[dict]:
    """The shop's origin (serving its stylesheet) and a foreign one, each counting requests."""
    shop_hits: list[str] = []
    foreign_hits: list[str] = []
    shop, shop_server = await _origin(shop_hits, r"/style.css", CSS, "text/css")
    foreign, foreign_server = await _origin(foreign_hits, r"/.*", "", "image/png")
    yield {"shop": shop, "foreign": foreign, "shop_hits": shop_hits,
           "foreign_hits": foreign_hits}
    for server in (shop_server, foreign_server):
        server.stop()
        await server.close_all_connections()


def _snapshot_events(page_url: str, css_url: str, foreign_url: str, width: int
                     ) -> list[dict]:
    def element(node_id: int, tag: str, children: list, attributes: dict | None = None):
        return {"type": 2, "tagName": tag, "attributes": attributes or {},
                "childNodes": children, "id": node_id}

    body = element(5, "body", [
        element(6, "h1", [{"type": 3, "textContent": "Blue mug", "id": 7}]),
        element(8, "img", [], {"src": foreign_url, "alt": "tracker"}),
        element(10, "button", [{"type": 3, "textContent": "Add to cart", "id": 11}],
                {"id": "buy"}),
        element(12, "div", [], {"style": "height: 1500px"}),
    ])
    head = element(3, "head", [element(4, "link", [], {"rel": "stylesheet", "href": css_url})])
    snapshot = {"type": 0, "id": 1, "childNodes": [
        {"type": 1, "name": "html", "publicId": "", "systemId": "", "id": 2},
        element(13, "html", [head, body])]}
    return [{"type": 4, "data": {"href": page_url, "width": width, "height": 700},
             "timestamp": 1000},
            {"type": 2, "data": {"node": snapshot, "initialOffset": {"top": 0, "left": 0}},
             "timestamp": 1010}]


async def recorded_page(store, site_id: str, page_url: str, events: list[dict]) -> str:
    """A finished recording of `page_url` with one checked, replayable segment."""
    recording_id = str(uuid.uuid4())
    now = datetime.now(UTC)
    document = recordings.new_recording(recording_id, site_id, "render-visitor", None, now)
    document.update({"status": "ended", "pages": [{"url": page_url, "at": now}],
                     "lastPageUrl": page_url})
    await store.collection("recordings").insert_one(document)
    await recordings.save_segment(store, str(uuid.uuid4()), gzip.compress(
        json.dumps(events).encode()), {
        "siteId": site_id, "recordingId": recording_id, "visitorId": "render-visitor",
        "sentFor": recording_id, "seq": 0, "startedAt": now, "consoleChecked": True,
        "rejected": None})
    return recording_id


def _png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", png[16:24])


async def test_the_render_job_stores_a_full_page_png_fetching_only_the_sites_origin(
        deps, shop_tenant: Tenant, origins, chromium_path, artifacts):  # noqa: F811
    tenant = shop_tenant
    page_url = f"{origins['shop']}/product/blue-mug?colour=blue"
    recording_id = await recorded_page(deps.store, tenant.site_id, page_url, _snapshot_events(
        page_url, f"{origins['shop']}/style.css", f"{origins['foreign']}/pixel.png", 1280))
    await heatmaps.add_to_aggregates(deps.store, tenant.site_id, [heatmaps.contribution(
        {"kind": "click", "at": datetime.now(UTC), "selector": "button#buy", "ox": 0.5,
         "oy": 0.5, "vw": 1280, "x": 1, "y": 1}, "/product/blue-mug")])

    file_id = await render_heatmap(deps.store, await _site(deps, tenant), "/product/blue-mug",
                                   "desktop", chromium_path=chromium_path, **LOCAL_SHOP)

    assert file_id is not None
    image = await deps.store.bucket(heatmaps.BUCKET).files.find_one({"_id": file_id})
    meta = image["metadata"]
    assert meta["sourceRecordingIds"] == [recording_id]
    assert meta["width"] == "desktop" and meta["viewportWidth"] == 1280
    png = await heatmaps.read_image(deps.store, tenant.site_id, file_id)
    artifacts("background.png").write_bytes(png)
    assert _png_size(png) == (1280, meta["height"]) and meta["height"] > 1500
    # The site's own stylesheet laid the button out; the foreign image was never requested.
    left, top, width, height = meta["boxes"]["button#buy"]
    assert (width, height) == (300, 80) and top > 400
    assert origins["shop_hits"] == ["/style.css"] and origins["foreign_hits"] == []
    assert meta["requests"]["fetched"] == 1
    assert not render_due(image, datetime.now(UTC))


async def test_a_page_at_a_width_no_recording_shows_gets_no_image(
        deps, shop_tenant: Tenant, origins, chromium_path):  # noqa: F811
    tenant = shop_tenant
    page_url = f"{origins['shop']}/cart"
    await recorded_page(deps.store, tenant.site_id, page_url, _snapshot_events(
        page_url, f"{origins['shop']}/style.css", f"{origins['foreign']}/p.png", 1280))

    site = await _site(deps, tenant)
    assert await render_heatmap(deps.store, site, "/cart", "phone",
                                chromium_path=chromium_path, **LOCAL_SHOP) is None
    assert await render_heatmap(deps.store, site, "/elsewhere", "desktop",
                                chromium_path=chromium_path, **LOCAL_SHOP) is None
    assert await deps.store.bucket(heatmaps.BUCKET).files.count_documents({}) == 0


async def test_a_page_excluded_from_replay_is_never_rendered(
        deps, make_tenant, origins, chromium_path):  # noqa: F811
    tenant = await make_tenant("excluding", origins=(origins["shop"],), settings={
        "excludedUrls": [{"pattern": "/cart*", "scope": "replay"}]})
    page_url = f"{origins['shop']}/cart"
    await recorded_page(deps.store, tenant.site_id, page_url, _snapshot_events(
        page_url, f"{origins['shop']}/style.css", f"{origins['foreign']}/p.png", 1280))

    assert await render_heatmap(deps.store, await _site(deps, tenant), "/cart", "desktop",
                                chromium_path=chromium_path, **LOCAL_SHOP) is None
    assert origins["shop_hits"] == []


async def test_a_page_taller_than_the_limit_is_cut_at_the_limit(
        deps, shop_tenant: Tenant, origins, chromium_path):  # noqa: F811
    tenant = shop_tenant
    page_url = f"{origins['shop']}/tall"
    await recorded_page(deps.store, tenant.site_id, page_url, _snapshot_events(
        page_url, f"{origins['shop']}/style.css", f"{origins['foreign']}/p.png", 390))

    file_id = await render_heatmap(deps.store, await _site(deps, tenant), "/tall", "phone",
                                   chromium_path=chromium_path,
                                   limits=RenderLimits(height_px=600), **LOCAL_SHOP)

    png = await heatmaps.read_image(deps.store, tenant.site_id, file_id)
    assert _png_size(png) == (390, 600)


async def _site(deps, tenant: Tenant) -> dict:
    return await deps.store.collection("sites").find_one({"_id": tenant.site_id})


async def test_a_heatmap_looked_at_without_an_image_is_rendered_in_the_background_once(
        fetch, deps, shop_tenant: Tenant, origins, chromium_path):  # noqa: F811
    tenant = shop_tenant
    page_url = f"{origins['shop']}/cart"
    recording_id = await recorded_page(deps.store, tenant.site_id, page_url, _snapshot_events(
        page_url, f"{origins['shop']}/style.css", f"{origins['foreign']}/p.png", 1280))
    path = f"/api/v1/sites/{tenant.site_id}/heatmaps/page?page=/cart&width=desktop"

    for _ in range(2):
        before = (await fetch(path, token=tenant.token)).json()
        assert before["image"] is None and before["noImage"] == "no_recording_rendered"
    assert await deps.store.collection(heatmaps.RENDERS).count_documents({}) == 1
    renderer = HeatmapRenderer(deps.store, chromium_path=chromium_path, **LOCAL_SHOP)
    assert await renderer.render_waiting() == 1

    after = (await fetch(path, token=tenant.token)).json()
    assert after["image"]["recordings"] == 1 and after["noImage"] is None
    image = await heatmaps.latest_image(deps.store, tenant.site_id, "/cart", "desktop")
    assert image["metadata"]["sourceRecordingIds"] == [recording_id]
    # A current image asks for nothing more.
    assert await deps.store.collection(heatmaps.RENDERS).count_documents({}) == 0
