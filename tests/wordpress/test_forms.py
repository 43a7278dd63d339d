"""Form submissions as leads (issue 33, point 3): Contact Form 7, WPForms, Gravity Forms, Ninja
Forms, Formidable (test-only stand-ins that fire each plugin's documented hook with its documented
arguments: tests/wordpress/mu-plugins/fake-form-plugins.php), WooCommerce's account registration
(the WooCommerce stand-in) and WordPress's own comments (real core, wp-comments-post.php)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from playwright.async_api import Browser

from tests.support.browser import eventually
from tests.support.wordpress import ADMIN
from tests.wordpress.conftest import Shop, ShopFactory, documents, log_in, submit

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
PLUGINS = {"cf7": "contact-form-7:7", "wpforms": "wpforms:5", "gravity": "gravity-forms:4",
           "ninja": "ninja-forms:6", "formidable": "formidable:3"}


async def _submit(shop: Shop, plugin: str, email: str) -> None:
    answer = await shop.http("/wp-admin/admin-ajax.php", "POST", headers={
        **FORM, "Cookie": f"svc_vid=visitor-{plugin}", "Referer": shop.url + "/contact/"},
        body=urlencode({"action": "fake_form", "plugin": plugin, "email": email, "first": "Carla",
                        "last": "Customer", "phone": "+49 30 1234567",
                        "message": "a private message"}))
    assert answer.code == 200, answer.body


async def _comment(shop: Shop, post: int, email: str) -> None:
    answer = await shop.http("/wp-comments-post.php", "POST", headers={
        **FORM, "Cookie": "svc_vid=visitor-comment"}, body=urlencode({
            "comment_post_ID": post, "author": "Carla Commenter", "email": email,
            "comment": "Nice mugs, a private remark."}))
    assert answer.code == 302, answer.body
    # WordPress refuses a second comment from one address within 15 s (its flood check).
    await shop.wp.php("""global $wpdb; $wpdb->query("UPDATE $wpdb->comments SET comment_date_gmt
        = comment_date_gmt - INTERVAL 1 HOUR, comment_date = comment_date - INTERVAL 1 HOUR");
        return true;""")


async def _leads(deps, shop: Shop, count: int) -> list[dict[str, Any]]:
    found = await documents(deps, "leads", shop.tenant.site_id)
    return found if len(found) >= count else []


async def test_each_form_plugins_submission_becomes_a_lead_with_its_email_name_and_phone(
        open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    for plugin in PLUGINS:
        await _submit(shop, plugin, f"{plugin}@example.com")
    registered = await shop.http("/my-account/", "POST", headers={
        **FORM, "Cookie": "svc_vid=visitor-registration"}, body=urlencode({
            "register": 1, "email": "new@example.com", "first_name": "Nina",
            "last_name": "New"}))
    assert registered.code == 302
    leads = await eventually(lambda: _leads(deps, shop, len(PLUGINS) + 1), message="the leads")
    by_form = {lead["formId"]: lead for lead in leads}
    assert set(by_form) == {*PLUGINS.values(), "woocommerce-registration:account"}
    for plugin, form in PLUGINS.items():
        lead = by_form[form]
        assert lead["email"] == f"{plugin}@example.com", lead
        assert (lead["name"], lead["phone"], lead["kind"]) == (
            "Carla Customer", "+49 30 1234567", "form"), lead
        assert lead["visitorId"] == f"visitor-{plugin}"
        assert lead["url"].endswith("/contact/")  # the page the form was on, not admin-ajax
    account = by_form["woocommerce-registration:account"]
    assert (account["email"], account["name"]) == ("new@example.com", "Nina New")
    assert account["url"].endswith("/my-account/")
    # Only the e-mail address, the name and the phone: no other field of the forms.
    assert "private message" not in str(leads)


async def test_the_owner_chooses_which_forms_count_comments_only_when_chosen(
        browser: Browser, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    post = await shop.wp.php("""delete_option('visitor_service_form_sources');
        return wp_insert_post(['post_type' => 'post', 'post_status' => 'publish',
            'post_title' => 'Mugs', 'comment_status' => 'open']);""")
    await _comment(shop, post, "before@example.com")  # comments do not count by default

    admin = await browser.new_context()
    await log_in(admin, shop, ADMIN)
    page = await admin.new_page()
    await page.goto(shop.url + "/wp-admin/options-general.php?page=visitor-service")
    assert await page.is_checked("#vs-forms-contact-form-7")
    assert not await page.is_checked("#vs-forms-comments")
    await page.check("#vs-forms-comments")
    await page.uncheck("#vs-forms-contact-form-7")
    await submit(page, "#submit", "**settings-updated=true")
    await admin.close()

    await _comment(shop, post, "after@example.com")
    await _submit(shop, "cf7", "cf7-off@example.com")
    await _submit(shop, "wpforms", "wpforms-on@example.com")
    leads = await eventually(lambda: _leads(deps, shop, 2), message="the chosen forms' leads")
    assert sorted((lead["email"], lead["formId"], lead.get("name")) for lead in leads) == [
        ("after@example.com", f"comments:post-{post}", "Carla Commenter"),
        ("wpforms-on@example.com", "wpforms:5", "Carla Customer")]


async def test_a_comment_leads_page_is_the_post_it_was_left_on(open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    post, permalink = await shop.wp.php("""
        update_option('visitor_service_form_sources', ['comments']);
        $post = wp_insert_post(['post_type' => 'post', 'post_status' => 'publish',
            'post_title' => 'Mug care', 'comment_status' => 'open']);
        return [$post, get_permalink($post)];""")
    await _comment(shop, post, "reader@example.com")
    lead = (await eventually(lambda: _leads(deps, shop, 1), message="the comment's lead"))[0]
    # The form posts to wp-comments-post.php; the page the reader was on is the post.
    assert lead["url"] == permalink and permalink.startswith(shop.url + "/mug-care")


async def test_a_form_under_gpc_or_without_the_visitor_id_is_not_a_lead(
        open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    await shop.http("/wp-admin/admin-ajax.php", "POST", headers={**FORM, "Sec-GPC": "1",
                    "Cookie": "svc_vid=visitor-gpc"}, body=urlencode(
        {"action": "fake_form", "plugin": "wpforms", "email": "gpc@example.com"}))
    await shop.http("/wp-admin/admin-ajax.php", "POST", headers=FORM, body=urlencode(
        {"action": "fake_form", "plugin": "wpforms", "email": "nobody@example.com"}))
    assert await shop.wp.php("return \\VisitorService\\Outbox::backlog();") == 0
    assert await documents(deps, "leads", shop.tenant.site_id) == []
