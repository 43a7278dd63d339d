"""The local servers of a visit: the shop, the vendors' stub collector, and a counting proxy.

- The shop serves the product page with one tracker in its head, on its own origin
  (`http://localhost:PORT`), as a real shop is a different origin from every collector.
- The stub collector stands in for Sentry's and PostHog's hosts: it serves their scripts (the
  bundle built from @sentry/browser, posthog-js's `dist/` files as PostHog's asset host does),
  answers PostHog's remote config with session recording on, and accepts and counts every
  upload (Sentry's envelopes, PostHog's `/e/`, `/s/`, `/flags/`).
- The proxy sits between the page and our service process and counts what the page uploads to
  it; everything else passes unchanged, CORS preflights included.

Uploads are counted as request bodies (the bytes on the wire after each tracker's own
compression), per visit: `Uploads.reset()` between visits.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import tornado.httpserver
import tornado.netutil
import tornado.web
from tornado.httpclient import AsyncHTTPClient, HTTPRequest, HTTPResponse

from bench.page_cost.page import product_page

VENDORS = Path(__file__).resolve().parent / "vendors"
POSTHOG_DIST = VENDORS / "node_modules" / "posthog-js" / "dist"
SENTRY_BUNDLE = VENDORS / "dist" / "sentry.js"
POSTHOG_TOKEN = "phc_bench"
#: PostHog's remote config for a project with session recording on and the SDK's defaults
#: otherwise (autocapture on; no surveys, heatmaps, web vitals or feature flags).
POSTHOG_CONFIG = {
    "sessionRecording": {"endpoint": "/s/"}, "supportedCompression": ["gzip", "gzip-js"],
    "autocapture_opt_out": False, "capturePerformance": False, "heatmaps": False,
    "surveys": False, "hasFeatureFlags": False, "defaultIdentifiedOnly": True,
    "siteApps": [],
}


@dataclass
class Uploads:
    """What the page uploaded during the current visit."""

    bytes: int = 0
    requests: int = 0
    #: Uploads answered with an error: sent, but not taken.
    refused: int = 0
    by_path: Counter[str] = field(default_factory=Counter)

    def add(self, path: str, size: int) -> None:
        """Count one upload of `size` body bytes."""
        self.bytes += size
        self.requests += 1
        self.by_path[path] += size

    def reset(self) -> None:
        """Start counting a new visit."""
        self.bytes = self.requests = self.refused = 0
        self.by_path = Counter()


def _cors(handler: tornado.web.RequestHandler) -> None:
    origin = handler.request.headers.get("Origin")
    if origin:
        handler.set_header("Access-Control-Allow-Origin", origin)
        handler.set_header("Access-Control-Allow-Credentials", "true")
        handler.set_header("Vary", "Origin")


class _Collector(tornado.web.RequestHandler):
    """Everything a vendor's script fetches or sends, on one stub origin."""

    def initialize(self, uploads: Uploads) -> None:
        self.uploads = uploads

    def options(self, path: str) -> None:
        _cors(self)
        self.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
        asked = self.request.headers.get("Access-Control-Request-Headers")
        if asked:
            self.set_header("Access-Control-Allow-Headers", asked)
        self.set_status(204)

    def get(self, path: str) -> None:
        _cors(self)
        if path == "vendors/sentry.js":
            self._script(SENTRY_BUNDLE)
        elif path.startswith("static/") and path.endswith(".js"):
            # PostHog's asset host: array.js, then lazy-recorder.js and the like on demand.
            name = Path(path).name
            self._script(POSTHOG_DIST / name)
        elif path == f"array/{POSTHOG_TOKEN}/config.js":
            self.set_header("Content-Type", "application/javascript")
            self.finish("window._POSTHOG_REMOTE_CONFIG = window._POSTHOG_REMOTE_CONFIG || {};"
                        f"window._POSTHOG_REMOTE_CONFIG[{json.dumps(POSTHOG_TOKEN)}] = "
                        f"{{config: {json.dumps(POSTHOG_CONFIG)}, siteApps: []}};")
        elif path == f"array/{POSTHOG_TOKEN}/config":
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps(POSTHOG_CONFIG))
        else:
            self.set_status(404)
            self.finish()

    def _script(self, file: Path) -> None:
        if not file.is_file():
            self.set_status(404)
            self.finish()
            return
        self.set_header("Content-Type", "application/javascript")
        self.set_header("Cache-Control", "public, max-age=300")
        self.finish(file.read_bytes())

    def post(self, path: str) -> None:
        _cors(self)
        self.uploads.add("/" + path, len(self.request.body))
        self.set_header("Content-Type", "application/json")
        if path.startswith("flags"):
            self.finish(json.dumps({"flags": {}, "featureFlags": {},
                                    "featureFlagPayloads": {}, "errorsWhileComputingFlags": False}))
        else:  # Sentry's envelope answer, PostHog's capture answer
            self.finish(json.dumps({"status": 1}))


