"""Allowed origins are origins a browser sends: no wildcard, nothing malformed (issue 28).

`https://*` was accepted and stored literally; it matched no page and said it allowed all.
"""

from __future__ import annotations

import pytest

from tests.support.app import Fetch, Tenant


@pytest.mark.parametrize("origin", [
    "https://*", "https://*.shop.example", "*", "https://shop.*", "http://sh op.example",
    "https://shop..example", "https://-shop.example", "https://shop.example:", "https://:443",
    "https://shop.example:0", "https://shop.example:99999", "https://shop.example/path",
    "https://user@shop.example", "https://shop.example?x=1", "ftp://shop.example",
    "https://shop%2eexample", "https://shop.example\u001d", "https://[fe80::1%25eth0]",
    "https://1.2.3", "https://" + "a" * 64 + ".example",
])
async def test_a_wildcard_or_malformed_allowed_origin_is_refused_and_nothing_changes(
        fetch: Fetch, tenant: Tenant, origin: str):
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", token=tenant.token,
                         json_body={"allowedOrigins": ["https://new.example", origin]})
    assert answer.code == 422, answer
    assert answer.json()["error"]["field"].startswith("allowedOrigins")
    created = await fetch("/api/v1/sites", "POST", token=tenant.token,
                          json_body={"name": "other", "allowedOrigins": [origin]})
    assert created.code == 422, created
    site = await fetch(f"/api/v1/sites/{tenant.site_id}", token=tenant.token)
    assert site.json()["allowedOrigins"] == ["https://shop.example"]


@pytest.mark.parametrize(("given", "stored"), [
    ("HTTPS://Shop.Example:443/", "https://shop.example"),
    ("http://localhost:8080", "http://localhost:8080"),
    ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
    ("https://[2001:DB8::1]:8443", "https://[2001:db8::1]:8443"),
    ("https://bücher.example", "https://xn--bcher-kva.example"),
    ("https://my_shop.example", "https://my_shop.example"),
])
async def test_an_origin_is_stored_as_browsers_send_it(
        fetch: Fetch, tenant: Tenant, given: str, stored: str):
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", token=tenant.token,
                         json_body={"allowedOrigins": [given]})
    assert answer.code == 200, answer
    assert answer.json()["allowedOrigins"] == [stored]
