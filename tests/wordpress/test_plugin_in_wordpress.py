"""The WordPress plugin inside a real WordPress, against the real service (issue 17).

Each test drives the shop as a visitor would (real Chromium, or plain HTTP where no browser is
needed) and checks what arrived where it lands: in the service's store. WooCommerce is the
test-only mu-plugin tests/wordpress/mu-plugins/fake-woocommerce.php.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from playwright.async_api import Browser

from tests.support.app import pageviews
from tests.support.browser import eventually
from tests.wordpress.conftest import ShopFactory, documents, log_in, submit

JSON = {"Content-Type": "application/json"}
# Enqueued by WordPress: the stub inline before the loader, whose tag gets async and the addresses.
LOADER_LINE = re.compile(r"<script[^>]*>\s*window\.svc = .*?</script>\s*<script async [^>]*"
                         r"src=[\"'][^\"']*sdk/v1/loader\.js[^>]*></script>", re.S)


def _loader_block(html: str) -> str:
    found = LOADER_LINE.search(html)
    assert found, "the loader is not on the page"
    return found.group(0)


async def test_rendering_a_page_makes_no_call_to_the_service(open_shop: ShopFactory):
    shop = await open_shop({"recordings": False})
    before = len(shop.service.requests)
    for path in ("/", shop.wp.product_url.removeprefix(shop.url), "/?s=mug"):
        answer = await shop.http(path, headers={"Cookie": "svc_vid=visitor-ttfb-1"})
        assert answer.code == 200 and b"sdk/v1/loader.js" in answer.body
    await asyncio.sleep(0.5)
    assert shop.service.requests[before:] == []


async def test_two_visitors_of_one_cached_product_page_each_get_their_view_attributed(
        browser: Browser, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    assert shop.check["ok"], shop.check
    product = str(shop.wp.product_id)
    seen = []
    for visitor in (1, 2):
        context = await browser.new_context()
        page = await context.new_page()
        answer = await page.goto(shop.wp.product_url)
        seen.append((answer.headers.get("x-cache"), await answer.text()))
        await eventually(lambda n=visitor: _attributed(deps, shop, n),
                         message="the product view attributed by its statement")
        await context.close()
    (first_state, first_html), (second_state, second_html) = seen
    # The second visitor got the very same bytes from the cache...
    assert (first_state, second_state) == ("MISS", "HIT") and first_html == second_html
    # ...which hold no statement, nonce or anything else per visitor: only the product mark.
    block = _loader_block(first_html)
    assert "data-product-page" in block and "v1." not in first_html.replace("v1/", "")
    assert "data-product-statement" not in block
    views = await pageviews(deps, shop.tenant.site_id)
    assert len({view["visitorId"] for view in views}) == 2
    assert all(view["product"] == {"productId": product, "via": "statement"} for view in views)


async def _attributed(deps, shop, count: int) -> list[dict[str, Any]]:
    views = [view for view in await pageviews(deps, shop.tenant.site_id) if view.get("product")]
    return views if len(views) >= count else []


async def test_a_logged_in_customers_pageview_is_linked_to_the_user_and_the_page_names_nobody(
        browser: Browser, open_shop: ShopFactory, deps):
    from tests.support.wordpress import CUSTOMER
    shop = await open_shop({"recordings": False})
    anonymous = (await shop.http("/")).body.decode()
    context = await browser.new_context()
    await log_in(context, shop, CUSTOMER)
    # A login from before the plugin was active has no marker cookie: the page gives it one.
    await context.clear_cookies(name="svc_wp_li")
    page = await context.new_page()
    # Which answers the page's scripts read to the end (issue 33: the loader left this one
    # unread, so the request stayed open).
    await page.add_init_script("""window.bodiesRead = [];
        for (const name of ['text', 'json', 'arrayBuffer', 'blob']) {
          const original = Response.prototype[name];
          Response.prototype[name] = function (...args) {
            window.bodiesRead.push(decodeURIComponent(this.url));
            return original.apply(this, args);
          };
        }""")
    answer = await page.goto(shop.wp.product_url)
    html = await answer.text()
    assert answer.headers.get("x-cache") == "BYPASS"
    view = (await eventually(lambda: pageviews(deps, shop.tenant.site_id),
                             message="the logged-in pageview"))[0]
    assert view["wpUserId"] == str(shop.wp.customer_id)
    await eventually(lambda: page.evaluate(
        "window.bodiesRead.some((address) => address.includes('service/v1/pageview'))"),
        message="the loader reading the shop's answer to the pageview")
    # The shop server vouched for the product itself (no statement needed on this path).
    assert view["product"] == {"productId": str(shop.wp.product_id), "via": "server"}
    assert view["visitorId"] == await page.evaluate("localStorage.getItem('wpelVisitorId')")
    # What the plugin printed is the same for everyone: no user id, no nonce, no statement.
    assert _loader_block(html).replace(" data-product-page", "") == _loader_block(anonymous)
    assert "wpUserId" not in html and "wpApiSettings" not in html
    await context.close()


async def test_a_form_lead_carries_the_live_cart_the_session_id_and_the_user_id(
        browser: Browser, open_shop: ShopFactory, deps):
    from tests.support.wordpress import CUSTOMER
    shop = await open_shop({"recordings": False})
    context = await browser.new_context()
    product = shop.wp.product_id
    await context.add_cookies([
        {"name": "fake_wc_cart", "value": json.dumps({str(product): 2}), "url": shop.url},
        {"name": "fake_wc_session", "value": "wcsession42", "url": shop.url}])
    await log_in(context, shop, CUSTOMER)
    page = await context.new_page()
    await page.goto(shop.url + "/")
    await page.wait_for_function("window.svc && !window.svc.q")
    status = await page.evaluate("""svc('lead', {email: 'Carla@Example.com', name: 'Carla',
        formId: 'newsletter', fields: {topic: 'mugs'}}).then((r) => r && r.status)""")
    assert status == 202
    lead = (await eventually(lambda: documents(deps, "leads", shop.tenant.site_id),
                             message="the lead"))[0]
    assert lead["email"] == "carla@example.com" and lead["kind"] == "form"
    assert lead["wpUserId"] == str(shop.wp.customer_id)
    assert lead["ecommerceSessionId"] == "wcsession42"
    assert lead["cart"] == {"items": [{"productId": str(product), "name": "Blue mug",
                                       "quantity": 2, "price": 25}],
                            "total": 25, "currency": "EUR"}
    assert lead["visitorId"] == await page.evaluate("localStorage.getItem('wpelVisitorId')")
    await context.close()


async def test_a_survey_answer_is_posted_through_the_route_and_bad_input_is_refused(
        browser: Browser, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    page = await browser.new_page()
    await page.goto(shop.url + "/")
    await page.wait_for_function("window.svc && !window.svc.q")
    status = await page.evaluate("""svc('survey', {surveyId: 'nps', answers: [
        {question: 'How likely are you to recommend us?', score: 9, text: 'Nice mugs'}]})
        .then((r) => r && r.status)""")
    assert status == 202
    survey = (await eventually(lambda: documents(deps, "survey_responses", shop.tenant.site_id),
                               message="the survey answer"))[0]
    assert survey["surveyId"] == "nps" and survey["answers"][0]["score"] == 9
    assert survey["visitorId"] == await page.evaluate("localStorage.getItem('wpelVisitorId')")

    bad = await shop.http("/wp-json/service/v1/surveys", "POST", headers=JSON, body=json.dumps(
        {"visitorId": "v1", "surveyId": "nps", "answers": [{"score": "high"}]}))
    assert bad.code == 400 and json.loads(bad.body)["code"] == "rest_invalid_param"
    no_email = await shop.http("/wp-json/service/v1/leads", "POST", headers=JSON,
                               body=json.dumps({"visitorId": "v1", "email": "not-an-email"}))
    assert no_email.code == 400 and "email" in json.loads(no_email.body)["data"]["params"]
    stranger = await shop.http("/wp-json/service/v1/pageview", "POST", headers=JSON,
                               body=json.dumps({"visitorId": "v1", "url": shop.url + "/",
                                                "wpUserId": 1}))
    assert stranger.code == 401  # no login (or no nonce): nobody can post as a user
    await asyncio.sleep(0.5)
    assert len(await documents(deps, "survey_responses", shop.tenant.site_id)) == 1
    assert await documents(deps, "leads", shop.tenant.site_id) == []


async def test_a_php_warning_of_the_theme_arrives_as_an_error_from_php(
        open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    page = await shop.http("/?svc_warn=1", headers={"Cookie": "svc_vid=visitor-php-1"})
    assert page.code == 200 and b'id="size"' in page.body
    error = (await eventually(lambda: documents(deps, "errors", shop.tenant.site_id),
                              message="the PHP warning, grouped by the worker"))[0]
    text = json.dumps(error, default=str)
    assert 'Undefined array key "extra-large"' in error["message"]
    assert '"php"' in text and "E_WARNING" in text
    assert "visitor-service-test/functions.php" in text
    assert error["visitorId"] == "visitor-php-1"


async def test_php_errors_are_bounded_and_deduplicated_per_request(open_shop: ShopFactory):
    shop = await open_shop({"recordings": False})
    page = await shop.http("/?svc_noise=1", headers={"Cookie": "svc_vid=visitor-noise-1"})
    assert page.code == 200

    async def sent() -> list[tuple[str, str, int]]:
        return [r for r in shop.service.requests if r[1] == "/ingest/errors"]

    await eventually(sent, message="the errors")
    await asyncio.sleep(1)
    # 30 times the same warning is one error; of the 16 distinct ones, the first 10 are sent.
    assert len(await sent()) == 10


@pytest.mark.parametrize("where", ["svc_fatal_early", "svc_fatal"])
async def test_a_fatal_error_arrives_with_or_without_wordpress_error_page(
        open_shop: ShopFactory, deps, where: str):
    shop = await open_shop({"recordings": False})
    page = await shop.http(f"/?{where}=1", headers={"Cookie": "svc_vid=visitor-php-2"})
    if where == "svc_fatal_early":  # before any output: WordPress's page, which ends the request
        assert page.code == 500 and b"critical error" in page.body
    else:  # the theme had started the page: no error page, PHP's shutdown goes on
        assert page.code == 200 and b"critical error" not in page.body
    error = (await eventually(lambda: documents(deps, "errors", shop.tenant.site_id),
                              message="the fatal error"))[0]
    assert "Call to undefined function visitor_service_test_theme_missing_function" in (
        error["message"])
    assert "E_ERROR" in json.dumps(error, default=str)
    assert error["visitorId"] == "visitor-php-2"


async def test_a_completed_order_ends_the_visitors_recording(
        browser: Browser, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": True})
    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(shop.wp.product_url)
    recording = (await eventually(lambda: documents(deps, "recordings", shop.tenant.site_id),
                                  message="the recording of the visit"))[0]
    assert recording["status"] == "active"
    await context.add_cookies([
        {"name": "fake_wc_cart", "value": json.dumps({str(shop.wp.product_id): 1}),
         "url": shop.url}])
    await page.goto(shop.url + "/?fake_wc_checkout=1&email=buyer@example.com")
    assert await page.text_content("#order")

    async def ended() -> dict[str, Any] | None:
        found = await deps.store.collection("recordings").find_one({"_id": recording["_id"]})
        return found if found["status"] == "ended" else None

    assert (await eventually(ended, message="the recording ended"))["endReason"] == "order"
    lead = (await documents(deps, "leads", shop.tenant.site_id))[0]
    assert lead["kind"] == "checkout" and lead["orderCompleted"] is True
    assert lead["cart"]["items"][0]["productId"] == str(shop.wp.product_id)
    assert lead["visitorId"] == recording["visitorId"]
    await context.close()


async def test_an_order_placed_through_the_block_checkout_is_captured_too(
        open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    cart = "%7B%22" + str(shop.wp.product_id) + "%22%3A3%7D"
    placed = await shop.http("/?fake_wc_checkout=1&block=1&email=blocks@example.com", headers={
        "Cookie": f"svc_vid=visitor-block-1; fake_wc_cart={cart}; fake_wc_session=wcblock7"})
    assert placed.code == 200 and b"received" in placed.body
    lead = (await eventually(lambda: documents(deps, "leads", shop.tenant.site_id),
                             message="the block checkout's lead"))[0]
    assert lead["kind"] == "checkout" and lead["orderCompleted"] is True
    assert lead["visitorId"] == "visitor-block-1" and lead["ecommerceSessionId"] == "wcblock7"
    assert lead["cart"]["items"][0]["quantity"] == 3 and lead["cart"]["total"] == 37.5


async def test_a_lead_accepted_while_the_service_is_down_arrives_once_when_it_is_back(
        open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    await shop.service.stop()
    answer = await shop.http("/wp-json/service/v1/leads", "POST", headers=JSON, body=json.dumps(
        {"visitorId": "visitor-down-1", "email": "down@example.com", "url": shop.url + "/"}))
    assert answer.code == 202

    async def tried() -> dict[str, Any] | None:  # by the loopback delivery, after the answer
        row = await shop.wp.php("""global $wpdb;
            return $wpdb->get_row('SELECT attempts, last_error FROM '
                . \\VisitorService\\Outbox::table(), ARRAY_A);""")
        return row if int(row["attempts"]) == 1 else None

    await eventually(tried, message="the first delivery attempt")
    # Leads are paused for seconds, and Action Scheduler holds the run that probes again then.
    waits = await shop.wp.php("""return [
        get_option('visitor_service_paused')['/ingest/leads']['until'] - time(),
        as_next_scheduled_action('visitor_service_deliver', [], 'visitor-service') - time()];""")
    assert all(0 < wait <= 5 for wait in waits), waits
    # Pageviews and PHP errors are not kept: dropped, and counted.
    warned = await shop.http("/?svc_warn=1", headers={"Cookie": "svc_vid=visitor-down-1"})
    assert warned.code == 200
    pageview = await shop.wp.php(f"""wp_set_current_user({shop.wp.customer_id});
        $request = new WP_REST_Request('POST', '/service/v1/pageview');
        $request->set_header('Content-Type', 'application/json');
        $request->set_body(wp_json_encode(['visitorId' => 'visitor-down-1',
            'url' => home_url('/')]));
        return rest_do_request($request)->get_status();""")
    assert pageview == 202
    settings_page = await shop.wp.php("""wp_set_current_user(1); ob_start();
        \\VisitorService\\Settings::render(); return ob_get_clean();""")
    assert "1 lead is waiting to be sent." in settings_page
    assert "1 pageview was dropped while the service was unreachable." in settings_page
    assert "1 PHP error was dropped while the service was unreachable." in settings_page
    assert shop.tenant.api_key not in settings_page

    shop.service.start()
    await asyncio.sleep(max(waits) + 1)  # the probe is due
    for _ in range(2):  # Action Scheduler's queue runs twice: the lead is delivered once
        assert await shop.wp.php("return fake_as_run_queue();") in (0, 1)
    leads = await eventually(lambda: documents(deps, "leads", shop.tenant.site_id),
                             message="the kept lead")
    assert [lead["email"] for lead in leads] == ["down@example.com"]
    assert await shop.wp.php("return \\VisitorService\\Outbox::backlog();") == 0


async def test_gpc_and_missing_consent_forward_nothing(open_shop: ShopFactory, deps):
    shop = await open_shop({"requireConsent": True, "recordings": False})
    assert await shop.wp.php("return \\VisitorService\\Options::requireConsent();") is True
    lead = json.dumps({"visitorId": "visitor-gpc-1", "email": "gpc@example.com"})
    gpc = await shop.http("/wp-json/service/v1/leads", "POST", body=lead,
                          headers={**JSON, "Sec-GPC": "1"})
    assert gpc.code == 204
    no_consent = await shop.http("/wp-json/service/v1/leads", "POST", body=lead, headers=JSON)
    assert json.loads(no_consent.body) == {"ok": True, "dropped": "consent_missing"}
    granted = await shop.http("/wp-json/service/v1/leads", "POST", headers=JSON, body=json.dumps(
        {"visitorId": "visitor-consent-1", "email": "yes@example.com", "consent": "granted"}))
    assert granted.code == 202  # the same route forwards once the visitor consented
    statement = await shop.http("/wp-json/service/v1/statement?url=" + shop.wp.product_url,
                                headers={"Sec-GPC": "1"})
    assert json.loads(statement.body) == {"statement": None}
    # Server-side captures too: a checkout and a PHP warning of a GPC visitor are not sent.
    cookies = {"Cookie": "svc_vid=visitor-gpc-1; fake_wc_cart=%7B%222%22%3A1%7D", "Sec-GPC": "1"}
    await shop.http("/?fake_wc_checkout=1&email=gpc@example.com", headers=cookies)
    await shop.http("/?svc_warn=1&gpc=1", headers=cookies)
    # Without consent (no consent cookie, no Consent API), nothing either.
    await shop.http("/?svc_warn=1&consent=0")
    await asyncio.sleep(1.5)
    assert await documents(deps, "errors", shop.tenant.site_id) == []
    leads = await documents(deps, "leads", shop.tenant.site_id)
    assert [lead["email"] for lead in leads] == ["yes@example.com"]
    visitors = await documents(deps, "visitors", shop.tenant.site_id)
    assert [visitor["visitorId"] for visitor in visitors] == ["visitor-consent-1"]
    assert await shop.wp.php("return \\VisitorService\\Outbox::backlog();") == 0


async def test_require_consent_switched_on_in_the_dashboard_reaches_the_route_by_cron(
        open_shop: ShopFactory, fetch, deps):
    shop = await open_shop({"recordings": False})
    assert await shop.wp.php("return \\VisitorService\\Options::requireConsent();") is False
    changed = await fetch(f"/api/v1/sites/{shop.tenant.site_id}", "PATCH",
                          token=shop.tenant.token, json_body={"settings": {"requireConsent": True}})
    assert changed.code == 200, changed
    await shop.wp.php("""update_option('visitor_service_settings_read_at', time() - 7200);
        wp_clear_scheduled_hook('visitor_service_retry');
        wp_schedule_event(time() - 1, 'visitor_service_five_minutes', 'visitor_service_retry');
        return true;""")
    assert (await shop.http("/wp-cron.php")).code == 200
    assert await shop.wp.php("return \\VisitorService\\Options::requireConsent();") is True
    lead = await shop.http("/wp-json/service/v1/leads", "POST", headers=JSON, body=json.dumps(
        {"visitorId": "visitor-later-1", "email": "later@example.com"}))
    assert json.loads(lead.body) == {"ok": True, "dropped": "consent_missing"}


async def test_the_wp_consent_api_unlocks_the_route_on_a_site_that_requires_consent(
        open_shop: ShopFactory, deps):
    shop = await open_shop({"requireConsent": True, "recordings": False})
    lead = json.dumps({"visitorId": "visitor-cms-1", "email": "cms@example.com"})
    refused = await shop.http("/wp-json/service/v1/leads", "POST", body=lead, headers=JSON)
    assert json.loads(refused.body)["dropped"] == "consent_missing"
    allowed = await shop.http("/wp-json/service/v1/leads", "POST", body=lead, headers={
        **JSON, "Cookie": "wp_consent_statistics=allow"})
    assert allowed.code == 202
    leads = await eventually(lambda: documents(deps, "leads", shop.tenant.site_id),
                             message="the lead with the banner's consent")
    assert [lead["email"] for lead in leads] == ["cms@example.com"]


async def test_the_api_key_from_wp_config_wins_and_is_not_editable(
        open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    flag = shop.wp.site / "wp-content" / "mu-plugins" / "api-key-constant.txt"
    flag.write_text(shop.tenant.api_key)
    try:
        check = await shop.wp.php("""\\VisitorService\\Options::saveApiKey('sk_not_this_one');
            return \\VisitorService\\Settings::checkConnection();""")
        assert check["ok"], check
        page = await shop.wp.php("""wp_set_current_user(1); ob_start();
            \\VisitorService\\Settings::render(); return ob_get_clean();""")
        assert "Set in wp-config.php" in page and 'id="vs-api"' not in page
        assert shop.tenant.api_key not in page
        lead = await shop.http("/wp-json/service/v1/leads", "POST", headers=JSON,
                               body=json.dumps({"visitorId": "v-const", "email": "c@example.com"}))
        assert lead.code == 202
        await eventually(lambda: documents(deps, "leads", shop.tenant.site_id),
                         message="a lead sent with the constant's key")
    finally:
        flag.unlink()


async def test_checking_the_connection_gives_the_service_the_shops_time_zone_once(
        open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    await shop.wp.php("update_option('timezone_string', 'Europe/Berlin'); return true;")
    try:
        check = await shop.wp.php("return \\VisitorService\\Settings::checkConnection();")
        assert check["ok"], check
        site = await deps.store.collection("sites").find_one({"_id": shop.tenant.site_id})
        assert site["settings"]["timeZone"] == "Europe/Berlin"
        # Once the site has a zone, the shop's changing does not move it: the owner chooses.
        await shop.wp.php("update_option('timezone_string', 'Asia/Tokyo'); return true;")
        assert (await shop.wp.php(
            "return \\VisitorService\\Settings::checkConnection();"))["ok"]
        site = await deps.store.collection("sites").find_one({"_id": shop.tenant.site_id})
        assert site["settings"]["timeZone"] == "Europe/Berlin"
    finally:
        await shop.wp.php("update_option('timezone_string', ''); return true;")


async def test_the_settings_check_and_the_api_key_never_shown(open_shop: ShopFactory):
    shop = await open_shop()
    assert shop.check["ok"], shop.check
    page = await shop.wp.php("""wp_set_current_user(1); ob_start();
        \\VisitorService\\Settings::render(); return ob_get_clean();""")
    assert shop.tenant.api_key not in page and 'type="password"' in page
    autoload = await shop.wp.php("""global $wpdb; return $wpdb->get_var("SELECT autoload FROM
        $wpdb->options WHERE option_name = 'visitor_service_api_key'");""")
    assert autoload == "no"
    wrong = await shop.wp.php("""\\VisitorService\\Options::saveApiKey('sk_wrong');
        return \\VisitorService\\Settings::checkConnection();""")
    assert not wrong["ok"] and "API key refused by the service." in wrong["messages"]
    home = (await shop.http("/")).body.decode()
    assert shop.tenant.api_key not in home and "sk_wrong" not in home


