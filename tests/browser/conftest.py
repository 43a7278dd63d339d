"""Browser fixtures: Debian's Chromium driven by Playwright, the service, and local test shops.

The service runs as in the other tests, plus a record of every request it answered. Each shop is
a tiny Tornado app on its own localhost port, so it is a different origin from the service, as a
real shop is. Chromium is /usr/bin/chromium (`make system-deps` installs it); no browser is ever
downloaded.
"""

from __future__ import annotations

import gzip
import html
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import tornado.httpserver
import tornado.netutil
import tornado.web
from playwright.async_api import Page

import server
from config import Settings
from handlers.sdk import SDK_DIST
from tests.support.app import Tenant
from tests.support.service import Service

SHOP_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<script>window.svc = window.svc || function () {{ (svc.q = svc.q || []).push(arguments); }};
</script>
<script async src="{service}/sdk/v1/loader.js?key={key}"{statement}></script>
</head><body>
<h1>{title}</h1>
<button id="grow" onclick="document.getElementById('list').appendChild(
  document.createElement('li')).textContent = 'added'">Add to cart</button>
<button id="rage" onclick="document.getElementById('count').textContent++">Buy now</button>
<span id="count">0</span>
<button id="dead">Does nothing</button>
<button id="boom" onclick="throw new TypeError('the mug broke')">Break the mug</button>
<form onsubmit="return false">
  <label>E-mail <input id="email" type="email" name="email"></label>
  <label>Password <input id="password" type="password" name="password"></label>
</form>
<ul id="list"></ul>
<a id="next" href="/page2">Next page</a>
<div style="height: 3000px; background: linear-gradient(#fff, #ccd)">Reviews</div>
<p id="bottom">The end</p>
</body></html>
"""

REPLAY_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Replay</title>
<script src="/dist/replayer.js"></script></head>
<body><div id="root"></div></body></html>
"""


@dataclass
class Shop:
    """A test shop page on its own origin, loading the loader with one site's key."""

    origin: str
    tenant: Tenant

    def page(self, path: str = "/") -> str:
        """The URL of a page of this shop."""
        return self.origin + path


@pytest.fixture
async def service(settings: Settings, deps: server.Deps) -> AsyncIterator[Service]:
    """The service for the browser, recording each request as the access log sees it."""
    running = Service(server.make_app(settings, deps), settings)
    yield running
    await running.stop()


class _ShopPage(tornado.web.RequestHandler):
    def initialize(self, service: str, key: str, statement: str | None) -> None:
        self.service, self.key, self.statement = service, key, statement

    def get(self, name: str) -> None:
        attribute = (f' data-product-statement="{html.escape(self.statement)}"'
                     if self.statement else "")
        title = "Blue mug" if name == "" else "Second page"
        self.finish(SHOP_PAGE.format(title=title, service=self.service, key=self.key,
                                     statement=attribute))


class _ReplayPage(tornado.web.RequestHandler):
    def get(self) -> None:
        self.finish(REPLAY_PAGE)


ShopFactory = Callable[..., Awaitable[Shop]]


@pytest.fixture
async def open_shop(service: Service, make_tenant) -> AsyncIterator[ShopFactory]:
    """open_shop(settings=, allowed=True): a shop origin and a site that allows it (or not)."""
    servers: list[tornado.httpserver.HTTPServer] = []

    async def open_one(settings: dict[str, Any] | None = None, *, tenant: Tenant | None = None,
                       statement: str | None = None) -> Shop:
        sockets = tornado.netutil.bind_sockets(0, "localhost")
        origin = f"http://localhost:{sockets[0].getsockname()[1]}"
        if tenant is None:
            tenant = await make_tenant(origins=(origin,), settings=settings or {})
        app = tornado.web.Application([
            (r"/(|page2)", _ShopPage, {"service": service.url, "key": tenant.public_key,
                                       "statement": statement}),
            (r"/replay", _ReplayPage),
            (r"/dist/(.*)", tornado.web.StaticFileHandler, {"path": str(SDK_DIST)}),
        ])
        http_server = tornado.httpserver.HTTPServer(app)
        http_server.add_sockets(sockets)
        servers.append(http_server)
        return Shop(origin, tenant)

    yield open_one
    for http_server in servers:
        http_server.stop()
        await http_server.close_all_connections()


async def click_around_the_shop_page(page: Page) -> None:
    """On SHOP_PAGE: a click that changes the page (#grow), a rage click (four quick clicks on
    #rage), a dead click (#dead) and a scroll to the bottom. A dead click is one with no effect
    for a second: the caller waits that out before the page is left."""
    await page.click("#grow")
    box = await page.locator("#rage").bounding_box()
    for _ in range(4):
        await page.mouse.click(box["x"] + 5, box["y"] + 5)
    await page.click("#dead")
    await page.mouse.wheel(0, 5000)


async def stored_segments(store: Any, site_id: str) -> list[tuple[dict[str, Any], bytes]]:
    """Every stored segment of a site, in recording order, with its decompressed bytes."""
    bucket = store.bucket("segments")
    files = [doc async for doc in bucket.files.find({"metadata.siteId": site_id})]
    files.sort(key=lambda doc: (doc["metadata"].get("recordingId"), doc["metadata"]["seq"]))
    segments = []
    for doc in files:
        data = b"".join([chunk async for chunk in bucket.read_chunks(doc["_id"])])
        segments.append((doc, gzip.decompress(data)))
    return segments
