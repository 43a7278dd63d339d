"""Adding and deleting a site from the Settings page in Chromium (issue 43 point 3): the owner
adds a site with its origins and an IANA time zone, sees its API key once with a copy button,
and deletes it by typing its name after the exports it is offered. Clean under axe-core at 1280
and 390 px."""

from __future__ import annotations

from playwright.async_api import Page, expect

from tests.ui.accessibility import assert_accessible
from tests.ui.conftest import Dashboard, sign_in

PHONE = {"width": 390, "height": 844}


async def test_the_owner_adds_a_site_with_a_time_zone_and_deletes_it_by_typing_its_name(
        page: Page, dashboard: Dashboard, deps):
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url("/settings"))
    await page.get_by_label("Name", exact=True).fill("Second shop")
    await page.get_by_label("Allowed origins, one per line").fill("https://second.example")
    await page.locator("#new-site-zone").fill("Europe/Berlin")
    await page.get_by_role("button", name="Add site").click()
    key = await page.locator("#new-site-key").text_content()
    assert key and len(key) > 20
    await expect(page.get_by_role("button", name="Copy the API key")).to_be_visible()
    await assert_accessible(page, "the settings page with a new site's key shown")
    created = await deps.store.collection("sites").find_one({"name": "Second shop"})
    assert created["settings"]["timeZone"] == "Europe/Berlin"
    assert created["allowedOrigins"] == ["https://second.example"]
    assert key not in repr(created)

    await page.get_by_role("link", name="Install Second shop").click()
    await expect(page.locator("#site-switcher")).to_have_value(created["_id"])
    await expect(page.get_by_role("button", name="Copy the snippet")).to_be_visible()
    await page.set_viewport_size(PHONE)
    await expect(page.get_by_role("button", name="Download orders.csv")).to_be_visible()
    delete = page.get_by_role("button", name="Delete this site and all its data")
    await expect(delete).to_be_disabled()
    await page.get_by_label("Type the site’s name").fill("Second sho")
    await expect(delete).to_be_disabled()
    await assert_accessible(page, "the settings page's deletion at 390 px")
    await page.get_by_label("Type the site’s name").fill("Second shop")
    await delete.click()
    await expect(page.locator("#site-switcher option")).to_have_count(1)
    assert await deps.store.collection("sites").find_one({"_id": created["_id"]}) is None
