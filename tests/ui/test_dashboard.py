"""The dashboard in real headless Chromium against the running service (issue 7, point 6).

Every test signs in through the login form with the demo owner `make run` creates, on the demo
data it seeds, and checks what a user sees. Screenshots of the main pages go to tests/artifacts/.
"""

from __future__ import annotations

import json

from playwright.async_api import Page, expect
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from documents import accounts
from documents.visitors import visitor_label
from tests.support.app import TEST_PASSWORD
from tests.ui.conftest import JONAS, MIA, Dashboard, ingest, sign_in

ANON = "demo-visitor-anon"


async def test_a_user_signs_in_and_every_main_page_shows_the_demo_data(
        page: Page, dashboard: Dashboard, artifacts):
    await sign_in(page, dashboard)
    await expect(page.locator("#live-state")).to_have_text("Live")
    # The last 30 days: the demo's days have bars, the days before it none.
    await expect(page.locator("figure.chart svg rect.bar-pv:not([height='0'])").first
                 ).to_be_visible()
    assert "pageviews" in await page.locator("figure.chart svg").get_attribute("aria-label")
    await page.screenshot(path=artifacts("overview.png"), full_page=True)
    pages = {
        "visitors": "Demo visitor Mia Jensen",
        "errors": "wc_cart_fragments_params is not defined",
        "leads": "demo-visitor-jonas@example.com",
        "recordings": "demo-shop.example/product/blue-mug",
        "settings": "Session recordings",
        "privacy": "Data-subject requests",
    }
    for section, visible in pages.items():
        await page.get_by_role("link", name={"visitors": "Visitors", "errors": "Errors",
                                             "leads": "Leads", "recordings": "Recordings",
                                             "settings": "Settings",
                                             "privacy": "Privacy & exports"}[section]).click()
        await expect(page.get_by_text(visible).first).to_be_visible()
        await page.screenshot(path=artifacts(f"{section}.png"), full_page=True)
    await page.set_viewport_size({"width": 375, "height": 812})
    await page.goto(dashboard.page_url("/visitors"))
    await expect(page.get_by_text("Demo visitor Mia Jensen")).to_be_visible()
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= 375, f"the visitors page scrolls sideways at 375 px ({width} px wide)"
    await page.screenshot(path=artifacts("visitors-375px.png"), full_page=True)


async def test_the_shell_is_served_with_a_strict_content_security_policy(
        page: Page, dashboard: Dashboard):
    answer = await page.goto(dashboard.url + "/app/login")
    headers = answer.headers
    policy = headers["content-security-policy"]
    assert "script-src 'self';" in policy and "unsafe-inline" not in policy.split("script-src")[1
                                                                                ].split(";")[0]
    assert "frame-ancestors 'none'" in policy
    assert f"connect-src 'self' ws://{dashboard.url.removeprefix('http://')}" in policy
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "no-referrer"
    # The shell first tries a silent sign-in; the form shows once that request has settled, so
    # the server is not stopped under it (a refused request would fail the console check).
    await expect(page.get_by_role("button", name="Sign in")).to_be_visible()


async def test_an_error_ingested_through_the_api_appears_in_the_live_feed_within_two_seconds(
        page: Page, dashboard: Dashboard, artifacts):
    await sign_in(page, dashboard)
    await expect(page.locator("#live-state")).to_have_text("Live")
    await page.evaluate("window.notReloaded = true")
    answer = await ingest(dashboard, "/ingest/errors", {
        "visitorId": MIA, "source": "javascript", "type": "RangeError",
        "message": "the basket overflowed", "url": "https://demo-shop.example/cart"})
    assert answer.code == 200
    entry = page.locator("#live-feed li", has_text="RangeError: the basket overflowed")
    await expect(entry).to_be_visible(timeout=2000)
    assert await page.evaluate("window.notReloaded === true")
    await page.screenshot(path=artifacts("live-feed.png"))


