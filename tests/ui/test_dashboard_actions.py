"""What the dashboard's controls change on the server, in real headless Chromium.

Each test presses controls as the demo owner would (site settings, sign-out, the data-subject
switches, downloads, error status) and checks the effect twice: in what the dashboard shows,
and in what the server does with data a shop sends afterwards, through /ingest with the demo
site's API key. Screenshots of the changed states go to tests/artifacts/.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from playwright.async_api import Browser, Locator, Page, WebSocket, expect

from tests.support.browser import eventually
from tests.ui.conftest import JONAS, MIA, Dashboard, downloaded_text, ingest, record_page, sign_in

SHOP = "https://demo-shop.example"
#: A demo error (demo.py) and the stack it was seeded with, which its fingerprint covers.
DEMO_ERROR = "ReferenceError: wc_cart_fragments_params is not defined"
DEMO_ERROR_STACK = ("ReferenceError: wc_cart_fragments_params is not defined\n"
                    "    at updateCart (cart.js:42:17)")
ERROR_STATUSES = ("open", "resolved", "ignored")


async def _recorded_pages(deps: Any, visitor_id: str) -> list[str]:
    """Pages of the visitor's stored recording segments."""
    return [segment["metadata"]["pageUrl"] async for segment in
            deps.store.bucket("segments").files.find({"metadata.visitorId": visitor_id})]


async def _pageview(dashboard: Dashboard, visitor_id: str, url: str, title: str) -> dict[str, Any]:
    answer = await ingest(dashboard, "/ingest/pageviews",
                          {"visitorId": visitor_id, "url": url, "title": title})
    assert answer.code == 200, answer
    return answer.json()


async def _save_settings(page: Page) -> None:
    await page.get_by_role("button", name="Save settings").click()
    await expect(page.get_by_text("Settings saved.")).to_be_visible()


async def _pageviews_listed(page: Page, dashboard: Dashboard, name: str) -> str:
    """The Pageviews cell of a visitor's row on the visitors list."""
    await page.goto(dashboard.page_url("/visitors"))
    row = page.locator("#visitors tbody tr", has_text=name)
    await expect(row).to_have_count(1)
    return await row.locator("td").nth(3).text_content() or ""


def _recent_activity(page: Page) -> Locator:
    return page.locator("section", has=page.get_by_role("heading", name="Recent activity"))


def _fact(page: Page, term: str) -> Locator:
    """The value shown next to `term` in a profile's facts."""
    return page.locator("dt", has_text=term).locator("xpath=following-sibling::dd[1]")


async def test_recordings_switched_off_in_settings_are_no_longer_stored_or_offered(
        page: Page, dashboard: Dashboard, deps, artifacts):
    visitor = "ui-visitor-recorded-once"
    teapot, mug = f"{SHOP}/product/teapot", f"{SHOP}/product/blue-mug"
    await _pageview(dashboard, visitor, teapot, "Teapot")
    before = await record_page(dashboard, visitor, teapot)
    assert all("dropped" not in answer.json() for answer in before), before

    await sign_in(page, dashboard)
    await page.get_by_role("link", name="Settings").click()
    recordings = page.get_by_label("Session recordings")
    await expect(recordings).to_be_checked()
    await recordings.uncheck()
    await _save_settings(page)
    await page.reload()
    await expect(page.get_by_label("Session recordings")).not_to_be_checked()
    await page.screenshot(path=artifacts("recordings-off.png"), full_page=True)

    await _pageview(dashboard, visitor, mug, "Blue mug")
    after = await record_page(dashboard, visitor, mug)
    assert [answer.json() for answer in after] == [{"ok": True, "dropped": "recordings_off"}] * 2
    assert await _recorded_pages(deps, visitor) == [teapot]

    await page.goto(dashboard.page_url(f"/visitors/{visitor}"))
    sessions = page.locator("#sessions li.session")
    await expect(sessions).to_have_count(1)
    await expect(sessions).to_contain_text(teapot)
    await expect(page.get_by_role("button", name="Play")).to_have_count(1)
    await expect(page.get_by_role("heading", name="Recordings (1)")).to_be_visible()
    await expect(_recent_activity(page)).to_contain_text("Blue mug")
    await page.screenshot(path=artifacts("visitor-after-recordings-off.png"), full_page=True)


