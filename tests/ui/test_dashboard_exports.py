"""CSV downloads from the errors, leads and recordings pages, in real headless Chromium.

The spec has each list exported from its own page; the Privacy & exports page keeps its buttons
too (tests/ui/test_dashboard_actions.py downloads leads from there). A download the server cut
at CSV_ROW_CAP must say so on the page, not only in a header or the file's last row.
"""

from __future__ import annotations

import csv
import io

import pytest
from playwright.async_api import Download, Page, expect

from demo import DEMO_ERRORS
from tests.ui.conftest import JONAS, MIA, Dashboard, downloaded_text, sign_in


@pytest.fixture
def csv_row_cap() -> int | None:
    """CSV_ROW_CAP of the test's server; None keeps the default. Parametrize to shrink it."""
    return None


@pytest.fixture
def settings_env(settings_env: dict[str, str], csv_row_cap: int | None) -> dict[str, str]:
    """The dashboard's settings, with the row cap the test asks for."""
    if csv_row_cap is None:
        return settings_env
    return {**settings_env, "CSV_ROW_CAP": str(csv_row_cap)}


async def _download(page: Page, button: str) -> tuple[Download, list[list[str]]]:
    """Press a download button; the download and the CSV's rows, header first."""
    async with page.expect_download() as started:
        await page.get_by_role("button", name=button).click()
    download = await started.value
    return download, list(csv.reader(io.StringIO(await downloaded_text(download))))


def _records(rows: list[list[str]]) -> list[dict[str, str]]:
    return [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]


async def test_the_leads_errors_and_recordings_pages_each_download_their_own_csv(
        page: Page, dashboard: Dashboard, artifacts):
    await sign_in(page, dashboard)

    await page.get_by_role("link", name="Leads", exact=True).click()
    download, rows = await _download(page, "Download leads.csv")
    assert download.suggested_filename == f"leads-{dashboard.site_id}.csv"
    await expect(page.get_by_text(f"Saved {download.suggested_filename}.")).to_be_visible()
    leads = _records(rows)
    assert sorted((lead["visitorId"], lead["email"]) for lead in leads) == [
        (JONAS, f"{JONAS}@example.com"), (MIA, f"{MIA}@example.com")]
    await page.screenshot(path=artifacts("leads-downloaded.png"), full_page=True)

    await page.get_by_role("link", name="Errors", exact=True).click()
    download, rows = await _download(page, "Download errors.csv")
    assert download.suggested_filename == f"errors-{dashboard.site_id}.csv"
    await expect(page.get_by_text(f"Saved {download.suggested_filename}.")).to_be_visible()
    errors = _records(rows)
    assert sorted((error["type"], error["message"], error["status"]) for error in errors) == sorted(
        (error_type, message, "open") for error_type, message, _, _ in DEMO_ERRORS)

    await page.get_by_role("link", name="Recordings", exact=True).click()
    await expect(page.locator("#recordings li.recording")).to_have_count(2)
    download, rows = await _download(page, "Download recordings.csv")
    recordings = _records(rows)
    assert [recording["visitorId"] for recording in recordings] == [MIA, MIA]
    assert all(recording["firstPageUrl"].endswith("/product/blue-mug")
               for recording in recordings)
    await expect(page.locator("[data-truncated]")).to_have_count(0)
    await page.screenshot(path=artifacts("recordings-downloaded.png"), full_page=True)


@pytest.mark.parametrize("csv_row_cap", [1])
async def test_a_download_cut_at_the_row_cap_says_so_on_the_page(
        page: Page, dashboard: Dashboard, artifacts):
    await sign_in(page, dashboard)
    await page.get_by_role("link", name="Leads", exact=True).click()
    download, rows = await _download(page, "Download leads.csv")
    assert rows[0][:2] == ["id", "createdAt"]
    assert len(rows) == 3 and rows[2][0] == "#truncated", rows
    notice = page.locator("[data-truncated]")
    await expect(notice).to_be_visible()
    await expect(notice).to_contain_text(
        f"Saved {download.suggested_filename}, but it is incomplete")
    await expect(notice).to_contain_text("only the newest 1 row, and more exist")
    await page.screenshot(path=artifacts("leads-truncated.png"), full_page=True)
