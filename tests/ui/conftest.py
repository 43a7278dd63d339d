"""Dashboard fixtures: the real server on the port PUBLIC_URL names, seeded with the demo data.

The live socket accepts only PUBLIC_URL's origin, so the port is chosen before the settings are
read and the server then listens on exactly that port. The demo seeding is the one `make run`
uses, so these tests also show that a fresh dashboard has data to show.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import tornado.netutil
from playwright.async_api import Browser, Download, Page
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

import server
from config import Settings
from demo import demo_recording_events, seed_demo, seed_demo_activity
from tests.support.app import Answer

DEMO_PASSWORD = "demo password for the browser"
#: Demo visitors seeded by demo.py: Mia has two recordings and a lead, Jonas a lead.
MIA = "demo-visitor-mia"
JONAS = "demo-visitor-jonas"


@dataclass(frozen=True)
class Dashboard:
    """The running service and the demo owner's credentials and site."""

    url: str
    email: str
    password: str
    site_id: str
    api_key: str

    def page_url(self, path: str = "") -> str:
        """A dashboard page of the demo site."""
        return f"{self.url}/app/sites/{self.site_id}{path}"


@pytest.fixture
def dashboard_socket() -> list:
    """A listening socket on a free port, bound before the settings name it in PUBLIC_URL."""
    return tornado.netutil.bind_sockets(0, "127.0.0.1")


@pytest.fixture
def settings_env(settings_env: dict[str, str], dashboard_socket: list) -> dict[str, str]:
    """The shared test settings, with PUBLIC_URL at the dashboard's real origin."""
    port = dashboard_socket[0].getsockname()[1]
    return {**settings_env, "PUBLIC_URL": f"http://127.0.0.1:{port}"}


@pytest.fixture
async def dashboard(settings: Settings, deps: server.Deps, dashboard_socket: list
                    ) -> AsyncIterator[Dashboard]:
    """The service serving the dashboard, with the demo owner, site and demo data."""
    demo = await seed_demo(deps.store, deps.keyring, deps.auth.passwords,
                           email="owner@demo.example", password=DEMO_PASSWORD,
                           public_url=settings.public_url)
    await seed_demo_activity(deps, demo.siteId)
    await server.start_live(deps)
    app = server.make_app(settings, deps)
    http_server = server.make_http_server(settings, app)
    http_server.add_sockets(dashboard_socket)
    yield Dashboard(settings.public_url, demo.email, demo.password, demo.siteId, demo.apiKey)
    http_server.stop()
    await http_server.close_all_connections()


@pytest.fixture
async def page(browser: Browser, dashboard: Dashboard) -> AsyncIterator[Page]:  # noqa: F811
    """A fresh browser context and page at a laptop's width; console errors fail the test.

    It needs the dashboard so that it is closed before the dashboard's server stops: a live
    socket reconnecting in between logged ERR_CONNECTION_REFUSED once (CI at 56014bd)."""
    context = await browser.new_context(viewport={"width": 1280, "height": 860})
    opened = await context.new_page()
    problems: list[str] = []
    opened.on("console", lambda message: problems.append(message.text)
              if message.type == "error" else None)
    opened.on("pageerror", lambda error: problems.append(str(error)))
    yield opened
    await context.close()
    unexpected = [text for text in problems if "status of 40" not in text]
    assert not unexpected, f"the page logged errors: {unexpected}"


async def sign_in(page: Page, dashboard: Dashboard, email: str | None = None,
                  password: str | None = None) -> None:
    """Sign in through the login form and wait for the site switcher."""
    await page.goto(dashboard.url + "/")
    await page.get_by_label("E-mail").fill(email or dashboard.email)
    await page.get_by_label("Password").fill(password or dashboard.password)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_selector("#site-switcher")


async def ingest(dashboard: Dashboard, path: str, body: dict[str, Any] | bytes,
                 headers: dict[str, str] | None = None) -> Answer:
    """POST to an /ingest endpoint with the demo site's API key, as the shop's server would."""
    sent = {"X-Service-Key": dashboard.api_key, "Content-Type": "application/json",
            **(headers or {})}
    request = HTTPRequest(dashboard.url + path, "POST", headers=sent,
                          body=body if isinstance(body, bytes) else json.dumps(body))
    return Answer(await AsyncHTTPClient().fetch(request, raise_error=False))


async def record_page(dashboard: Dashboard, visitor_id: str, url: str) -> list[Answer]:
    """Start a recording of `url` and upload one replayable segment: the two ingest answers."""
    recording_id = str(uuid.uuid4())
    started = await ingest(dashboard, "/ingest/recordings/start", {
        "visitorId": visitor_id, "recordingId": recording_id, "url": url})
    events = demo_recording_events(url, int(datetime.now(UTC).timestamp() * 1000))
    segment = await ingest(dashboard, "/ingest/recordings/segment",
                           gzip.compress(json.dumps(events).encode()), {
                               "Content-Type": "application/octet-stream",
                               "X-Recording-Id": recording_id, "X-Segment-Seq": "0",
                               "X-Visitor-Id": visitor_id, "X-Page-Url": url})
    return [started, segment]


async def downloaded_text(download: Download) -> str:
    """The text of a file the page downloaded."""
    path = Path(await download.path())
    return await asyncio.to_thread(path.read_text, encoding="utf-8")
