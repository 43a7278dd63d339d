"""The Privacy page's retention panel in Chromium (issue 32): each kind's retention and what the
purge did, a shorter retention previewed before it is saved, and a purge that stopped running."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from playwright.async_api import Page, expect

from tests.ui.conftest import Dashboard, sign_in


async def test_the_owner_sees_each_retention_previews_a_shorter_one_and_saves_it(
        page: Page, dashboard: Dashboard, artifacts):
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url("/settings"))
    await page.get_by_role("link", name="Data retention").click()
    table = page.locator("#retention-table")
    recordings = table.locator("tr[data-kind=recordings]")
    await expect(recordings).to_contain_text("Session recordings and their footage")
    days = page.get_by_label("Days to keep: Session recordings and their footage")
    await expect(days).to_have_value("90")
    await expect(table.locator("tr[data-kind=requestLog]")).to_contain_text("fixed by law")
    await days.fill("7")
    await page.get_by_role("button", name="Preview deletions").click()
    await expect(page.locator("#retention-preview")).to_contain_text("The next purge would remove")
    await page.get_by_role("button", name="Save retention").click()
    await expect(page.get_by_text("Retention saved; it applies at the next purge.")).to_be_visible()
    await page.screenshot(path=artifacts("privacy-retention.png"), full_page=True)
    await page.reload()
    await expect(page.get_by_label("Days to keep: Session recordings and their footage")
                 ).to_have_value("7")


async def test_the_owner_sees_that_no_purge_has_finished_for_too_long(
        page: Page, dashboard: Dashboard, deps, artifacts):
    # The last run finished five hours ago; runs are due hourly, so the purge is overdue.
    finished = datetime.now(UTC) - timedelta(hours=5)
    await deps.store.collection("retention_runs").insert_one({
        "_id": "last", "owner": "worker", "startedAt": finished, "now": finished,
        "completedAt": finished, "finishedAt": finished, "done": [], "removed": {},
        "failures": 0, "lastError": None})
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url("/privacy"))
    warning = page.locator("#retention-overdue")
    await expect(warning).to_contain_text("No purge has finished since")
    await expect(warning).to_contain_text("Check that the process that purges is running")
    await page.screenshot(path=artifacts("privacy-retention-overdue.png"), full_page=True)
