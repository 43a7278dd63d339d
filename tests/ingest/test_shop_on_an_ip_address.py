"""A shop served from an IP address keeps its own links: the site's own host (an allowed origin)
stays in its URLs, and every other address is anonymised (issue 28 point 1)."""

from __future__ import annotations

import asyncio

from tests.recordings.kit import gzip_json
from tests.support.app import Fetch, Tenant

SHOP = "http://127.0.0.1:8080"
#: The visitor is on the same machine as the shop, the hardest case: the visitor's own address
#: is the URL's host, and must still not be cut out of the URL.
VISITOR_IP = "127.0.0.1"


async def _wait_for_error(deps) -> dict:
    for _ in range(300):
        found = await deps.store.collection("errors").find_one({})
        if found is not None:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError("the error was not processed")


async def test_a_shop_on_an_ip_address_keeps_its_links_in_profile_recordings_errors_and_export(
        fetch: Fetch, make_tenant, deps):
    tenant: Tenant = await make_tenant(origins=(SHOP,))
    key = {"X-Service-Key": tenant.api_key}
    page = f"{SHOP}/product/7?from=198.51.100.23"
    answer = await fetch("/ingest/pageviews", "POST", headers=key, json_body={
        "visitorId": "v-ip", "url": page, "title": f"Mug at {SHOP}/", "ip": VISITOR_IP,
        "referrer": f"{SHOP}/"})
    assert answer.code == 200, answer
    answer = await fetch("/ingest/errors", "POST", headers=key, json_body={
        "visitorId": "v-ip", "type": "TypeError", "message": "x is undefined",
        "source": "javascript", "url": page, "ip": VISITOR_IP,
        "stack": f"TypeError: x is undefined\n    at buy ({SHOP}/app.js:3:9)"})
    assert answer.code == 200, answer
    answer = await fetch("/ingest/recordings/segment", "POST", body=gzip_json(
        [{"type": 4, "data": {"href": page, "width": 1280, "height": 800}, "timestamp": 1}]),
        headers={**key, "Content-Type": "application/octet-stream",
                 "X-Recording-Id": "00000000-0000-4000-8000-0000000000ab",
                 "X-Segment-Seq": "0", "X-Visitor-Id": "v-ip", "X-Session-Id": "s-ip",
                 "X-Page-Url": page})
    assert answer.code == 200, answer
    error = await _wait_for_error(deps)

    kept = f"{SHOP}/product/7?from=198.51.100.0"  # an address in the query is still anonymised
    profile = await deps.store.collection("visitors").find_one({"visitorId": "v-ip"})
    assert profile["recent"][-1]["url"] == kept
    assert profile["location"]["ipAddress"] == "127.0.0.0"  # the visitor's own address
    assert f"at buy ({SHOP}/app.js:3:9)" in error["lastStack"]
    recording = await fetch(f"/api/v1/sites/{tenant.site_id}/recordings", token=tenant.token)
    assert recording.code == 200, recording
    assert kept in recording.body.decode()
    export = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/v-ip/export.json",
                         token=tenant.token)
    assert export.code == 200, export
    body = export.body.decode()
    assert "127.0.0.0:8080" not in body
    assert [p["url"] for p in export.json()["pageviews"]] == [kept]
