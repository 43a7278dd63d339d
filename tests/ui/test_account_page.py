"""The Account page and a two-factor sign-in in Chromium (issue 43 point 2): the owner changes
the password, turns two-factor on with a code from an app (pyotp here), keeps the recovery codes
shown once, then signs in with the password and a code; an organization that requires it walks
a member through the enrolment at sign-in, on a phone. Clean under axe-core at 390 and 1280 px."""

from __future__ import annotations

import time

import pyotp
from playwright.async_api import Browser, Page, expect

from tests.support.app import TEST_PASSWORD
from tests.ui.accessibility import assert_accessible
from tests.ui.conftest import Dashboard, sign_in

PHONE = {"width": 390, "height": 844}
NEW_PASSWORD = "seven owls argue about jam"
MEMBER = "member@demo.example"


def code_at(secret: str, steps_ahead: int = 0) -> str:
    return pyotp.TOTP(secret).at(time.time() + 30 * steps_ahead)


async def test_the_owner_changes_the_password_turns_on_two_factor_and_signs_in_with_a_code(
        page: Page, dashboard: Dashboard):
    await sign_in(page, dashboard)
    await page.get_by_role("link", name="Account").click()
    await expect(page.get_by_role("heading", name="Your account")).to_be_visible()
    await expect(page.locator("#two-factor-state")).to_contain_text("Off")
    await assert_accessible(page, "the account page at 1280 px")

    await page.get_by_label("Current password").fill("not the password")
    await page.get_by_label("New password").fill(NEW_PASSWORD)
    await page.get_by_role("button", name="Change password").click()
    await expect(page.locator("#password-form [role=alert]")).to_contain_text("not right")
    await page.get_by_label("Current password").fill(dashboard.password)
    await page.get_by_role("button", name="Change password").click()
    await expect(page.locator("#password-form")).to_contain_text("Password changed")

    await page.get_by_role("button", name="Turn on two-factor sign-in").click()
    secret = await page.get_by_label("Key", exact=True).input_value()
    await assert_accessible(page, "the account page showing a new key")
    await page.get_by_label("Code the app shows").fill(code_at(secret))
    await page.get_by_role("button", name="Confirm").click()
    await expect(page.locator("#recovery-codes li")).to_have_count(10)
    await expect(page.locator("#two-factor-state")).to_contain_text("10 of 10 recovery codes")
    await assert_accessible(page, "the account page with the recovery codes shown")

    await page.get_by_role("button", name="Sign out").click()
    await page.get_by_label("E-mail").fill(dashboard.email)
    await page.get_by_label("Password").fill(NEW_PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Two-factor sign-in")).to_be_visible()
    await assert_accessible(page, "the second step of a sign-in")
    await page.get_by_label("Code from your authenticator app").fill("000000")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("alert")).to_be_visible()
    await page.get_by_label("Code from your authenticator app").fill(code_at(secret, 1))
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_selector("#site-switcher")

    await page.set_viewport_size(PHONE)
    await page.goto(dashboard.page_url("/account"))
    await expect(page.locator("#two-factor-state")).to_contain_text("On")
    await assert_accessible(page, "the account page at 390 px")


async def test_a_required_second_factor_walks_a_member_through_enrolment_at_sign_in(
        page: Page, browser: Browser, dashboard: Dashboard, deps):
    organization = (await deps.store.collection("sites").find_one(
        {"_id": dashboard.site_id}))["organizationId"]
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url("/team"))
    await page.get_by_label("E-mail").fill(MEMBER)
    await page.get_by_role("button", name="Invite").click()
    link = await page.get_by_label("Invitation link").input_value()
    await page.goto(dashboard.page_url("/account"))
    await page.get_by_label("Require two-factor sign-in of every member").check()
    await expect(page.locator("#two-factor")).to_contain_text("Required")
    assert await deps.store.collection("two_factor_requirements").find_one(
        {"_id": organization})

    context = await browser.new_context(viewport=PHONE)
    try:
        member = await context.new_page()
        await member.goto(link)
        await member.get_by_label("Choose a password").fill(TEST_PASSWORD)
        await member.get_by_role("button", name="Join").click()
        await expect(member.get_by_role("heading", name="Set up two-factor sign-in")
                     ).to_be_visible()
        await assert_accessible(member, "the enrolment asked for at sign-in, at 390 px")
        await member.get_by_role("button", name="Show my key").click()
        secret = await member.get_by_label("Key", exact=True).input_value()
        await member.get_by_label("Code the app shows").fill(code_at(secret))
        await member.get_by_role("button", name="Turn on and sign in").click()
        await expect(member.locator("#recovery-codes li")).to_have_count(10)
        await assert_accessible(member, "the recovery codes at sign-in, at 390 px")
        await member.get_by_role("button", name="Continue").click()
        await member.wait_for_selector("#site-switcher")
        await expect(member.locator(".who")).to_contain_text(MEMBER)
    finally:
        await context.close()
