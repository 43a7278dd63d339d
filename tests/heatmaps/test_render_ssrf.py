"""The heatmap renderer cannot be turned against the service (SSRF, issue 28).

A recording is whatever its uploader wrote: through the site API key, or through the public key
with a spoofed Origin. Its page address or its stylesheets may point at loopback, a private
network or the cloud metadata address; the renderer must fetch nothing there and draw nothing
from it. A local server on 127.0.0.1 counts what reaches it; it must receive nothing.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
import tornado.httpserver
import tornado.netutil
import tornado.web

from documents import heatmaps
from tasks.heatmaps import HeatmapRenderer, render_heatmap
from tests.heatmaps.test_render import recorded_page
from tests.support.app import Fetch, Tenant
from tests.support.browser import chromium_path  # noqa: F401

SHOP = "https://shop.example"
PAGE = "/product/blue-mug"
#: The stylesheet an internal server would serve: it would lay the button out at 300 x 80.
CSS = "button#buy { display: block; width: 300px; height: 80px; margin-top: 400px; }"


class _Counting(tornado.web.RequestHandler):
    def initialize(self, hits: list[str]) -> None:
        self.hits = hits

    def get(self, *_: str) -> None:
        self.hits.append(self.request.path)
        if self.request.path.startswith("/moved"):
            self.redirect(self.get_query_argument("to"))
            return
        self.set_header("Content-Type", "text/css")
        self.finish(CSS)


@pytest.fixture
async def internal() -> AsyncIterator[dict[str, Any]]:
    """A server on 127.0.0.1 standing for anything internal (/metrics, an admin page)."""
    hits: list[str] = []
    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
    server = tornado.httpserver.HTTPServer(tornado.web.Application([
        (r"/(.*)", _Counting, {"hits": hits})]))
    server.add_sockets(sockets)
    port = sockets[0].getsockname()[1]
    yield {"origin": f"http://127.0.0.1:{port}", "port": port, "hits": hits}
    server.stop()
    await server.close_all_connections()


def _events(page_url: str, stylesheets: list[str]) -> list[dict[str, Any]]:
    """A meta event at `page_url` and a full snapshot linking `stylesheets`."""
    def element(node_id: int, tag: str, children: list, attributes: dict | None = None):
        return {"type": 2, "tagName": tag, "attributes": attributes or {},
                "childNodes": children, "id": node_id}

    links = [element(100 + n, "link", [], {"rel": "stylesheet", "href": href})
             for n, href in enumerate(stylesheets)]
    body = element(5, "body", [
        element(10, "button", [{"type": 3, "textContent": "Add to cart", "id": 11}],
                {"id": "buy"})])
    snapshot = {"type": 0, "id": 1, "childNodes": [
        {"type": 1, "name": "html", "publicId": "", "systemId": "", "id": 2},
        element(13, "html", [element(3, "head", links), body])]}
    return [{"type": 4, "data": {"href": page_url, "width": 1280, "height": 700},
             "timestamp": 1000},
            {"type": 2, "data": {"node": snapshot, "initialOffset": {"top": 0, "left": 0}},
             "timestamp": 1010}]


async def _upload_with_api_key(fetch: Fetch, tenant: Tenant, page_url: str,
                               events: list[dict[str, Any]]) -> None:
    key = {"X-Service-Key": tenant.api_key}
    started = await fetch("/ingest/recordings/start", "POST", headers=key, json_body={
        "visitorId": "v-ssrf", "sessionId": "s-1", "url": page_url})
    assert started.code == 200, started
    segment = await fetch("/ingest/recordings/segment", "POST",
                          body=gzip.compress(json.dumps(events).encode()), headers={
                              **key, "Content-Type": "application/octet-stream",
                              "X-Recording-Id": started.json()["id"], "X-Segment-Seq": "0",
                              "X-Visitor-Id": "v-ssrf", "X-Session-Id": "s-1",
                              "X-Page-Url": page_url})
    assert segment.code == 200, segment


async def _upload_with_public_key(fetch: Fetch, tenant: Tenant, page_url: str,
                                  events: list[dict[str, Any]]) -> None:
    """As a script anywhere can: the site's public key, and an Origin header the site allows."""
    spoofed = {"Origin": SHOP}
    started = await fetch(f"/sdk/v1/{tenant.public_key}/recordings/start", "POST",
                          body=json.dumps({"visitorId": "v-ssrf", "url": page_url}),
                          headers={**spoofed, "Content-Type": "text/plain"})
    assert started.code == 200, started
    segment = await fetch(f"/sdk/v1/{tenant.public_key}/recordings/segment", "POST",
                          body=gzip.compress(json.dumps(events).encode()), headers={
                              **spoofed, "Content-Type": "application/octet-stream",
                              "X-Recording-Id": started.json()["id"], "X-Segment-Seq": "0",
                              "X-Visitor-Id": "v-ssrf", "X-Page-Url": page_url})
    assert segment.code == 200, segment


async def _clicked(deps, tenant: Tenant) -> None:
    """A click on the button, so that the image keeps the button's box."""
    await heatmaps.add_to_aggregates(deps.store, tenant.site_id, [heatmaps.contribution(
        {"kind": "click", "at": datetime.now(UTC), "selector": "button#buy", "ox": 0.5,
         "oy": 0.5, "vw": 1280, "x": 1, "y": 1}, PAGE)])


UPLOADS = {"api key": _upload_with_api_key, "public key": _upload_with_public_key}


