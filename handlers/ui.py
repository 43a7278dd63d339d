"""The dashboard web UI: one static HTML shell and its built assets, from the API's origin.

The shell carries no data and no credentials; the page's modules sign in through /auth and read
everything from the JSON API with an access token held in memory. So both routes are public
(authentication "none"), and both send a strict Content-Security-Policy: scripts only from this
origin, no inline script, connections only to this origin and its live socket, never framed.
The assets are built from dashboard/ into static/dist by `make run` / `make test` (esbuild).
Only the embedded demo's shell names the demo credentials file, so the sign-in page's hint
about `make run` never shows in production.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, ClassVar

import tornado.web

from handlers.base import CODE_FOR_STATUS, BaseHandler, allowed_methods
from handlers.site_api import PLUGIN_ARCHIVE, PLUGIN_ROOT, plugin_archive, security_headers

#: static/: index.html (the shell) and dist/ (the built modules and styles, git-ignored).
STATIC_ROOT = Path(__file__).resolve().parent.parent / "static"
class DashboardShellHandler(BaseHandler):
    """GET / and /app/...: the single-page shell; the page's router reads the path."""

    authentication = "none"

    def set_default_headers(self) -> None:
        super().set_default_headers()
        self.set_header("Content-Type", "text/html; charset=utf-8")
        for name, value in security_headers(self.deps.settings.public_url).items():
            self.set_header(name, value)

    async def get(self, *_: str) -> None:
        shell = (STATIC_ROOT / "index.html").read_text(encoding="utf-8")
        settings = self.deps.settings
        if settings.embedded:
            # The embedded store is the `make run` demo: the sign-in page may say where its
            # printed credentials are kept. A data attribute, because scripts must not be inline.
            demo_file = html.escape(settings.demo_file, quote=True)
            shell = shell.replace("<body>", f'<body data-demo-file="{demo_file}">', 1)
        self.finish(shell.encode())


class DashboardAssetHandler(tornado.web.StaticFileHandler):
    """GET /static/...: the shell's modules, styles and icons, with ETags for revalidation."""

    authentication: ClassVar[str] = "none"

    def set_default_headers(self) -> None:
        self.clear_header("Server")
        deps: Any = self.application.settings["deps"]
        for name, value in security_headers(deps.settings.public_url).items():
            self.set_header(name, value)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        # Tornado's own page is HTML; every answer of the service uses the one error shape.
        if status_code == 405:
            self.set_header("Allow", allowed_methods(self))
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(json.dumps({"error": {"code": CODE_FOR_STATUS.get(status_code, "error"),
                                          "message": self._reason}}))

    def set_extra_headers(self, path: str) -> None:
        # Built files keep their names across builds, so each use revalidates by ETag.
        self.set_header("Cache-Control", "no-cache")


class DashboardIconHandler(DashboardAssetHandler):
    """GET /favicon.ico: the icon browsers ask for on their own; answering it keeps a 404 out
    of every page load's log."""

    async def get(self, path: str = "", include_body: bool = True) -> None:
        await super().get("favicon.ico", include_body)

    def get_content_type(self) -> str:
        # The type browsers and the API document name, not the registry's vnd.microsoft.icon.
        return "image/x-icon"


class PluginArchiveHandler(DashboardAssetHandler):
    """GET /downloads/visitor-service.zip: the WordPress plugin as `make plugin-zip` built it,
    a 404 when it was not built on this server (the dashboard then says how to build it)."""

    def initialize(self, path: str, default_filename: str | None = None) -> None:
        super().initialize(str(plugin_archive().parent), default_filename)

    async def get(self, path: str = "", include_body: bool = True) -> None:
        await super().get(PLUGIN_ARCHIVE, include_body)

    def get_content_type(self) -> str:
        return "application/zip"

    def set_extra_headers(self, path: str) -> None:
        super().set_extra_headers(path)
        self.set_header("Content-Disposition", f'attachment; filename="{PLUGIN_ARCHIVE}"')


default_handlers = [
    (r"/", DashboardShellHandler),
    (r"/app/(.*)", DashboardShellHandler),
    (r"/static/(.*)", DashboardAssetHandler, {"path": str(STATIC_ROOT)}),
    (r"/favicon\.ico", DashboardIconHandler, {"path": str(STATIC_ROOT)}),
    (r"/downloads/visitor-service\.zip", PluginArchiveHandler, {"path": str(PLUGIN_ROOT)}),
]