class _Proxy(tornado.web.RequestHandler):
    """Passes every request to our service and counts the bodies the page uploads.

    Our scripts (`/sdk/v1/*.js`) are kept after their first answer and served from here, as a
    CDN in front of the service would (their Cache-Control allows five minutes): the page gets
    them in one hop, as it gets the vendors' scripts from the stub, not two.
    """

    SUPPORTED_METHODS = ("GET", "HEAD", "POST", "OPTIONS", "PUT")
    DROPPED = {"host", "content-length", "connection", "transfer-encoding", "keep-alive"}

    def initialize(self, uploads: Uploads, upstream: str,
                   scripts: dict[str, HTTPResponse]) -> None:
        self.uploads, self.upstream, self.scripts = uploads, upstream, scripts

    async def _forward(self) -> None:
        request = self.request
        if request.method in ("POST", "PUT"):
            self.uploads.add(request.path, len(request.body))
        script = request.method == "GET" and request.path.startswith("/sdk/v1/") \
            and request.path.endswith(".js")
        answer = self.scripts.get(request.uri) if script else None
        if answer is None:
            answer = await self._fetch()
            if script and answer.code == 200:
                self.scripts[request.uri] = answer
        self._answer(answer)

    async def _fetch(self) -> HTTPResponse:
        request = self.request
        headers = {name: value for name, value in request.headers.get_all()
                   if name.lower() not in self.DROPPED}
        return await AsyncHTTPClient().fetch(HTTPRequest(
            self.upstream + request.uri, method=request.method, headers=headers,
            body=request.body if request.method in ("POST", "PUT") else None,
            follow_redirects=False, decompress_response=False, request_timeout=60,
            allow_nonstandard_methods=True), raise_error=False)

    def _answer(self, answer: HTTPResponse) -> None:
        request = self.request
        if request.method in ("POST", "PUT") and answer.code >= 400:
            self.uploads.refused += 1
        self.set_status(answer.code, answer.reason)
        self.clear_header("Content-Type")
        seen: set[str] = set()
        for name, value in answer.headers.get_all():
            if name.lower() in self.DROPPED:
                continue
            (self.add_header if name.lower() in seen else self.set_header)(name, value)
            seen.add(name.lower())
        if answer.body and answer.code not in (204, 304) and request.method != "HEAD":
            self.write(answer.body)
        self.finish()

    get = head = post = options = put = _forward  # type: ignore[assignment]


class _Shop(tornado.web.RequestHandler):
    def initialize(self, pages: dict[str, str]) -> None:
        self.pages = pages

    def get(self, tracker: str) -> None:
        self.set_header("Cache-Control", "no-store")
        if tracker == "blank":
            self.finish("<!doctype html><title>blank</title>")
        elif tracker in self.pages:
            self.finish(product_page(self.pages[tracker]))
        else:
            self.set_status(404)
            self.finish()


def listen(app: tornado.web.Application, host: str = "127.0.0.1"
           ) -> tuple[tornado.httpserver.HTTPServer, int]:
    """Serve the app on a free port of `host`; the server and its port."""
    sockets = tornado.netutil.bind_sockets(0, host)
    server = tornado.httpserver.HTTPServer(app, max_body_size=64 * 1024 * 1024)
    server.add_sockets(sockets)
    return server, sockets[0].getsockname()[1]


def collector_app(uploads: Uploads) -> tornado.web.Application:
    """The vendors' stub collector and script host."""
    return tornado.web.Application([(r"/(.*)", _Collector, {"uploads": uploads})])


def proxy_app(uploads: Uploads, upstream: str) -> tornado.web.Application:
    """The counting proxy in front of our service at `upstream`."""
    return tornado.web.Application([(r"/.*", _Proxy, {"uploads": uploads, "upstream": upstream,
                                                      "scripts": {}})])


def shop_app(pages: dict[str, str]) -> tornado.web.Application:
    """The shop: `/blank`, and `/{tracker}` for the product page with that tracker's head tags."""
    return tornado.web.Application([(r"/(\w+)", _Shop, {"pages": pages})])