async def test_a_url_excluded_from_replay_in_settings_keeps_its_pageviews_but_no_recording(
        page: Page, dashboard: Dashboard, deps, artifacts):
    await sign_in(page, dashboard)
    await page.get_by_role("link", name="Settings").click()
    await page.get_by_role("button", name="Add an excluded URL").click()
    await page.get_by_label("Excluded URL pattern").fill("/checkout*")
    await page.get_by_label("What the exclusion stops").select_option(label="Session replay only")
    await _save_settings(page)
    await page.reload()
    await expect(page.get_by_label("Excluded URL pattern")).to_have_value("/checkout*")
    await expect(page.get_by_label("What the exclusion stops")).to_have_value("replay")
    await page.screenshot(path=artifacts("excluded-url.png"), full_page=True)

    visitor = "ui-visitor-checkout"
    checkout, teapot = f"{SHOP}/checkout/payment", f"{SHOP}/product/teapot"
    assert "id" in await _pageview(dashboard, visitor, checkout, "Checkout payment")
    assert "id" in await _pageview(dashboard, visitor, teapot, "Teapot")
    excluded = await record_page(dashboard, visitor, checkout)
    assert [answer.json() for answer in excluded] == [
        {"ok": True, "dropped": "excluded_from_replay"}] * 2
    # A page the pattern does not match is still recorded, so the exclusion is what stops it.
    kept = await record_page(dashboard, visitor, teapot)
    assert all("dropped" not in answer.json() for answer in kept), kept
    assert await _recorded_pages(deps, visitor) == [teapot]

    await page.goto(dashboard.page_url(f"/visitors/{visitor}"))
    sessions = page.locator("#sessions li.session")
    await expect(sessions).to_have_count(1)
    await expect(sessions).to_contain_text(teapot)
    await expect(page.locator("#sessions")).not_to_contain_text("checkout")
    await expect(_recent_activity(page)).to_contain_text("Checkout payment")
    await expect(_recent_activity(page)).to_contain_text("Teapot")
    await page.screenshot(path=artifacts("visitor-with-excluded-page.png"), full_page=True)


async def test_the_owner_names_the_pages_recorded_masked_in_settings(
        page: Page, dashboard: Dashboard, deps, artifacts):
    await sign_in(page, dashboard)
    await page.get_by_role("link", name="Settings").click()
    pages = page.get_by_label("written like excluded URLs")
    # Until the owner sets some, WooCommerce's checkout and My Account are masked.
    await expect(pages).to_have_value("/checkout\n/checkout/*\n/my-account\n/my-account/*")
    await pages.fill("/mein-konto*\n\n  /kasse/*  ")
    await _save_settings(page)
    await page.reload()
    await expect(page.get_by_label("written like excluded URLs")).to_have_value(
        "/mein-konto*\n/kasse/*")
    site = await deps.store.collection("sites").find_one({"_id": dashboard.site_id})
    assert site["settings"]["personalPages"] == ["/mein-konto*", "/kasse/*"]
    await page.screenshot(path=artifacts("personal-pages-setting.png"), full_page=True)


async def test_signing_out_closes_the_live_socket_so_later_errors_reach_no_feed(
        page: Page, dashboard: Dashboard, browser: Browser, deps):
    sockets: list[WebSocket] = []
    page.on("websocket", lambda socket: sockets.append(socket))
    await sign_in(page, dashboard)
    await expect(page.locator("#live-state")).to_have_text("Live")
    assert [socket.url for socket in sockets] == [
        dashboard.url.replace("http://", "ws://") + "/dashboard/live"]
    live = sockets[0]
    frames: list[str | bytes] = []
    live.on("framereceived", lambda frame: frames.append(frame))
    # A second signed-in dashboard sees the error arrive, so the signed-out page is checked
    # after the event was sent rather than after a guessed wait.
    witness_context = await browser.new_context()
    witness = await witness_context.new_page()
    await sign_in(witness, dashboard)
    await expect(witness.locator("#live-state")).to_have_text("Live")

    async with live.expect_event("close", timeout=5000):
        await page.get_by_role("button", name="Sign out").click()
    assert live.is_closed()
    await expect(page.get_by_role("button", name="Sign in")).to_be_visible()

    async def only_the_witness_watches() -> bool:
        return deps.hub.watchers(dashboard.site_id) == 1

    await eventually(only_the_witness_watches, within=5,
                     message="the server still holds the signed-out socket")
    answer = await ingest(dashboard, "/ingest/errors", {
        "visitorId": MIA, "source": "javascript", "type": "RangeError",
        "message": "sent after sign-out", "url": f"{SHOP}/cart"})
    assert answer.code == 200
    await expect(witness.locator("#live-feed li", has_text="sent after sign-out")).to_be_visible(
        timeout=5000)
    assert not [frame for frame in frames if "sent after sign-out" in str(frame)]
    assert len(sockets) == 1, "the signed-out page opened a new live socket"
    await witness_context.close()


