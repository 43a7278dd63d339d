"""What a shop owner reads in the dashboard (issue 28 points 10, 11, 12), in real Chromium.

Screenshots go to tests/artifacts/.
"""

from __future__ import annotations

from playwright.async_api import Page, Request, expect

from tests.ui.accessibility import assert_accessible
from tests.ui.conftest import JONAS, MIA, Dashboard, ingest, sign_in


async def test_the_erase_result_lists_what_was_erased_in_words_not_internal_names(
        page: Page, dashboard: Dashboard, artifacts):
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url(f"/visitors/{JONAS}"))
    await page.get_by_role("button", name="Erase data…").click()
    await page.get_by_role("button", name="Erase Demo visitor Jonas Weber").click()
    receipt = page.get_by_role("dialog")
    await expect(page.locator("#erasure-receipt")).to_contain_text("completed")
    await expect(receipt).to_contain_text("Pageview records: ")
    await expect(receipt).to_contain_text("Days the visitor was active")
    await expect(receipt).to_contain_text("Visitor profile: 1")
    text = await receipt.inner_text()
    for internal in ("bucket", "activeDays", "pendingFigureFacts", "visitorProfile"):
        assert internal not in text, internal
    await page.screenshot(path=artifacts("erase-receipt.png"))


async def test_an_inverted_date_range_keeps_the_date_controls_and_says_what_is_wrong(
        page: Page, dashboard: Dashboard, artifacts):
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url("?from=2026-11-20&to=2026-11-10"))
    problem = page.locator("#range-problem")
    await expect(problem.get_by_role("alert")).to_contain_text("start date is after the end date")
    await expect(page.locator("#range-from")).to_have_value("2026-11-20")
    await expect(page.locator("#range-to")).to_have_value("2026-11-10")
    await expect(page.get_by_role("link", name="7 days")).to_be_visible()
    await page.screenshot(path=artifacts("inverted-range.png"))
    await assert_accessible(page, "overview with an inverted range")
    # Put right in the form, the overview comes back.
    await page.locator("#range-from").fill("2026-11-01")
    await page.get_by_role("button", name="Show").click()
    await expect(page.locator("#overview-figures")).to_be_visible()
    await expect(problem.get_by_role("alert")).to_have_count(0)
    # An inverted range typed into the form is refused there, and the figures stay.
    await page.locator("#range-from").fill("2026-11-30")
    await page.get_by_role("button", name="Show").click()
    await expect(problem.get_by_role("alert")).to_contain_text("start date is after the end date")
    await expect(page.locator("#overview-figures")).to_be_visible()


async def test_a_fresh_dashboard_load_asks_for_a_sign_in_without_a_failed_refresh(
        page: Page, dashboard: Dashboard):
    refreshes: list[Request] = []
    failures: list[str] = []
    page.on("request", lambda request: refreshes.append(request)
            if request.url.endswith("/auth/refresh") else None)
    page.on("console", lambda message: failures.append(message.text)
            if message.type == "error" else None)
    await page.goto(dashboard.url + "/")
    await expect(page.get_by_label("E-mail")).to_be_visible()
    assert refreshes == [] and failures == []
    # A returning user is still signed in silently by the refresh cookie.
    await sign_in(page, dashboard)
    await page.reload()
    await expect(page.locator("#site-switcher")).to_be_visible()
    assert len(refreshes) == 1 and (await refreshes[0].response()).status == 200
    assert failures == []


async def test_the_live_feed_still_shows_the_past_hours_errors_and_leads_after_a_reload(
        page: Page, dashboard: Dashboard, artifacts):
    answer = await ingest(dashboard, "/ingest/errors", {
        "visitorId": MIA, "source": "javascript", "type": "TypeError",
        "message": "Uncaught TypeError: the cart is gone", "url": "https://demo-shop.example/"})
    assert answer.code == 200, answer
    answer = await ingest(dashboard, "/ingest/leads", {
        "visitorId": MIA, "email": "feed-reader@example.com", "name": "Feed Reader"})
    assert answer.code == 200, answer
    await sign_in(page, dashboard)
    feed = page.locator("#live-feed")
    # Processed by the worker a moment later; the feed asks again after a reload.
    for _ in range(3):
        await page.reload()
        if await feed.locator("li", has_text="the cart is gone").count():
            break
    await expect(feed.locator("li", has_text="TypeError: the cart is gone")).to_be_visible()
    await expect(feed.locator("li", has_text="New lead: Feed Reader")).to_be_visible()
    await page.screenshot(path=artifacts("live-feed-after-reload.png"))


async def test_the_overview_shows_engagement_against_the_period_before_on_a_phone_too(
        page: Page, dashboard: Dashboard, deps, artifacts):
    await deps.derivation.fold()
    await sign_in(page, dashboard)
    for width in (1280, 390):
        await page.set_viewport_size({"width": width, "height": 900})
        await page.goto(dashboard.page_url(""))
        panel = page.get_by_role("region", name="Engagement")
        figures = panel.locator("#engagement-figures li")
        await expect(figures).to_have_count(4)
        for label in ("Bounce rate", "Median session length", "Median time on page",
                      "Average scroll depth"):
            await expect(panel).to_contain_text(label)
        await expect(panel.locator(".hint")).to_contain_text("first pageview to its last")
        # Nothing in the panel runs past the screen's edge.
        overflow = await panel.evaluate("el => el.scrollWidth - el.clientWidth")
        assert overflow <= 0, (width, overflow)
        await page.screenshot(path=artifacts(f"overview-engagement-{width}.png"), full_page=True)
        await assert_accessible(page, f"the overview's engagement at {width} px")


async def test_the_owner_sets_the_sites_time_zone_and_sees_when_it_takes_effect(
        page: Page, dashboard: Dashboard, deps, artifacts):
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url("/settings"))
    await page.locator("#time-zone").fill("Europe/Berlin")
    await page.get_by_role("button", name="Save settings").click()
    await expect(page.get_by_text("Settings saved.")).to_be_visible()
    await expect(page.locator("#time-zone-changes")).to_contain_text("Europe/Berlin from")
    site = await deps.store.collection("sites").find_one({"_id": dashboard.site_id})
    assert site["settings"]["timeZone"] == "Europe/Berlin"
    assert [entry["zone"] for entry in site["timeZones"]] == ["UTC", "Europe/Berlin"]
    await page.screenshot(path=artifacts("settings-time-zone.png"), full_page=True)
    await assert_accessible(page, "the settings with a change of time zone")
