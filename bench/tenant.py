"""The benchmarks' tenant: an app with fresh keys, one owner with one site, served over HTTP.

The dashboard, DSR and heatmaps benchmarks each measure a site through the real API; this builds
that site the same way for all of them and signs its owner in.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from typing import Any

import tornado.httpserver
import tornado.netutil

import server
from config import Settings, load_settings
from documents import accounts

EMAIL = "bench@example.com"
PASSWORD = "bench pass 1"


@dataclass
class Served:
    """The app listening on a free local port, and the owner's access token for it."""

    http: tornado.httpserver.HTTPServer
    base_url: str
    token: str


@dataclass
class BenchTenant:
    """The settings and dependencies of a benchmark's app, and the site its owner has."""

    settings: Settings
    deps: server.Deps
    site: dict[str, Any]

    async def serve(self) -> Served:
        """Serve the app on 127.0.0.1 and sign the owner in; the caller stops `http`."""
        http = server.make_http_server(self.settings, server.make_app(self.settings, self.deps))
        sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
        http.add_sockets(sockets)
        return Served(http, f"http://127.0.0.1:{sockets[0].getsockname()[1]}",
                      await self.sign_in())

    async def sign_in(self) -> str:
        """A fresh access token of the owner (one lives 15 minutes, as the dashboard's does)."""
        return (await self.deps.auth.login(EMAIL, PASSWORD, "127.0.0.1")).access_token


async def create_tenant(environ: dict[str, str] | None = None) -> BenchTenant:
    """Settings with fresh keys (plus `environ`, e.g. the store), the app's dependencies, and
    an owner with one site."""
    settings = load_settings({
        "SECRET_KEY": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "MASTER_KEY": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "LOG_LEVEL": "ERROR", **(environ or {})})
    deps = await server.build_deps(settings)
    created = await accounts.create_account(
        deps.store, email=EMAIL, password_hash=await deps.auth.passwords.hash(PASSWORD),
        display_name="Bench", account_name="Bench", organization_name="Bench")
    user = await accounts.load_authenticated_user(deps.store, created["userId"], "")
    assert user is not None
    site, _ = await deps.keyring.create_site(user, created["organizationId"], "Bench", [], {})
    return BenchTenant(settings, deps, site)