async def test_the_settings_screen_is_for_administrators_and_checks_the_connection(
        browser: Browser, open_shop: ShopFactory):
    from tests.support.wordpress import ADMIN, CUSTOMER
    shop = await open_shop()
    screen = shop.url + "/wp-admin/options-general.php?page=visitor-service"
    customer = await browser.new_context()
    await log_in(customer, shop, CUSTOMER)
    page = await customer.new_page()
    await page.goto(screen)
    assert "not allowed" in await page.content()
    await customer.close()

    admin = await browser.new_context()
    await log_in(admin, shop, ADMIN)
    page = await admin.new_page()
    await page.goto(screen)
    assert await page.input_value("#vs-api") == ""
    assert shop.tenant.api_key not in await page.content()
    # Saving the form with the key field left empty keeps the saved key.
    await page.fill("#vs-public", shop.tenant.public_key)
    await submit(page, "#submit", "**settings-updated=true")
    await submit(page, "#check", "**checked=1")
    notice = await page.text_content("#visitor-service-check.notice-success")
    assert "API key: accepted." in notice and "Public key and this site" in notice
    assert shop.tenant.api_key not in await page.content()
    await admin.close()


async def test_deactivation_stops_collection_and_uninstall_removes_everything(
        open_shop: ShopFactory):
    shop = await open_shop()
    statement = await shop.http("/wp-json/service/v1/statement?url=x")  # a per-address counter
    assert statement.code == 200
    try:
        await shop.wp.php("deactivate_plugins('visitor-service/visitor-service.php'); return 1;")
        await shop.http("/__cache/purge", "POST")
        assert b"sdk/v1/loader.js" not in (await shop.http("/")).body
        route = await shop.http("/wp-json/service/v1/statement?url=x")
        assert route.code == 404
        assert await shop.wp.php("return wp_next_scheduled('visitor_service_retry');") is False
        left = await shop.wp.php("""uninstall_plugin('visitor-service/visitor-service.php');
            global $wpdb;
            return ['options' => $wpdb->get_col("SELECT option_name FROM $wpdb->options
                        WHERE option_name LIKE '%visitor\\\\_service\\\\_%'"),
                    'table' => $wpdb->get_var(
                        "SHOW TABLES LIKE '{$wpdb->prefix}visitor_service_outbox'")];""")
        assert left == {"options": [], "table": None}
    finally:
        await shop.wp.php("activate_plugin('visitor-service/visitor-service.php'); return 1;")


async def test_the_plugin_declares_itself_compatible_with_order_tables_and_the_block_checkout(
        wordpress):
    # WooCommerce counts a declaration made while before_woocommerce_init runs (the stand-in too).
    declared = await wordpress.php("return $GLOBALS['fake_wc_compatibility'] ?? null;")
    plugin = "visitor-service/visitor-service.php"
    assert declared == {"custom_order_tables": {plugin: True},
                        "cart_checkout_blocks": {plugin: True}}
