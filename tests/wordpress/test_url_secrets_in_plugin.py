"""The plugin strips secret URL parameters before anything leaves the shop (issue 40 point 4).

The service strips them at ingest too (privacy/url_secrets.py), so what the service stores
cannot tell whether the plugin did: the tests read the bodies the service was sent. The rules
are checked against the service's own, list and behaviour, with the PHP command line (no
WordPress); then in the real WordPress for a PHP error and a lead on an order-received address.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import tornado.web

from privacy.url_secrets import DEFAULT_SECRET_PARAMETERS, strip_secrets
from tests.support.browser import eventually
from tests.wordpress.conftest import Shop, ShopFactory

ROOT = Path(__file__).resolve().parents[2]
STRIPPER = ROOT / "wordpress" / "visitor-service" / "includes" / "class-url-secrets.php"
ORDER_RECEIVED = "/checkout/?order-received=7&key=wc_order_abc&utm_source=x"

SCRIPT = """<?php
define('ABSPATH', __DIR__ . '/');  // as inside WordPress: every plugin file checks it
function apply_filters(string $hook, $value) { return $value; }  // no shop adds names here
require $argv[1];
echo json_encode(array_map([VisitorService\\UrlSecrets::class, 'strip'],
    json_decode(stream_get_contents(STDIN), true)), JSON_UNESCAPED_SLASHES);
"""

URLS = [
    "https://shop.example/checkout/order-received/7/?key=wc_order_abc&utm_source=x",
    "https://shop.example/wp-login.php?action=rp&key=K3y&login=carla&wp_lang=de_DE",
    "https://shop.example/wp-login.php?action=lostpassword&login=carla",
    "https://shop.example/cb?state=s&CODE=c#access_token=t&token_type=bearer",
    "https://shop.example/app#/order?Key=1&tab=items",
    "https://shop.example/?%6Bey=1&q=mugs+blue&ref=wc_order_zz9",
    "https://shop.example/?ref=WC_ORDER_zz9&page=2",
    "https://shop.example/?key=1",
    "https://shop.example/page?&#",
    "https://shop.example/page#section-2",
    "https://shop.example/?utm_source=x&utm_medium=mail",
    "https://shop.example/?_wpnonce=ab12&PHPSESSID=s1&p=1",
]


def _php_list() -> list[str]:
    source = STRIPPER.read_text()
    declared = re.search(r"public const PARAMETERS = \[(.*?)\];", source, re.S)
    assert declared, "UrlSecrets::PARAMETERS not found"
    code = re.sub(r"//[^\n]*", "", declared.group(1))  # comments hold apostrophes
    return re.findall(r"'([^']*)'", code)


def test_the_plugins_secret_parameters_are_the_services():
    names = _php_list()
    assert len(names) == len(set(names))
    assert set(names) == DEFAULT_SECRET_PARAMETERS


def test_the_plugin_strips_each_url_as_the_service_does(tmp_path: Path):
    script = tmp_path / "strip.php"
    script.write_text(SCRIPT)
    done = subprocess.run(["php", str(script), str(STRIPPER)], input=json.dumps(URLS),
                          capture_output=True, text=True, check=True, timeout=30)
    assert json.loads(done.stdout) == [strip_secrets(url) for url in URLS]
    assert json.loads(done.stdout)[0] == "https://shop.example/checkout/order-received/7/?utm_source=x"


def _bodies_sent(shop: Shop) -> list[tuple[str, dict[str, Any]]]:
    """From now on, every (path, JSON body) the service is sent, as it arrived."""
    sent: list[tuple[str, dict[str, Any]]] = []
    log_request = shop.service.app.settings["log_function"]

    def record(handler: tornado.web.RequestHandler) -> None:
        body = getattr(handler, "body", b"")  # streamed: BaseHandler keeps it, not the request
        if handler.request.path.startswith("/ingest/") and body:
            sent.append((handler.request.path, json.loads(body)))
        log_request(handler)

    shop.service.app.settings["log_function"] = record
    return sent


async def _arrived(sent: list[tuple[str, dict[str, Any]]], path: str) -> list[dict[str, Any]]:
    """The bodies sent to `path`, once there is one."""

    async def bodies() -> list[dict[str, Any]]:
        return [body for to, body in sent if to == path]

    return await eventually(bodies, message=f"a request to {path}")


async def test_a_php_error_on_an_order_received_address_is_sent_without_the_order_key(
        open_shop: ShopFactory):
    shop = await open_shop({"recordings": False})
    sent = _bodies_sent(shop)
    # The theme's front page raises the warning (its order-received page would be the same).
    page = await shop.http("/?order-received=7&key=wc_order_abc&utm_source=x&svc_warn=1",
                           headers={"Cookie": "svc_vid=visitor-secret-1"})
    assert page.code == 200
    errors = await _arrived(sent, "/ingest/errors")
    assert errors[0]["url"] == shop.url + "/?order-received=7&utm_source=x&svc_warn=1"
    assert "wc_order_" not in json.dumps(errors)


async def test_a_lead_from_an_order_received_page_is_kept_and_sent_without_the_order_key(
        open_shop: ShopFactory):
    shop = await open_shop({"recordings": False})
    sent = _bodies_sent(shop)
    answer = await shop.http("/wp-json/service/v1/leads", "POST", headers={
        "Content-Type": "application/json", "Cookie": "svc_vid=visitor-secret-2"},
        body=json.dumps({"visitorId": "visitor-secret-2", "email": "carla@example.com",
                         "url": shop.url + ORDER_RECEIVED + "#Key=2"}))
    assert answer.code == 202
    leads = await _arrived(sent, "/ingest/leads")
    assert leads[0]["url"] == shop.url + "/checkout/?order-received=7&utm_source=x"
    # What waits in the outbox (the shop's own table) holds no secret either.
    kept = await shop.wp.php(f"""global $wpdb;
        \\VisitorService\\Outbox::accept('/ingest/leads', ['leadId' => 'secret-kept-3',
            'visitorId' => 'visitor-secret-3', 'email' => 'dora@example.com',
            'url' => '{shop.url + ORDER_RECEIVED}']);
        return $wpdb->get_var("SELECT body FROM {{$wpdb->prefix}}visitor_service_outbox
            WHERE body LIKE '%secret-kept-3%'");""")
    assert json.loads(kept)["url"] == shop.url + "/checkout/?order-received=7&utm_source=x"