async def _owner_opens_the_heatmap(fetch: Fetch, deps, tenant: Tenant, chromium: str
                                   ) -> dict[str, Any]:
    """The owner opens the page's heatmap; the renderer, as the server runs it, works through
    the request; the owner looks again."""
    await deps.segment_sweeper.sweep()
    path = f"/api/v1/sites/{tenant.site_id}/heatmaps/page?page={PAGE}&width=desktop"
    assert (await fetch(path, token=tenant.token)).code == 200
    assert await HeatmapRenderer(deps.store, chromium_path=chromium).render_waiting() == 1
    return (await fetch(path, token=tenant.token)).json()


@pytest.mark.parametrize("upload", UPLOADS)
@pytest.mark.parametrize("where", ["loopback", "private", "metadata"])
async def test_a_recording_whose_page_address_is_internal_is_never_rendered(
        fetch: Fetch, deps, tenant: Tenant, internal, chromium_path, upload: str,  # noqa: F811
        where: str):
    page_origin = {"loopback": internal["origin"], "private": "http://10.1.2.3",
                   "metadata": "http://169.254.169.254"}[where]
    page_url = page_origin + PAGE
    await UPLOADS[upload](fetch, tenant, page_url, _events(page_url, [
        f"{page_origin}/style.css", f"{internal['origin']}/metrics"]))

    view = await _owner_opens_the_heatmap(fetch, deps, tenant, chromium_path)

    assert internal["hits"] == []
    assert view["image"] is None and view["noImage"] == "no_recording_rendered"
    assert await deps.store.bucket(heatmaps.BUCKET).files.count_documents({}) == 0


@pytest.mark.parametrize("upload", UPLOADS)
async def test_stylesheets_of_a_shop_page_that_point_inside_the_network_are_not_fetched(
        fetch: Fetch, deps, tenant: Tenant, internal, chromium_path, upload: str):  # noqa: F811
    page_url = SHOP + PAGE
    port = internal["port"]
    await UPLOADS[upload](fetch, tenant, page_url, _events(page_url, [
        f"{internal['origin']}/metrics", f"http://localhost:{port}/a.css",
        f"http://[::ffff:127.0.0.1]:{port}/b.css", f"http://[64:ff9b::7f00:1]:{port}/c.css",
        f"http://[2002:7f00:1::1]:{port}/d.css", "http://10.1.2.3/e.css",
        "http://169.254.169.254/latest/meta-data/f.css", "file:///etc/passwd",
        f"data:text/css,{CSS}"]))

    await _clicked(deps, tenant)

    view = await _owner_opens_the_heatmap(fetch, deps, tenant, chromium_path)

    assert internal["hits"] == []
    image = await heatmaps.latest_image(deps.store, tenant.site_id, PAGE, "desktop")
    assert view["image"]["id"] == image["_id"]
    assert image["metadata"]["requests"]["fetched"] == 0
    # None of those stylesheets laid the button out.
    assert view["image"]["boxes"]["button#buy"][2] != 300


INTERNAL_ORIGINS = {
    "loopback": "{origin}",
    "localhost": "http://localhost:{port}",
    "IPv4-mapped loopback": "http://[::ffff:7f00:1]:{port}",
    "NAT64 loopback": "http://[64:ff9b::7f00:1]:{port}",
    "6to4 loopback": "http://[2002:7f00:1::1]:{port}",
    "private": "http://10.1.2.3",
    "metadata": "http://169.254.169.254",
    "IPv6 metadata": "http://[fd00:ec2::254]",
}


@pytest.mark.parametrize("where", INTERNAL_ORIGINS)
async def test_an_allowed_origin_on_an_internal_address_is_refused_by_default(
        deps, make_tenant, internal, chromium_path, where: str):  # noqa: F811
    origin = INTERNAL_ORIGINS[where].format(**internal)
    tenant = await make_tenant("internal", origins=(origin,))
    site = await deps.store.collection("sites").find_one({"_id": tenant.site_id})
    page_url = site["allowedOrigins"][0] + PAGE
    await recorded_page(deps.store, tenant.site_id, page_url,
                        _events(page_url, [f"{page_url}/style.css"]))
    await _clicked(deps, tenant)

    file_id = await render_heatmap(deps.store, site, PAGE, "desktop",
                                   chromium_path=chromium_path)

    assert internal["hits"] == []
    image = await deps.store.bucket(heatmaps.BUCKET).files.find_one({"_id": file_id})
    assert image["metadata"]["requests"] == {"fetched": 0, "refused": {"internal address": 1}}
    assert image["metadata"]["boxes"]["button#buy"][2] != 300


async def test_a_redirect_from_an_allowed_origin_is_not_followed(
        deps, make_tenant, internal, chromium_path):  # noqa: F811
    """Even with HEATMAP_ALLOW_PRIVATE_ADDRESSES (the test shop is local), no hop elsewhere."""
    tenant = await make_tenant("redirecting", origins=(internal["origin"],))
    site = await deps.store.collection("sites").find_one({"_id": tenant.site_id})
    page_url = internal["origin"] + PAGE
    elsewhere = f"http://localhost:{internal['port']}/metrics"
    await recorded_page(deps.store, tenant.site_id, page_url, _events(page_url, [
        f"{internal['origin']}/moved?to={elsewhere}"]))

    file_id = await render_heatmap(deps.store, site, PAGE, "desktop",
                                   chromium_path=chromium_path, allow_private_addresses=True)

    assert internal["hits"] == ["/moved"]
    image = await deps.store.bucket(heatmaps.BUCKET).files.find_one({"_id": file_id})
    assert image["metadata"]["requests"] == {"fetched": 0, "refused": {"redirect": 1}}