async def test_restricting_a_visitor_hides_them_and_their_next_pageview_is_not_stored(
        page: Page, dashboard: Dashboard, artifacts):
    name = "Demo visitor Jonas Weber"
    await sign_in(page, dashboard)
    pageviews = await _pageviews_listed(page, dashboard, name)
    await page.goto(dashboard.page_url(f"/visitors/{JONAS}"))
    await page.get_by_role("button", name="Restrict processing").click()
    await expect(page.get_by_text(
        "Processing is restricted; the visitor is now hidden from lists.")).to_be_visible()
    await page.screenshot(path=artifacts("restricted.png"), full_page=True)

    answer = await ingest(dashboard, "/ingest/pageviews",
                          {"visitorId": JONAS, "url": f"{SHOP}/product/teapot"})
    assert (answer.code, answer.json()) == (200, {"ok": True, "dropped": "restricted"})
    # Another tab of the same sign-in: a restricted visitor is left out of the list.
    other = await page.context.new_page()
    await other.goto(dashboard.page_url("/visitors"))
    await expect(other.locator("#visitors")).to_contain_text("Demo visitor Mia Jensen")
    await expect(other.locator("#visitors")).not_to_contain_text("Jonas")
    await other.close()

    await page.get_by_role("button", name="Lift restriction").click()
    await expect(page.get_by_text("Lift restriction: done.")).to_be_visible()
    assert await _pageviews_listed(page, dashboard, name) == pageviews


async def test_a_restricted_visitor_left_behind_is_lifted_from_the_privacy_page(
        page: Page, dashboard: Dashboard, artifacts):
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url(f"/visitors/{MIA}"))
    await page.get_by_role("button", name="Record objection").click()
    await expect(page.get_by_text("Record objection: done.")).to_be_visible()
    await page.goto(dashboard.page_url(f"/visitors/{JONAS}"))
    await page.get_by_role("button", name="Restrict processing").click()
    await expect(page.get_by_text("Lift it later under Privacy & exports")).to_be_visible()

    # Once the profile is left, nothing else in the dashboard leads back to Jonas.
    await page.get_by_role("link", name="Visitors", exact=True).click()
    await expect(page.locator("#visitors")).to_contain_text("Demo visitor Mia Jensen")
    await expect(page.locator("#visitors")).not_to_contain_text("Jonas")
    await page.get_by_role("link", name="Privacy & exports").click()
    holds = page.locator("#privacy-holds tbody tr")
    await expect(holds).to_have_count(2)
    jonas = page.locator("#privacy-holds tbody tr", has_text=JONAS)
    mia = page.locator("#privacy-holds tbody tr", has_text=MIA)
    await expect(jonas.locator("td").nth(1)).not_to_have_text("—")
    await expect(jonas.locator("td").nth(2)).to_have_text("—")
    await expect(mia.locator("td").nth(1)).to_have_text("—")
    await expect(mia.locator("td").nth(2)).not_to_have_text("—")
    await expect(jonas.get_by_role("button", name="Withdraw objection")).to_have_count(0)
    await page.screenshot(path=artifacts("privacy-holds.png"), full_page=True)

    await jonas.get_by_role("button", name="Lift restriction").click()
    await expect(page.get_by_text(f"Restriction of {JONAS} lifted")).to_be_visible()
    await expect(holds).to_have_count(1)
    await mia.get_by_role("button", name="Withdraw objection").click()
    await expect(page.get_by_text(f"Objection of {MIA} withdrawn")).to_be_visible()
    await expect(page.get_by_text("No restricted or objecting visitors")).to_be_visible()

    await page.get_by_role("link", name="Visitors", exact=True).click()
    await expect(page.locator("#visitors")).to_contain_text("Demo visitor Jonas Weber")
    answer = await ingest(dashboard, "/ingest/pageviews",
                          {"visitorId": JONAS, "url": f"{SHOP}/product/teapot"})
    assert answer.code == 200 and "dropped" not in answer.json(), answer


async def test_an_objection_shows_on_the_profile_and_the_next_pageview_is_not_stored(
        page: Page, dashboard: Dashboard, artifacts):
    name = "Demo visitor Mia Jensen"
    await sign_in(page, dashboard)
    pageviews = await _pageviews_listed(page, dashboard, name)
    await page.goto(dashboard.page_url(f"/visitors/{MIA}"))
    await expect(_fact(page, "Objected")).to_have_text("no")
    await page.get_by_role("button", name="Record objection").click()
    await expect(page.get_by_text("Record objection: done.")).to_be_visible()
    await expect(_fact(page, "Objected")).to_have_text("yes")
    await page.screenshot(path=artifacts("objected.png"), full_page=True)

    answer = await ingest(dashboard, "/ingest/pageviews",
                          {"visitorId": MIA, "url": f"{SHOP}/product/teapot"})
    assert (answer.code, answer.json()) == (200, {"ok": True, "dropped": "objected"})
    await page.reload()
    await expect(_fact(page, "Objected")).to_have_text("yes")
    assert await _pageviews_listed(page, dashboard, name) == pageviews


