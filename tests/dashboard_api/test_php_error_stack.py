"""A PHP error's stack in the error detail: the plugin sends its backtrace as frames only, and the
detail shows them like a browser error's stack (issue 33 point 7)."""

from __future__ import annotations

from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest, send_errors

PLUGIN = "/var/www/html/wp-content/plugins/shop-extras"

#: As wordpress/visitor-service/includes/class-errors.php sends it: the error's own place first
#: (file and line, no function), then debug_backtrace()'s frames with `Class::method` names, the
#: error's file and line as context, and the request's address and visitor.
PHP_WARNING = {
    "source": "php",
    "type": "E_WARNING",
    "message": 'Undefined array key "price"',
    "frames": [
        {"file": f"{PLUGIN}/includes/class-cart.php", "line": 42},
        {"file": f"{PLUGIN}/includes/class-cart.php", "line": 17,
         "function": "Shop_Extras\\Cart::total"},
        {"file": "/var/www/html/wp-includes/class-wp-hook.php", "line": 324,
         "function": "WP_Hook::apply_filters"},
        {"function": "do_action"},
    ],
    "context": {"file": f"{PLUGIN}/includes/class-cart.php", "line": 42},
    "url": "https://shop.example/cart/",
    "ip": "198.51.100.7",
    "userAgent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0",
    "gpc": False,
    "visitorId": "v-php",
}


async def test_a_php_error_sent_as_frames_shows_its_stack_in_the_detail(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest):
    await send_errors(ingest, deps, [PHP_WARNING])
    listed = (await fetch(f"/api/v1/sites/{tenant.site_id}/errors", token=tenant.token)).json()
    [error] = listed["items"]
    assert (error["source"], error["type"]) == ("php", "E_WARNING")
    detail = (await fetch(f"/api/v1/sites/{tenant.site_id}/errors/{error['id']}",
                          token=tenant.token)).json()
    assert detail["lastStack"].splitlines() == [
        f"#0 {PLUGIN}/includes/class-cart.php(42)",
        f"#1 {PLUGIN}/includes/class-cart.php(17): Shop_Extras\\Cart::total()",
        "#2 /var/www/html/wp-includes/class-wp-hook.php(324): WP_Hook::apply_filters()",
        "#3 [internal function]: do_action()",
    ]


async def test_a_stack_sent_as_text_is_kept_as_sent_even_with_frames(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest):
    stack = "TypeError: cart is undefined\n    at buy (https://shop.example/a.js:1:2)"
    await send_errors(ingest, deps, [{
        "visitorId": "v-js", "source": "javascript", "type": "TypeError",
        "message": "cart is undefined", "stack": stack,
        "frames": [{"file": "https://shop.example/a.js", "line": 1, "column": 2,
                    "function": "buy"}]}])
    [error] = (await fetch(f"/api/v1/sites/{tenant.site_id}/errors",
                           token=tenant.token)).json()["items"]
    detail = (await fetch(f"/api/v1/sites/{tenant.site_id}/errors/{error['id']}",
                          token=tenant.token)).json()
    assert detail["lastStack"] == stack
