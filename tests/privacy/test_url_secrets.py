"""No secret in a stored URL (issue 40 point 4): an order-received address, a password-reset
link or a token sent in a URL is stored, shown and exported without its secret parameters, and a
site can name more of them."""

from __future__ import annotations

import pytest

from privacy.url_secrets import strip_secrets, strip_secrets_in_text
from tests.recordings.kit import gzip_json
from tests.support.app import Fetch, Tenant, all_documents_text
from tests.support.ingest import send_errors

ORDER_KEY = "wc_order_abc"
ORDER_RECEIVED = f"https://shop.example/checkout/order-received/123/?key={ORDER_KEY}&utm_source=x"
SHOWN = "https://shop.example/checkout/order-received/123/?utm_source=x"
RECORDING_ID = "00000000-0000-4000-8000-0000000000c4"


@pytest.mark.parametrize(("sent", "stored"), [
    (ORDER_RECEIVED, SHOWN),
    ("https://shop.example/checkout/order-pay/9/?pay_for_order=true&KEY=wc_order_x",
     "https://shop.example/checkout/order-pay/9/?pay_for_order=true"),
    ("https://shop.example/wp-login.php?action=rp&key=k1&login=bob",
     "https://shop.example/wp-login.php?action=rp"),
    ("https://shop.example/back?code=c&state=s&access_token=t#id_token=i&scope=a",
     "https://shop.example/back?state=s#scope=a"),
    ("https://shop.example/p?_wpnonce=n&ref=wc_order_y&page=2", "https://shop.example/p?page=2"),
    ("https://shop.example/#/order?token=t", "https://shop.example/#/order"),
    ("https://shop.example/p?login=bob&a=1", "https://shop.example/p?login=bob&a=1"),
    ("https://shop.example/search?q=mug&", "https://shop.example/search?q=mug&"),
    ("not a url ?? at all", "not a url ?? at all"),
])
def test_secret_parameters_are_removed_and_the_rest_kept_in_order(sent, stored):
    assert strip_secrets(sent) == stored


def test_secrets_in_free_text_are_removed_wherever_a_url_is():
    text = f"Order failed at {ORDER_RECEIVED} (order {ORDER_KEY}) #main?"
    assert strip_secrets_in_text(text) == (
        f"Order failed at {SHOWN} (order wc_order_[removed]) #main?")


async def test_an_order_received_address_is_stored_and_shown_without_its_order_key(
        fetch: Fetch, tenant: Tenant, ingest, deps):
    base = f"/api/v1/sites/{tenant.site_id}"
    await ingest("pageviews", {"visitorId": "v-1", "sessionId": "s-1", "url": ORDER_RECEIVED,
                               "referrer": f"https://pay.example/return?token=t1&to={SHOWN}"})
    await ingest("leads", {"visitorId": "v-1", "sessionId": "s-1", "email": "ann@example.com",
                           "url": ORDER_RECEIVED})
    key = {"X-Service-Key": tenant.api_key}
    started = await fetch("/ingest/recordings/start", "POST", headers=key, json_body={
        "visitorId": "v-1", "sessionId": "s-1", "recordingId": RECORDING_ID,
        "url": ORDER_RECEIVED, "consent": "granted"})
    assert started.code == 200, started
    segment = await fetch("/ingest/recordings/segment", "POST", body=gzip_json(
        [{"type": 4, "data": {"href": SHOWN, "width": 1280, "height": 800}, "timestamp": 1}]),
        headers={**key, "Content-Type": "application/octet-stream",
                 "X-Recording-Id": RECORDING_ID, "X-Segment-Seq": "0", "X-Visitor-Id": "v-1",
                 "X-Session-Id": "s-1", "X-Page-Url": ORDER_RECEIVED})
    assert segment.code == 200, segment
    await send_errors(ingest, deps, [{
        "visitorId": "v-1", "sessionId": "s-1", "type": "TypeError", "source": "javascript",
        "message": f"cannot load {ORDER_RECEIVED}", "url": ORDER_RECEIVED,
        "context": {"request": {"url": ORDER_RECEIVED}}}])

    profile = (await fetch(f"{base}/visitors/v-1", token=tenant.token)).json()
    export = (await fetch(f"{base}/visitors/v-1/export.json", token=tenant.token)).json()
    assert [p["url"] for p in export["pageviews"]] == [SHOWN]
    assert export["pageviews"][0]["referrer"] == f"https://pay.example/return?to={SHOWN}"
    recordings = await fetch(f"{base}/recordings", token=tenant.token)
    timeline = await fetch(f"{base}/recordings/{RECORDING_ID}/timeline", token=tenant.token)
    leads = await fetch(f"{base}/leads", token=tenant.token)
    errors = await fetch(f"{base}/errors", token=tenant.token)
    [error] = errors.json()["items"] if "items" in errors.json() else errors.json()
    detail = await fetch(f"{base}/errors/{error['id']}", token=tenant.token)
    for answer in (recordings, timeline, leads, detail):
        assert answer.code == 200, answer
        assert SHOWN in answer.body.decode(), answer
    for shown in (profile, export, recordings.body, timeline.body, leads.body, errors.body,
                  detail.body):
        assert ORDER_KEY not in str(shown)
    assert ORDER_KEY not in await all_documents_text(deps.store)


async def test_a_parameter_the_site_names_is_stripped_once_set(fetch: Fetch, tenant: Tenant,
                                                               ingest, deps):
    site = f"/api/v1/sites/{tenant.site_id}"
    page = "https://shop.example/cart?coupon_secret=SPRING-77&step=2"
    await ingest("pageviews", {"visitorId": "v-2", "url": page})
    answer = await fetch(site, "PATCH", token=tenant.token,
                         json_body={"settings": {"secretUrlParameters": ["Coupon_Secret"]}})
    assert answer.code == 200, answer
    assert answer.json()["settings"]["secretUrlParameters"] == ["Coupon_Secret"]
    await ingest("pageviews", {"visitorId": "v-2", "url": page})

    export = (await fetch(f"{site}/visitors/v-2/export.json", token=tenant.token)).json()
    # Set after the first pageview: it applies to what is sent from then on.
    assert [p["url"] for p in export["pageviews"]] == [page, "https://shop.example/cart?step=2"]


@pytest.mark.parametrize(("names", "field"), [
    (["n"] * 51, "settings.secretUrlParameters"),
    (["x" * 101], "settings.secretUrlParameters.0"),
    (["ok", ""], "settings.secretUrlParameters.1"),
    (["a=b"], "settings.secretUrlParameters.0"),
])
async def test_a_bad_list_of_secret_parameters_is_refused_naming_the_field(
        fetch: Fetch, tenant: Tenant, names, field):
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", token=tenant.token,
                         json_body={"settings": {"secretUrlParameters": names}})
    assert answer.code == 422, answer
    assert answer.json()["error"]["field"] == field
