"""Fixtures for the plugin's tests: one real WordPress per run, the service per test.

The WordPress (tests/support/wordpress.py) is provisioned once per session; each test gets the
service on its own port, a fresh tenant whose allowed origin is the shop, and the plugin pointed
at both through PHP run inside WordPress (which also runs "Check connection"). PHP reaches the
service while tests wait, so everything that may make WordPress call the service is awaited,
never blocking the event loop the service runs in.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import BrowserContext, Page
from tornado.httpclient import AsyncHTTPClient, HTTPRequest, HTTPResponse

import server
from config import Settings
from tests.support.app import Tenant
from tests.support.service import Service
from tests.support.wordpress import WordPress, running_wordpress


@pytest.fixture(scope="session")
def wordpress(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WordPress]:
    """A real WordPress with the plugin active, behind a full-page cache (session-wide)."""
    root: Path = tmp_path_factory.mktemp("wordpress")
    try:
        context = running_wordpress(root)
        wp = context.__enter__()
    except RuntimeError as failure:
        pytest.fail(f"WordPress could not be provisioned: {failure}")
    try:
        yield wp
    finally:
        context.__exit__(None, None, None)
        shutil.rmtree(root, ignore_errors=True)  # about 175 MB: WordPress and its database


@pytest.fixture(autouse=True)
def database_up(wordpress: WordPress) -> None:
    """Each WordPress test starts with its database running, even after mariadbd crashed under
    an earlier one (tests/support/wordpress.py)."""
    wordpress.restart_database_if_it_died()


@pytest.fixture
async def service(settings: Settings, deps: server.Deps) -> AsyncIterator[Service]:
    """The real service, reachable from PHP and Chromium."""
    await server.start_live(deps)
    running = Service(server.make_app(settings, deps), settings)
    yield running
    await running.stop()


@dataclass
class Shop:
    """The WordPress shop, configured for one tenant of the running service."""

    wp: WordPress
    tenant: Tenant
    service: Service
    check: dict[str, Any]

    @property
    def url(self) -> str:
        return self.wp.url

    async def http(self, path: str, method: str = "GET", *, body: str | bytes | None = None,
                   headers: dict[str, str] | None = None) -> HTTPResponse:
        """A request to the shop (through its page cache), as a plain HTTP client."""
        if body is None and method == "POST":
            body = b""
        request = HTTPRequest(self.wp.url + path, method=method, body=body,
                              headers=headers or {}, follow_redirects=False, request_timeout=30)
        return await AsyncHTTPClient().fetch(request, raise_error=False)


ShopFactory = Callable[..., Awaitable[Shop]]


@pytest.fixture
async def open_shop(wordpress: WordPress, service: Service, make_tenant) -> ShopFactory:
    """open_shop(settings=): a tenant allowing the shop's origin, the plugin pointed at it."""

    async def open_one(settings: dict[str, Any] | None = None) -> Shop:
        tenant = await make_tenant(origins=(wordpress.url,), settings=settings or {})
        check = await wordpress.php(f"""
            update_option('visitor_service_url', '{service.url}');
            update_option('visitor_service_public_key', '{tenant.public_key}');
            \\VisitorService\\Options::saveApiKey('{tenant.api_key}');
            delete_option('visitor_service_dropped');
            delete_option('visitor_service_last_check');
            delete_option('visitor_service_delivery_hold');
            delete_option('visitor_service_paused');
            delete_option('fake_as_actions');  // Action Scheduler's queue (the stand-in's)
            wp_clear_scheduled_hook('visitor_service_deliver');
            global $wpdb;  // and the per-address counters: every test comes from 127.0.0.1
            $wpdb->query("DELETE FROM $wpdb->options
                WHERE option_name LIKE '\\_transient%visitor\\_service\\_rl\\_%'");
            $wpdb->query('TRUNCATE TABLE ' . \\VisitorService\\Outbox::table());
            return \\VisitorService\\Settings::checkConnection();
        """)
        shop = Shop(wordpress, tenant, service, check)
        purged = await shop.http("/__cache/purge", "POST")
        assert purged.code == 204
        return shop

    return open_one


async def documents(deps: server.Deps, collection: str, site_id: str) -> list[dict[str, Any]]:
    """Every document of a collection for one site."""
    return [doc async for doc in deps.store.collection(collection).find({"siteId": site_id})]


async def log_in(context: BrowserContext, shop: Shop, user: tuple[str, str]) -> None:
    """Sign `user` (name, password) in to the shop's WordPress in this browser context.

    A login WordPress answers with its form again is tried once more, and then fails with
    WordPress's own words: twice in CI runs under load the form came back (and the test waited
    out its 90 s for another page), which a run of the test alone never showed."""
    page = await context.new_page()
    refused = ""
    for _ in range(2):
        await page.goto(shop.url + "/wp-login.php")
        await page.fill("#user_login", user[0])
        await page.fill("#user_pass", user[1])
        await submit(page, "#wp-submit", "**")
        if "/wp-login.php" not in page.url:
            await page.close()
            return
        message = page.locator("#login_error")
        refused = (await message.inner_text()) if await message.count() else "no message"
    raise AssertionError(f"WordPress refused {user[0]}'s login twice: {refused}")


async def submit(page: Page, button: str, lands_on: str | Callable[[str], bool]) -> None:
    """Click a form's `button` and wait until the page it leads to (a URL glob or test) is
    parsed. Waiting on the URL alone returns at once when the page already has it (a second save)
    and waits for every image and stylesheet otherwise; a loaded machine needs longer than
    Playwright's usual 30 s for a wp-admin POST, its redirect and the next screen."""
    async with page.expect_navigation(url=lands_on, wait_until="domcontentloaded",
                                      timeout=90_000):
        await page.click(button)
