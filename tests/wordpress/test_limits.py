"""The public routes' limits (issue 33): requests per address and minute on /leads, /surveys and
/statement, and a cap on the outbox; what is refused is counted on the settings screen."""

from __future__ import annotations

import json

from playwright.async_api import Browser

from tests.support.browser import eventually
from tests.support.wordpress import ADMIN
from tests.wordpress.conftest import Shop, ShopFactory, documents, log_in, submit

JSON = {"Content-Type": "application/json"}


async def _settings_page(shop: Shop) -> str:
    return await shop.wp.php("""wp_set_current_user(1); ob_start();
        \\VisitorService\\Settings::render(); return ob_get_clean();""")


async def _counts(shop: Shop) -> dict[str, int]:
    return await shop.wp.php("return \\VisitorService\\Options::dropped();") or {}


async def test_one_address_is_refused_after_its_limit_per_minute_and_refusals_are_counted(
        open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    answers = []
    for number in range(11):
        lead = await shop.http("/wp-json/service/v1/leads", "POST", headers=JSON, body=json.dumps(
            {"visitorId": f"visitor-flood-{number}", "email": f"flood{number}@example.com"}))
        answers.append(lead.code)
    assert answers == [202] * 10 + [429]
    assert json.loads(lead.body)["code"] == "visitor_service_rate_limited"
    assert 0 < int(lead.headers["Retry-After"]) <= 60
    # Each route has its own count: surveys are still accepted from this address.
    survey = {"visitorId": "visitor-flood-0", "surveyId": "nps",
              "answers": [{"question": "Q?", "score": 3}]}
    codes = [(await shop.http("/wp-json/service/v1/surveys", "POST", headers=JSON,
                              body=json.dumps(survey))).code for _ in range(11)]
    assert codes == [202] * 10 + [429]
    statements = [(await shop.http("/wp-json/service/v1/statement?url=" + shop.wp.product_url)
                   ).code for _ in range(121)]
    assert statements == [200] * 120 + [429]

    assert (await _counts(shop))["rate_limited"] == 3
    page = await _settings_page(shop)
    assert ("3 requests to the public routes were refused: too many from one address in a "
            "minute.") in page
    assert "visitor_service_client_ip" in page  # the hint for a shop behind a proxy
    # What was accepted arrived; what was refused did not.
    leads = await documents(deps, "leads", shop.tenant.site_id)
    assert "flood10@example.com" not in {lead["email"] for lead in leads}


async def test_a_full_outbox_refuses_new_items_and_counts_them(open_shop: ShopFactory):
    shop = await open_shop({"recordings": False})
    await shop.service.stop()  # an outage long enough to fill the outbox
    await shop.wp.php("""global $wpdb; $wpdb->query('INSERT INTO '
        . \\VisitorService\\Outbox::table() . " (path, body, attempts, next_attempt_at, created_at)
        SELECT '/ingest/leads', '{}', 3, UNIX_TIMESTAMP() + 3600, UNIX_TIMESTAMP()
        FROM seq_1_to_1000"); return true;""")
    lead = await shop.http("/wp-json/service/v1/leads", "POST", headers=JSON, body=json.dumps(
        {"visitorId": "visitor-full-1", "email": "full@example.com"}))
    assert lead.code == 503 and json.loads(lead.body)["code"] == "not_kept"
    cart = "%7B%22" + str(shop.wp.product_id) + "%22%3A1%7D"
    checkout = await shop.http("/?fake_wc_checkout=1&email=full@example.com", headers={
        "Cookie": f"svc_vid=visitor-full-1; fake_wc_cart={cart}"})
    # The shop's checkout goes on; its order event and its lead are not kept.
    assert checkout.code == 200
    assert await shop.wp.php("return \\VisitorService\\Outbox::backlog();") == 1000
    assert (await _counts(shop))["outbox_full"] == 3
    page = await _settings_page(shop)
    assert "1000 leads are waiting to be sent." in page
    assert ("3 leads, survey answers and shop events were refused because the outbox was "
            "full.") in page


async def test_retry_now_sends_the_backlog_while_the_owner_waits(
        browser: Browser, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    await shop.service.stop()
    for number in range(2):
        lead = await shop.http("/wp-json/service/v1/leads", "POST", headers=JSON,
                               body=json.dumps({"visitorId": f"visitor-retry-{number}",
                                                "email": f"retry{number}@example.com"}))
        assert lead.code == 202

    async def tried() -> bool:  # the loopback delivery found the service down
        return bool(await shop.wp.php("""global $wpdb; return (int) $wpdb->get_var(
            'SELECT MAX(attempts) FROM ' . \\VisitorService\\Outbox::table());"""))

    await eventually(tried, message="the first delivery attempt")
    shop.service.start()
    admin = await browser.new_context()
    await log_in(admin, shop, ADMIN)
    page = await admin.new_page()
    await page.goto(shop.url + "/wp-admin/options-general.php?page=visitor-service")
    assert "2 leads are waiting to be sent." in await page.text_content(
        "#visitor-service-backlog")
    await submit(page, "#retry-now", "**retried=1")
    assert "Nothing is waiting to be sent." in await page.text_content(
        "#visitor-service-backlog")
    assert await page.locator("#retry-now").count() == 0
    leads = await documents(deps, "leads", shop.tenant.site_id)
    assert sorted(lead["email"] for lead in leads) == ["retry0@example.com", "retry1@example.com"]
    await admin.close()
