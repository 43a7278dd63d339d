"""The Team page in Chromium (issue 43 point 1): the owner invites a colleague, passes on the
link shown once, the colleague joins from it with a password of their own and is signed in; the
owner sees them with their role and last sign-in, changes the role and removes them. Clean under
axe-core at 390 and 1280 px."""

from __future__ import annotations

from playwright.async_api import Browser, Page, expect

from tests.ui.accessibility import assert_accessible
from tests.ui.conftest import Dashboard, sign_in

PHONE = {"width": 390, "height": 844}
COLLEAGUE = "colleague@demo.example"
COLLEAGUE_PASSWORD = "lanterns over the quiet harbour"


async def test_the_owner_invites_a_colleague_who_joins_and_is_then_changed_and_removed(
        page: Page, browser: Browser, dashboard: Dashboard):
    await sign_in(page, dashboard)
    await page.get_by_role("link", name="Team").click()
    members = page.locator("#members")
    await expect(members.locator(f"tr[data-member='{dashboard.email}']")).to_contain_text("owner")
    await assert_accessible(page, "the team page at 1280 px")

    await page.get_by_label("E-mail").fill(COLLEAGUE)
    await page.get_by_label("Role", exact=True).select_option("admin")
    await page.get_by_role("button", name="Invite").click()
    link = await page.get_by_label("Invitation link").input_value()
    assert "/app/invite#" in link
    await expect(page.locator("#invitations")).to_contain_text(COLLEAGUE)
    await assert_accessible(page, "the team page with an invitation link shown")

    # The colleague opens the link in a browser of their own, on a phone.
    context = await browser.new_context(viewport=PHONE)
    try:
        colleague = await context.new_page()
        await colleague.goto(link)
        await expect(colleague.get_by_role("heading", name="Join Demo Shop Ltd")
                     ).to_be_visible()
        await expect(colleague.get_by_text(COLLEAGUE)).to_be_visible()
        await assert_accessible(colleague, "the invitation page at 390 px")
        await colleague.get_by_label("Your name (optional)").fill("Colleague")
        await colleague.get_by_label("Choose a password").fill("password123")
        await colleague.get_by_role("button", name="Join").click()
        await expect(colleague.get_by_role("alert")).to_contain_text("too common")
        await colleague.get_by_label("Choose a password").fill(COLLEAGUE_PASSWORD)
        await colleague.get_by_role("button", name="Join").click()
        await colleague.wait_for_selector("#site-switcher")
        await expect(colleague.locator(".who")).to_contain_text(f"{COLLEAGUE} · admin")
        await colleague.goto(dashboard.page_url("/team"))
        await expect(colleague.locator("#members")).to_contain_text(COLLEAGUE)
        await assert_accessible(colleague, "the team page at 390 px")
    finally:
        await context.close()

    await page.reload()
    row = page.locator(f"#members tr[data-member='{COLLEAGUE}']")
    await expect(row).to_contain_text("admin")
    await expect(row).not_to_contain_text("never")
    await expect(page.locator("#invitations")).to_have_count(0)
    await page.get_by_label(f"Role of {COLLEAGUE}", exact=True).select_option("viewer")
    await page.get_by_role("button", name=f"Change role of {COLLEAGUE}").click()
    await expect(row).to_contain_text("viewer")
    page.once("dialog", lambda dialog: dialog.accept())
    await page.get_by_role("button", name=f"Remove {COLLEAGUE}").click()
    await expect(row).to_have_count(0)
    await page.set_viewport_size(PHONE)
    await assert_accessible(page, "the team page at 390 px, the owner's view")


async def test_without_mail_the_owner_hands_a_member_a_reset_link_that_sets_a_new_password(
        page: Page, browser: Browser, dashboard: Dashboard):
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url("/team"))
    await page.get_by_label("E-mail").fill(COLLEAGUE)
    await page.get_by_role("button", name="Invite").click()
    invitation = await page.get_by_label("Invitation link").input_value()

    context = await browser.new_context(viewport=PHONE)
    try:
        member = await context.new_page()
        await member.goto(invitation)
        await member.get_by_label("Choose a password").fill(COLLEAGUE_PASSWORD)
        await member.get_by_role("button", name="Join").click()
        await member.wait_for_selector("#site-switcher")

        await page.reload()
        await page.get_by_role("button", name=f"Reset password of {COLLEAGUE}").click()
        reset_link = await page.get_by_label(f"Reset link for {COLLEAGUE}").input_value()
        assert "/app/reset#" in reset_link

        # Forgetting it, the member first finds the form that asks for a link by mail.
        await member.locator("#logout").click()
        await member.get_by_role("link", name="Forgot your password?").click()
        await member.get_by_label("E-mail").fill(COLLEAGUE)
        await member.get_by_role("button", name="Send a reset link").click()
        await expect(member.get_by_role("status")).to_contain_text("ask an owner")
        await assert_accessible(member, "the forgotten-password page at 390 px")

        await member.goto(reset_link)
        await member.get_by_label("New password").fill("new lanterns over the harbour")
        await assert_accessible(member, "the reset page at 390 px")
        await member.get_by_role("button", name="Set password").click()
        await expect(member.get_by_role("heading", name="Password set")).to_be_visible()
        await member.get_by_role("link", name="Sign in").click()
        await member.get_by_label("E-mail").fill(COLLEAGUE)
        await member.get_by_label("Password").fill("new lanterns over the harbour")
        await member.get_by_role("button", name="Sign in").click()
        await member.wait_for_selector("#site-switcher")
    finally:
        await context.close()