async def test_a_visitor_profile_lists_its_sessions_in_order_and_plays_one(
        page: Page, dashboard: Dashboard, artifacts):
    # What Mia said in a chat and a survey (issue 41 point 9), newest first on her profile.
    for path, body in (
            ("/ingest/surveys", {"visitorId": MIA, "surveyId": "nps",
                                 "url": "https://demo-shop.example/product/blue-mug",
                                 "answers": [{"question": "Would you recommend us?",
                                              "score": 9}]}),
            ("/ingest/chats", {"visitorId": MIA, "messages": [
                {"from": "visitor", "text": "Does the blue mug fit a saucer?"},
                {"from": "agent", "text": "It does."}]})):
        assert (await ingest(dashboard, path, body)).code == 200
    await sign_in(page, dashboard)
    await page.get_by_role("link", name="Visitors").click()
    # A visitor without a name reads a short label, the full id on hover (issue 41 point 6).
    anonymous = page.locator("#visitors a", has_text=visitor_label(dashboard.site_id, ANON))
    await expect(anonymous).to_have_attribute("title", ANON)
    await page.get_by_role("link", name="Demo visitor Mia Jensen").click()
    await expect(page.locator("#visitor-name")).to_have_text("Demo visitor Mia Jensen")
    await expect(page.locator("#visitor-name")).to_have_attribute("title", MIA)
    await expect(page.locator("#visitor-id")).to_have_text(MIA)
    await page.get_by_role("button", name="Copy id").click()
    await expect(page.locator("#copy-visitor-id + [role=status]")).not_to_be_empty()
    for heading in ("Identity", "Location and device", "What they said", "Recent activity",
                    "Errors hit", "Leads", "Linked profiles"):
        await expect(page.get_by_role("heading", name=heading)).to_be_visible()
    said = page.locator("#said li")
    await expect(said).to_have_count(2)
    await expect(said.nth(0)).to_contain_text("Does the blue mug fit a saucer?")
    await expect(said.nth(1)).to_contain_text("Would you recommend us?: 9")
    await expect(said.nth(1)).to_contain_text("on /product/blue-mug")
    await expect(page.locator("#said")).not_to_contain_text("It does.")
    sessions = page.locator("#sessions li.session")
    await expect(sessions).to_have_count(2)
    started = [await sessions.nth(i).get_attribute("data-started-at") for i in range(2)]
    assert started == sorted(started) and started[0] != started[1]

    await sessions.first.get_by_role("button", name="Play").click()
    player = sessions.first.locator(".rr-player")
    await expect(player).to_be_visible(timeout=10000)
    frame = sessions.first.frame_locator(".rr-player iframe")
    await expect(frame.get_by_text("Add to cart")).to_be_visible()
    clock = player.locator(".rr-timeline__time").first
    first_reading = await clock.text_content()
    await expect(clock).not_to_have_text(first_reading or "", timeout=5000)
    await page.screenshot(path=artifacts("visitor-replay.png"), full_page=True)


async def test_a_lead_is_corrected_from_the_leads_page(
        page: Page, dashboard: Dashboard, deps):
    await sign_in(page, dashboard)
    await page.get_by_role("link", name="Leads").click()
    await page.get_by_role("button", name="Edit lead demo-visitor-mia@example.com").click()
    await page.get_by_label("Name").fill("Mia Jensen-Holm")
    await page.get_by_role("button", name="Save correction").click()
    await expect(page.locator("#leads")).to_contain_text("Mia Jensen-Holm")
    stored = await deps.store.collection("leads").find_one({"visitorId": MIA})
    assert stored["name"] == "Mia Jensen-Holm"
    await page.reload()
    await expect(page.locator("#leads")).to_contain_text("Mia Jensen-Holm")


async def test_an_erased_visitor_is_gone_from_every_page(
        page: Page, dashboard: Dashboard, artifacts):
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url(f"/visitors/{JONAS}"))
    await page.get_by_role("button", name="Erase data…").click()
    dialog = page.get_by_role("dialog")
    await expect(dialog).to_contain_text("pageviews")
    await expect(dialog).to_contain_text("1 lead")
    await expect(dialog).to_contain_text("the visitor profile itself")
    await page.screenshot(path=artifacts("erase-confirmation.png"))
    await page.get_by_role("button", name="Erase Demo visitor Jonas Weber").click()
    await expect(page.locator("#erasure-receipt")).to_contain_text("completed")
    await page.screenshot(path=artifacts("erase-receipt.png"))
    await page.get_by_role("button", name="Back to visitors").click()

    await expect(page.locator("#visitors")).to_contain_text("Demo visitor Mia Jensen")
    await expect(page.locator("#visitors")).not_to_contain_text("Jonas")
    await page.get_by_label("Search visitors").fill("Jonas")
    await page.get_by_role("button", name="Search").click()
    await expect(page.get_by_text("No visitor matches “Jonas”")).to_be_visible()
    await page.get_by_role("link", name="Leads").click()
    await expect(page.locator("#leads")).to_contain_text("demo-visitor-mia@example.com")
    await expect(page.locator("#leads")).not_to_contain_text("jonas")
    await page.goto(dashboard.page_url(f"/visitors/{JONAS}"))
    await expect(page.get_by_role("alert")).to_contain_text("no longer exists")
    await page.goto(dashboard.page_url("/privacy"))
    await expect(page.locator("#requests")).to_contain_text("erasure")