async def test_the_visitor_export_and_the_leads_csv_download_with_formulas_neutralised(
        page: Page, dashboard: Dashboard):
    formula = '=HYPERLINK("https://evil.example","Claim your prize")'
    lead = await ingest(dashboard, "/ingest/leads", {
        "visitorId": "ui-visitor-formula", "email": "formula@example.com", "name": formula,
        "kind": "form", "url": f"{SHOP}/contact"})
    assert lead.code == 200 and "id" in lead.json(), lead
    await sign_in(page, dashboard)

    await page.goto(dashboard.page_url(f"/visitors/{MIA}"))
    async with page.expect_download() as started:
        await page.get_by_role("button", name="Download export.json").click()
    download = await started.value
    assert download.suggested_filename.startswith("visitor-export-")
    await expect(page.get_by_text(f"Saved {download.suggested_filename}.")).to_be_visible()
    exported = json.loads(await downloaded_text(download))
    assert exported["visitor"]["visitorId"] == MIA
    assert exported["visitor"]["displayName"] == "Demo visitor Mia Jensen"
    assert exported["pageviews"] and all(view["url"].startswith(SHOP)
                                         for view in exported["pageviews"])
    assert [lead["email"] for lead in exported["leads"]] == ["demo-visitor-mia@example.com"]
    assert len(exported["recordings"]) == 2

    await page.get_by_role("link", name="Privacy & exports").click()
    async with page.expect_download() as started:
        await page.get_by_role("button", name="Download leads.csv").click()
    download = await started.value
    assert download.suggested_filename == f"leads-{dashboard.site_id}.csv"
    rows = {row["email"]: row for row in csv.DictReader(io.StringIO(
        await downloaded_text(download)))}
    assert set(rows) == {"demo-visitor-mia@example.com", "demo-visitor-jonas@example.com",
                         "formula@example.com"}
    assert rows["demo-visitor-mia@example.com"]["name"] == "Demo visitor Mia Jensen"
    assert rows["formula@example.com"]["name"] == "'" + formula


async def _errors_listed(page: Page, status: str) -> list[str]:
    """Choose a status on the errors page; the errors it then lists."""
    await page.get_by_label("Status", exact=True).select_option(status)
    await page.wait_for_url(f"**/errors?status={status}")
    await expect(page.locator("#errors, .empty").first).to_be_visible()
    return await page.locator("#errors tbody tr td:first-child").all_text_contents()


async def test_an_error_is_resolved_ignored_and_reopened_and_a_new_occurrence_reopens_it(
        page: Page, dashboard: Dashboard, deps, artifacts):
    await sign_in(page, dashboard)
    await page.get_by_role("link", name="Errors").click()
    for step, (action, status) in enumerate((("Resolve", "resolved"), ("Ignore", "ignored"),
                                             ("Re-open", "open"), ("Resolve", "resolved")), 1):
        await page.get_by_role("link", name=DEMO_ERROR).click()
        await page.get_by_role("button", name=action, exact=True).click()
        await expect(page.locator("#error-status-badge")).to_have_text(status)
        await page.get_by_role("link", name="← All errors").click()
        for shown in ERROR_STATUSES:
            listed = await _errors_listed(page, shown)
            assert (DEMO_ERROR in listed) == (shown == status), (action, shown, listed)
        await _errors_listed(page, status)
        await page.screenshot(path=artifacts(f"errors-{step}-{status}.png"))

    # The resolved list is on screen; the same fault happening again re-opens it live.
    answer = await ingest(dashboard, "/ingest/errors", {
        "visitorId": JONAS, "source": "javascript", "type": "ReferenceError",
        "message": "wc_cart_fragments_params is not defined", "url": f"{SHOP}/cart",
        "stack": DEMO_ERROR_STACK})
    assert (answer.code, answer.json()) == (200, {"ok": True})
    await deps.queue.join()
    await deps.derivation.fold()  # the list's counts are folded, as within seconds
    await expect(page.locator("main")).not_to_contain_text(DEMO_ERROR)
    assert DEMO_ERROR in await _errors_listed(page, "open")
    row = page.locator("#errors tbody tr", has_text=DEMO_ERROR)
    await expect(row.locator("td").nth(1)).to_have_text("2")
    await row.get_by_role("link").click()
    await expect(page.locator("#error-status-badge")).to_have_text("open")
    await expect(_fact(page, "Re-opened")).to_have_text("1")
    await expect(_fact(page, "Occurrences")).to_have_text("2")
    await page.screenshot(path=artifacts("error-reopened.png"), full_page=True)
