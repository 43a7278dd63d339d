"""Installing from the dashboard (issue 21, point 5) in Chromium: the loader snippet, the
plugin archive with the values to enter, and a state that turns green at the first pageview."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.async_api import Page, expect
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from handlers import site_api
from tests.ui.accessibility import assert_accessible
from tests.ui.conftest import Dashboard, sign_in


async def _call(dashboard: Dashboard, path: str, body: dict, headers: dict) -> dict:
    answer = await AsyncHTTPClient().fetch(HTTPRequest(
        dashboard.url + path, "POST", body=json.dumps(body),
        headers={"Content-Type": "application/json", **headers}))
    return json.loads(answer.body)


async def test_settings_show_the_snippet_and_the_plugin_with_the_values_to_enter(
        page: Page, dashboard: Dashboard, artifacts):
    archive = site_api.PLUGIN_ROOT / site_api.PLUGIN_ARCHIVE
    if not archive.is_file():
        pytest.fail(f"{archive} is missing: run `make plugin-zip`")
    await sign_in(page, dashboard)
    await page.get_by_role("link", name="Settings").click()
    install = page.locator("#install")
    # The demo site has pageviews already: the state is green at once.
    await expect(install.locator("#install-state")).to_have_attribute("data-receiving", "true")
    await expect(install.locator("#install-state")).to_contain_text("Receiving data.")
    public_key = (await install.locator("#install-public-key").inner_text()).strip()
    assert public_key.startswith("pk_")
    await expect(install.locator("#install-service-url")).to_have_text(dashboard.url)
    snippet = await install.locator("#loader-snippet").inner_text()
    assert f'src="{dashboard.url}/sdk/v1/loader.js?key={public_key}"' in snippet
    assert snippet.startswith("<script>window.svc = window.svc ||")
    loader = await page.request.get(f"{dashboard.url}/sdk/v1/loader.js?key={public_key}")
    assert loader.status == 200

    link = install.locator("#plugin-download")
    await expect(link).to_be_visible()
    served = await page.request.get(dashboard.url + await link.get_attribute("href"))
    assert served.status == 200 and served.headers["content-type"] == "application/zip"
    assert await served.body() == archive.read_bytes()
    await assert_accessible(page, "the settings page")
    await page.screenshot(path=artifacts("install.png"), full_page=True)
    await page.set_viewport_size({"width": 390, "height": 844})
    assert await page.evaluate("document.documentElement.scrollWidth") <= 390
    await page.screenshot(path=artifacts("install-390px.png"), full_page=True)


async def test_without_a_built_archive_the_settings_say_how_to_build_it(
        page: Page, dashboard: Dashboard, monkeypatch, tmp_path: Path):
    monkeypatch.setattr(site_api, "PLUGIN_ROOT", tmp_path)
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url("/settings"))
    await expect(page.locator("#plugin-missing")).to_contain_text("make plugin-zip")
    await expect(page.locator("#plugin-download")).to_have_count(0)
    assert (await page.request.get(f"{dashboard.url}{site_api.PLUGIN_DOWNLOAD_PATH}")).status == 404


async def test_a_new_site_waits_for_its_first_event_and_turns_green_when_a_pageview_arrives(
        page: Page, dashboard: Dashboard, artifacts):
    login = await _call(dashboard, "/auth/login",
                        {"email": dashboard.email, "password": dashboard.password}, {})
    created = await _call(dashboard, "/api/v1/sites",
                          {"name": "Second Shop", "allowedOrigins": ["https://second.example"]},
                          {"Authorization": f"Bearer {login['accessToken']}"})
    await sign_in(page, dashboard)
    await page.goto(f"{dashboard.url}/app/sites/{created['id']}/settings")
    state = page.locator("#install-state")
    await expect(state).to_have_attribute("data-receiving", "false")
    await expect(state).to_contain_text("Waiting for the first event")
    await assert_accessible(page, "the settings page, waiting")
    await page.screenshot(path=artifacts("waiting.png"), full_page=True)

    answer = await _call(dashboard, "/ingest/pageviews",
                         {"visitorId": "first-ever", "url": "https://second.example/"},
                         {"X-Service-Key": created["apiKey"]})
    assert answer["ok"] is True and "dropped" not in answer
    await expect(state).to_have_attribute("data-receiving", "true", timeout=10000)
    await expect(state).to_contain_text("Receiving data.")
    await page.screenshot(path=artifacts("receiving.png"), full_page=True)