async def test_a_viewer_sees_no_key_rotation_or_erasure_and_the_server_refuses_both(
        page: Page, dashboard: Dashboard, deps, test_password_hash):
    owner = await accounts.find_user_by_email(deps.store, dashboard.email)
    organization = next(iter((await accounts.load_authenticated_user(
        deps.store, owner["_id"], "")).roles))
    await accounts.add_member(deps.store, organization_id=organization,
                              email="viewer@demo.example", password_hash=test_password_hash,
                              display_name="Viewer", role="viewer")
    await sign_in(page, dashboard, "viewer@demo.example", TEST_PASSWORD)
    await page.goto(dashboard.page_url("/settings"))
    await expect(page.get_by_text("Only owners and admins can rotate keys.")).to_be_visible()
    await expect(page.locator("#rotate-key")).to_have_count(0)
    await page.goto(dashboard.page_url(f"/visitors/{MIA}"))
    await expect(page.locator("#viewer-note")).to_be_visible()
    await expect(page.locator("#erase")).to_have_count(0)

    login = await AsyncHTTPClient().fetch(HTTPRequest(
        dashboard.url + "/auth/login", "POST", headers={"Content-Type": "application/json"},
        body=json.dumps({"email": "viewer@demo.example", "password": TEST_PASSWORD})))
    bearer = {"Authorization": f"Bearer {json.loads(login.body)['accessToken']}"}
    rotate = await AsyncHTTPClient().fetch(HTTPRequest(
        f"{dashboard.url}/api/v1/sites/{dashboard.site_id}/api-key/rotate", "POST", body=b"",
        headers=bearer), raise_error=False)
    erase = await AsyncHTTPClient().fetch(HTTPRequest(
        f"{dashboard.url}/api/v1/sites/{dashboard.site_id}/visitors/{MIA}/data", "DELETE",
        headers=bearer), raise_error=False)
    assert (rotate.code, erase.code) == (403, 403)


async def test_an_owner_rotates_the_api_key_and_sees_the_new_key_once(
        page: Page, dashboard: Dashboard, artifacts):
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url("/settings"))
    await page.get_by_role("button", name="Rotate API key").click()
    key = page.locator("#api-key-value")
    await expect(key).to_be_visible()
    shown = await key.text_content() or ""
    assert shown.startswith("sk_") and shown != dashboard.api_key
    await page.screenshot(path=artifacts("settings-rotated.png"), full_page=True)
    await page.reload()
    await expect(page.get_by_role("button", name="Rotate API key")).to_be_visible()
    await expect(page.locator("#api-key-value")).to_have_count(0)



async def test_the_dashboard_is_usable_from_the_keyboard_with_a_visible_focus(
        page: Page, dashboard: Dashboard):
    await page.goto(dashboard.url + "/")
    await page.get_by_label("E-mail").focus()
    await page.keyboard.type(dashboard.email)
    await page.keyboard.press("Tab")
    await page.keyboard.type(dashboard.password)
    await page.keyboard.press("Enter")
    await page.wait_for_selector("#site-switcher")
    # Tab until the Visitors link has the focus, then follow it with Enter.
    for _ in range(40):
        await page.keyboard.press("Tab")
        focused = await page.evaluate("document.activeElement.textContent.trim()")
        if focused == "Visitors":
            break
    else:
        raise AssertionError("the Visitors link cannot be reached with Tab")
    outline = await page.evaluate(
        "(() => { const s = getComputedStyle(document.activeElement);"
        " return [s.outlineStyle, s.outlineWidth, s.boxShadow]; })()")
    assert outline[0] != "none" or outline[2] != "none", f"no visible focus: {outline}"
    await page.keyboard.press("Enter")
    await expect(page.get_by_text("Demo visitor Mia Jensen")).to_be_visible()
    # Every control on the page has a name a screen reader can announce.
    unnamed = await page.evaluate(
        "[...document.querySelectorAll('button, input, select, a[href]')]"
        ".filter(e => !(e.innerText || e.getAttribute('aria-label') || e.labels?.length"
        " || e.getAttribute('title') || e.value)).map(e => e.outerHTML.slice(0, 80))")
    assert unnamed == []
