"""What the shop's own pages send (issue 33, points 6 and 7): the customer's text on checkout,
order-received and My Account pages is masked in recordings; a checkout lead names the page the
customer was on; addresses come from the site's own URL, not the Host header; Settings' check
proves what was typed."""

from __future__ import annotations

import json
from typing import Any

from playwright.async_api import Browser

from tests.browser.conftest import stored_segments
from tests.support.browser import eventually
from tests.support.wordpress import ADMIN
from tests.wordpress.conftest import ShopFactory, documents, log_in, submit

PERSONAL = "Carla Customer, 1 Mug Street, Berlin, carla@example.com, +49 30 1234567"


async def _recorded(browser: Browser, shop, deps, path: str, title: str) -> bytes:
    """Everything recorded of one visit to `path` (left for the home page, which uploads it), by
    a new visitor: the recording that started for it, none of the earlier ones. (Deleting the
    earlier ones instead raced the service's own transaction on them, which deadlocked
    SecantusDB.)"""
    recordings = deps.store.collection("recordings")
    earlier = [doc["_id"] async for doc in recordings.find({"siteId": shop.tenant.site_id})]
    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(shop.url + path)
    recording = await eventually(lambda: recordings.find_one(
        {"siteId": shop.tenant.site_id, "_id": {"$nin": earlier}}),
        message="the recording to start")
    await page.wait_for_timeout(500)
    await page.goto(shop.url + "/")

    async def uploaded() -> bytes:
        everything = b"".join(
            data for doc, data in await stored_segments(deps.store, shop.tenant.site_id)
            if doc["metadata"].get("recordingId") == recording["_id"])
        return everything if title.encode() in everything else b""

    everything = await eventually(uploaded, within=20, message=f"the recording of {path}")
    await context.close()
    return everything


async def test_checkout_order_received_and_account_pages_are_recorded_without_their_text(
        browser: Browser, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": True})
    await shop.wp.php(f"""
        foreach (['checkout' => 'Checkout', 'my-account' => 'My account', 'about' => 'About us']
                 as $slug => $title) {{
            if (!get_page_by_path($slug)) {{
                wp_insert_post(['post_type' => 'page', 'post_status' => 'publish',
                    'post_name' => $slug, 'post_title' => $title,
                    'post_content' => '<p id="customer">{PERSONAL}</p>']);
            }}
        }}
        return true;""")
    pages = {"/my-account/": "My account", "/checkout/?order-received=42": "Checkout"}
    for path, title in pages.items():
        html = (await shop.http(path)).body.decode()
        assert "rr-mask" in html.split("<body", 1)[1].split(">", 1)[0], path
        recorded = await _recorded(browser, shop, deps, path, title)
        assert b"Mug Street" not in recorded and b"carla@example.com" not in recorded, path
    # Any other page is recorded as shown: the check above would see the text.
    about = (await shop.http("/about/")).body.decode()
    assert "rr-mask" not in about.split("<body", 1)[1].split(">", 1)[0]
    assert b"Mug Street" in await _recorded(browser, shop, deps, "/about/", "About us")


async def test_a_checkout_lead_names_the_checkout_page_not_the_ajax_address(
        open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    cart = "%7B%22" + str(shop.wp.product_id) + "%22%3A1%7D"
    leads: list[dict[str, Any]] = []
    for number, referer in enumerate((shop.url + "/checkout/?step=2", "https://evil.example/")):
        placed = await shop.http(f"/?wc-ajax=checkout&email=ajax{number}@example.com", "POST",
                                 headers={"Referer": referer, "Cookie":
                                          f"svc_vid=visitor-ajax-{number}; fake_wc_cart={cart}"})
        assert placed.code == 200 and json.loads(placed.body)["result"] == "success"
        leads = await eventually(lambda n=number: _at_least(deps, shop, n + 1),
                                 message="the checkout lead")
    # The service stores an IP-literal host anonymised, as any address: compare the rest.
    urls = {lead["email"]: lead["url"].split(":", 2)[2] for lead in leads}
    port = shop.url.rsplit(":", 1)[1]
    # The page the customer was on; a foreign Referer is not believed: the checkout page.
    assert urls == {"ajax0@example.com": port + "/checkout/?step=2",
                    "ajax1@example.com": port + "/checkout/"}


async def _at_least(deps, shop, count: int) -> list[dict[str, Any]]:
    found = await documents(deps, "leads", shop.tenant.site_id)
    return found if len(found) >= count else []


async def test_addresses_come_from_the_sites_url_not_the_host_header(open_shop: ShopFactory):
    shop = await open_shop({"recordings": False})
    url = await shop.wp.php("""$_SERVER['HTTP_HOST'] = 'evil.example';
        $_SERVER['REQUEST_URI'] = '/checkout/?step=2';
        return \\VisitorService\\Request::currentUrl();""")
    assert url == shop.url + "/checkout/?step=2"


async def test_save_and_check_connection_checks_what_was_typed_and_says_it_once(
        browser: Browser, open_shop: ShopFactory):
    shop = await open_shop()
    admin = await browser.new_context()
    await log_in(admin, shop, ADMIN)
    page = await admin.new_page()
    screen = shop.url + "/wp-admin/options-general.php?page=visitor-service"
    await page.goto(screen)
    assert "Install on your shop" in await page.text_content("#visitor-service-keys-from")
    await page.fill("#vs-api", "sk_typed_but_wrong")
    await submit(page, "#check", "**checked=1**")
    assert "API key refused by the service." in await page.text_content(
        "#visitor-service-check.notice-error")
    await page.fill("#vs-api", shop.tenant.api_key)
    await submit(page, "#check", "**checked=1**")
    assert "API key: accepted." in await page.text_content("#visitor-service-check.notice-success")
    await page.goto(screen)  # a later visit: no stale result
    assert await page.locator("#visitor-service-check").count() == 0
    # Nothing saved: the check says what is missing.
    await page.fill("#vs-url", "")
    await page.fill("#vs-public", "")
    await submit(page, "#check", "**checked=1**")
    notice = await page.text_content("#visitor-service-check.notice-error")
    assert "The service URL is missing." in notice and "The public key is missing." in notice
    await admin.close()
