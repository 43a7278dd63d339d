"""Settings → Visitor Service as the shop owner uses it: the form itself, in real Chromium.

Issue 33: the API key saved through the form (options.php) is never autoloaded, and a copy left
in the database once the key moves to wp-config.php is deleted, with a notice. Issue 40: what waits
in the outbox is counted by kind.
"""

from __future__ import annotations

import json
import re
from typing import Any

from playwright.async_api import Browser, BrowserContext, Page

from tests.support.wordpress import ADMIN
from tests.wordpress.conftest import Shop, ShopFactory, log_in, submit

SCREEN = "/wp-admin/options-general.php?page=visitor-service"


async def _key_row(shop: Shop) -> dict[str, Any] | None:
    return await shop.wp.php("""global $wpdb; return $wpdb->get_row($wpdb->prepare(
        "SELECT option_value, autoload FROM $wpdb->options WHERE option_name = %s",
        'visitor_service_api_key'), ARRAY_A);""")


async def _settings_screen(browser: Browser, shop: Shop) -> tuple[BrowserContext, Page]:
    admin = await browser.new_context()
    await log_in(admin, shop, ADMIN)
    page = await admin.new_page()
    await page.goto(shop.url + SCREEN)
    return admin, page


async def test_the_api_key_saved_through_the_settings_form_is_not_autoloaded(
        browser: Browser, open_shop: ShopFactory):
    shop = await open_shop()
    # A shop whose owner never saved a key: the form's first save adds the row.
    await shop.wp.php("delete_option('visitor_service_api_key'); return true;")
    admin, page = await _settings_screen(browser, shop)
    await page.fill("#vs-api", shop.tenant.api_key)
    await submit(page, "#submit", "**settings-updated=true")
    assert await _key_row(shop) == {"option_value": shop.tenant.api_key, "autoload": "no"}
    # A second save with another key: still not autoloaded.
    await page.fill("#vs-api", "sk_second_key")
    await submit(page, "#submit", "**settings-updated=true")
    assert await _key_row(shop) == {"option_value": "sk_second_key", "autoload": "no"}
    assert await shop.wp.php("""return array_key_exists('visitor_service_api_key',
        wp_load_alloptions(true));""") is False
    await admin.close()


async def test_an_autoloaded_key_from_an_older_version_is_stored_again_without_autoload(
        open_shop: ShopFactory):
    shop = await open_shop()
    stored = await shop.wp.php(f"""delete_option('visitor_service_api_key');
        add_option('visitor_service_api_key', '{shop.tenant.api_key}', '', 'yes');
        update_option('visitor_service_db_version', '0.1.0');
        global $wpdb; return $wpdb->get_var("SELECT autoload FROM $wpdb->options
            WHERE option_name = 'visitor_service_api_key'");""")
    assert stored == "yes"
    assert (await shop.http("/")).code == 200  # the first request after the update
    assert await _key_row(shop) == {"option_value": shop.tenant.api_key, "autoload": "no"}


async def test_moving_the_key_to_wp_config_deletes_the_database_copy_and_says_so(
        browser: Browser, open_shop: ShopFactory):
    shop = await open_shop()
    assert await _key_row(shop) is not None
    admin, page = await _settings_screen(browser, shop)
    flag = shop.wp.site / "wp-content" / "mu-plugins" / "api-key-constant.txt"
    flag.write_text(shop.tenant.api_key)
    try:
        await page.goto(shop.url + SCREEN)  # the owner's next admin screen
        notice = await page.text_content("#visitor-service-key-removed")
        assert "defined in wp-config.php" in notice and "database copy was deleted" in notice
        assert await _key_row(shop) is None
        assert "Set in wp-config.php" in await page.content()
        # Saving the form now stores no copy, and the notice was shown once.
        await page.fill("#vs-public", shop.tenant.public_key)
        await submit(page, "#submit", "**settings-updated=true")
        assert await _key_row(shop) is None
        assert await page.locator("#visitor-service-key-removed").count() == 0
    finally:
        flag.unlink()
        await admin.close()


async def test_the_settings_page_counts_what_waits_to_be_sent_by_kind(open_shop: ShopFactory):
    shop = await open_shop({"recordings": False})
    assert await _waiting(shop) == ["Nothing is waiting to be sent."]
    bodies = [("/ingest/leads", {"leadId": "l1", "email": "a@example.com"}),
              ("/ingest/surveys", {"surveyId": "nps", "responseId": "r1"}),
              ("/ingest/surveys", {"surveyId": "nps", "responseId": "r2"}),
              ("/ingest/commerce", {"eventId": "e1", "type": "order_placed", "orderId": "7"}),
              ("/ingest/commerce", {"eventId": "e2", "type": "order_paid", "orderId": "7"}),
              ("/ingest/commerce", {"eventId": "e3", "type": "add_to_cart", "productId": "2"}),
              ("/ingest/commerce", {"eventId": "e4", "type": "checkout_started"})]
    # Kept as a delivery that failed leaves them: tried, due again in an hour.
    await shop.wp.php(f"""global $wpdb;
        foreach (json_decode('{json.dumps(bodies)}', true) as [$path, $body]) {{
            $wpdb->insert(\\VisitorService\\Outbox::table(), ['path' => $path,
                'body' => wp_json_encode($body), 'attempts' => 1,
                'next_attempt_at' => time() + 3600, 'created_at' => time()]);
        }}
        return true;""")
    assert await _waiting(shop) == [
        "2 order events (placed, paid, refunded or cancelled) are waiting to be sent.",
        "1 lead is waiting to be sent.",
        "2 survey answers are waiting to be sent.",
        "2 cart and checkout events are waiting to be sent."]


async def _waiting(shop: Shop) -> list[str]:
    """The Delivery section's lines, as the owner reads them."""
    page = await shop.wp.php("""wp_set_current_user(1); ob_start();
        \\VisitorService\\Settings::render(); return ob_get_clean();""")
    listed = re.search(r'<ul id="visitor-service-backlog">(.*?)</ul>', page, re.S)
    return re.findall(r"<li>(.*?)</li>", listed.group(1)) if listed else []
