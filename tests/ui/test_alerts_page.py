"""The Alerts page in Chromium (issue 42 point 3): the owner creates a rule, sees its last
evaluation once it fires and its delivery in the log (channel, outcome, attempts, the
receiver's status), sends a test on a channel, edits and mutes the rule, mutes it for
themselves and asks for the digest; a viewer reads the rules without the owner's controls and
mutes a rule for themselves. Clean under axe-core at 1280 and 390 px."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.async_api import Browser, Page, expect
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from config.metrics import Metrics
from documents import accounts, alerts
from tasks.alerts import AlertEvaluator
from tests.alerts import figures
from tests.notifications.test_notifications import WEBHOOK_SECRET, receiver
from tests.support.app import TEST_PASSWORD
from tests.ui.accessibility import assert_accessible
from tests.ui.conftest import Dashboard, sign_in

__all__ = ["receiver"]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 860}
VIEWER = "viewer@demo.example"


@pytest.fixture
def settings_env(settings_env: dict[str, str]) -> dict[str, str]:
    """The webhook receiver is on 127.0.0.1."""
    return {**settings_env, "WEBHOOK_ALLOW_PRIVATE_ADDRESSES": "true"}


async def _api(dashboard: Dashboard, path: str, method: str = "GET", body: Any = None, *,
               email: str | None = None, password: str | None = None) -> Any:
    """Call the API as the demo owner (or another member), as the page would."""
    login = await AsyncHTTPClient().fetch(HTTPRequest(
        dashboard.url + "/auth/login", "POST", headers={"Content-Type": "application/json"},
        body=json.dumps({"email": email or dashboard.email,
                         "password": password or dashboard.password})))
    token = json.loads(login.body)["accessToken"]
    answer = await AsyncHTTPClient().fetch(HTTPRequest(
        f"{dashboard.url}/api/v1/sites/{dashboard.site_id}{path}", method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        body=None if body is None else json.dumps(body)))
    return json.loads(answer.body)


async def test_the_owner_creates_a_rule_sees_it_fire_and_its_delivery_and_sends_a_test(
        page: Page, browser: Browser, dashboard: Dashboard, deps, receiver, artifacts,
        test_password_hash):
    hook_url, hooked, _ = receiver
    await _api(dashboard, "/notifications", "PUT", {
        "webhook": {"enabled": True, "url": hook_url, "secret": WEBHOOK_SECRET}})
    await sign_in(page, dashboard)
    await page.get_by_role("link", name="Alerts").click()
    await expect(page.get_by_text("No alert rules yet")).to_be_visible()
    await expect(page.get_by_text("Nothing sent yet")).to_be_visible()

    await page.get_by_label("Watch for").select_option("checkoutErrors")
    await page.get_by_label("Name").fill("Checkout broken")
    await page.get_by_label("Sessions with an error in the last hour").fill("2")
    await page.get_by_role("checkbox", name="E-mail").uncheck()
    await page.get_by_role("checkbox", name="Signed webhook").check()
    await page.get_by_role("button", name="Create rule").click()
    await expect(page.locator("#alerts-said")).to_contain_text("Checkout broken")
    rules = page.locator("#alert-rules")
    row = rules.locator("tbody tr")
    await expect(row).to_contain_text("Not evaluated yet")
    await expect(row).to_contain_text("2 sessions on /checkout, /cart")
    await expect(row).to_contain_text("Signed webhook")

    # Three sessions hit an error on checkout: the evaluator fires the rule and the webhook
    # receiver answers 204.
    [rule] = await alerts.list_rules(deps.store, dashboard.site_id)
    now = datetime.now(UTC)
    await figures.occurrences(deps.store, dashboard.site_id, "e-ui", now - timedelta(minutes=5),
                              3, page="/checkout/pay")
    evaluator = AlertEvaluator(deps.store, Metrics(), deps.notifier, interval_seconds=60,
                               purge_interval_seconds=3600)
    assert await evaluator.evaluate_site(dashboard.site_id, now) == 1
    assert await deps.notifier.drain(within=10)
    assert [hook["body"]["rule"]["id"] for hook in hooked] == [rule["_id"]]

    await page.reload()
    await expect(row).to_contain_text("Firing")
    await expect(row).to_contain_text("sessions 3, threshold 2")
    log = page.locator("#alert-deliveries tbody tr")
    await expect(log).to_have_count(1)
    for cell in ("Checkout broken", "Signed webhook", "Delivered", "HTTP 204"):
        await expect(log).to_contain_text(cell)
    await expect(log.locator("td[data-label='Attempts']")).to_have_text("1")

    await page.get_by_role("button", name="Send test on Signed webhook").click()
    await expect(page.locator("li[data-channel='webhook']")).to_contain_text(
        "Test delivered (HTTP 204).")
    assert hooked[-1]["body"]["type"] == "alert.test" and hooked[-1]["valid"]
    await expect(page.locator("li[data-channel='slack']")).to_contain_text("not set up")
    await assert_accessible(page, "the alerts page at 1280 px")
    await page.screenshot(path=artifacts("alerts-1280.png"), full_page=True)

    # Edit: a new name and threshold; then muted for everyone, and for the owner's own mail.
    await page.get_by_role("button", name="Edit Checkout broken").click()
    await expect(page.get_by_role("heading", name="Edit “Checkout broken”")).to_be_visible()
    await page.get_by_label("Name").fill("Checkout or cart broken")
    await page.get_by_label("Sessions with an error in the last hour").fill("4")
    await page.get_by_role("button", name="Save rule").click()
    await expect(row).to_contain_text("4 sessions on /checkout, /cart")
    await expect(page.get_by_role("heading", name="New rule")).to_be_visible()
    await page.get_by_role("button", name="Mute Checkout or cart broken for everyone").click()
    await expect(row).to_contain_text("muted for everyone")
    await page.get_by_role("button", name="Mute for me: Checkout or cart broken").click()
    await expect(row).to_contain_text("Your e-mail is left out.")
    await page.get_by_label("Send me").select_option("weekly")
    await page.get_by_role("button", name="Save digest").click()
    await expect(page.get_by_text("Digest saved.")).to_be_visible()
    mine = await _api(dashboard, "/alert-preferences")
    assert mine == {"mutedRules": [rule["_id"]], "digest": "weekly"}
    stored = (await alerts.list_rules(deps.store, dashboard.site_id))[0]
    assert (stored["name"], stored["params"]["sessions"], stored["muted"]) == (
        "Checkout or cart broken", 4, True)

    await page.set_viewport_size(PHONE)
    await expect(row.locator("td[data-label='Last evaluation']")).to_be_visible()
    await assert_accessible(page, "the alerts page at 390 px, the owner's view")
    await page.screenshot(path=artifacts("alerts-390.png"), full_page=True)

    # A viewer on a phone reads the rules and the log, mutes the rule for themselves only.
    owner = await accounts.find_user_by_email(deps.store, dashboard.email)
    organization = next(iter((await accounts.load_authenticated_user(
        deps.store, owner["_id"], "")).roles))
    await accounts.add_member(deps.store, organization_id=organization, email=VIEWER,
                              password_hash=test_password_hash, display_name="Viewer",
                              role="viewer")
    context = await browser.new_context(viewport=PHONE)
    try:
        viewer = await context.new_page()
        await sign_in(viewer, dashboard, VIEWER, TEST_PASSWORD)
        await viewer.goto(dashboard.page_url("/alerts"))
        await expect(viewer.locator("#viewer-note")).to_be_visible()
        await expect(viewer.locator("#rule-form")).to_have_count(0)
        await expect(viewer.get_by_role("button", name="Delete Checkout or cart broken")
                     ).to_have_count(0)
        await expect(viewer.get_by_role("button", name="Send test on Signed webhook")
                     ).to_have_count(0)
        await expect(viewer.locator("#alert-deliveries tbody tr")).to_have_count(1)
        await viewer.get_by_role("button", name="Mute for me: Checkout or cart broken").click()
        await expect(viewer.get_by_role("button", name="Unmute for me: Checkout or cart broken")
                     ).to_be_visible()
        await assert_accessible(viewer, "the alerts page at 390 px, a viewer's view")
        await viewer.screenshot(path=artifacts("alerts-viewer-390.png"), full_page=True)
    finally:
        await context.close()
    assert await alerts.members_muting(deps.store, dashboard.site_id, rule["_id"]) == sorted(
        [owner["_id"], (await accounts.find_user_by_email(deps.store, VIEWER))["_id"]])
