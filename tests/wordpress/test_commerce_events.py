"""The plugin's commerce events (issue 31 point 1), through WooCommerce's public hooks against
the stand-in of its API: add to cart, checkout started on the classic and the block checkout,
the order placed, and the order's later life, paid, refunded, failed, cancelled. Revenue counts
paid orders only; a payment that fails never counts. Paid is when WooCommerce records the
payment (issue 40 point 2), shown per kind of gateway: online, cash on delivery, bank transfer."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from documents import commerce
from tests.support.browser import eventually
from tests.wordpress.conftest import Shop, ShopFactory, documents


async def _page(shop: Shop, content: str) -> str:
    """A new published page holding `content`; its path."""
    slug = f"checkout-{uuid.uuid4().hex[:8]}"
    await shop.wp.php(f"""wp_insert_post(['post_type' => 'page', 'post_status' => 'publish',
        'post_name' => '{slug}', 'post_title' => 'Checkout', 'post_content' => '{content}']);
        return true;""")
    return f"/{slug}/"


async def _events(deps, shop: Shop, count: int) -> list[dict[str, Any]]:
    async def arrived() -> list[dict[str, Any]] | None:
        found = await documents(deps, commerce.EVENTS, shop.tenant.site_id)
        return sorted(found, key=lambda e: e["recordedAt"]) if len(found) >= count else None

    return await eventually(arrived, message=f"{count} commerce events")


async def _order(deps, shop: Shop, order_id: int) -> dict[str, Any]:
    await deps.derivation.fold()
    return await deps.store.collection(commerce.ORDERS).find_one(
        {"siteId": shop.tenant.site_id, "orderId": str(order_id)})


async def _money(deps, shop: Shop) -> dict[str, int]:
    """The site's revenue figures summed over every day, per currency (minor units)."""
    revenue: dict[str, int] = {}
    async for day in deps.store.collection("site_days").find({"siteId": shop.tenant.site_id}):
        for currency, amount in (day.get("revenue") or {}).items():
            revenue[currency] = revenue.get(currency, 0) + amount
    return {currency: amount for currency, amount in revenue.items() if amount}


async def test_cart_classic_checkout_and_a_paid_then_partly_refunded_order_reach_the_service(
        open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    visitor = {"Cookie": "svc_vid=visitor-shop-1"}
    product = shop.wp.product_id  # 12.50 EUR
    added = await shop.http(f"/?add-to-cart={product}&quantity=2", headers=visitor)
    assert added.code == 200
    cart = (await _events(deps, shop, 1))[0]
    assert (cart["type"], cart["visitorId"], cart["productId"], cart["quantity"],
            cart["price"], cart["currency"]) == (
        "add_to_cart", "visitor-shop-1", str(product), 2, 1250, "EUR")
    page = await _page(shop, "[woocommerce_checkout]")
    assert (await shop.http(page, headers=visitor)).code == 200
    assert (await _events(deps, shop, 2))[1]["type"] == "checkout_started"

    basket = "%7B%22" + str(product) + "%22%3A2%7D"
    placed = await shop.http("/?wc-ajax=checkout&email=paid@example.com", "POST", headers={
        "Cookie": f"svc_vid=visitor-shop-1; fake_wc_cart={basket}",
        "Referer": shop.url + page})
    order_id = int(json.loads(placed.body)["redirect"].rsplit("=", 1)[1])
    order = (await _events(deps, shop, 3))[2]
    assert (order["type"], order["total"], order["currency"]) == ("order_placed", 2500, "EUR")
    assert (await _order(deps, shop, order_id))["status"] == "placed"
    assert await _money(deps, shop) == {}  # placed is not paid

    # The payment provider's callback, not the visitor's request: payment_complete fires the
    # status change to processing and then its own hook; the step is stored once.
    assert (await shop.http(f"/?fake_wc_order={order_id}&payment_complete=1")).code == 200
    assert (await shop.http(f"/?fake_wc_order={order_id}&status=completed")).code == 200
    assert (await shop.http(f"/?fake_wc_order={order_id}&refund=5.00")).code == 200
    events = await _events(deps, shop, 5)
    assert [event["type"] for event in events][3:] == ["order_paid", "order_refunded"]
    assert events[4]["amount"] == 500
    stored = await _order(deps, shop, order_id)
    assert (stored["visitorId"], stored["status"], stored["total"], stored["refunded"]) == (
        "visitor-shop-1", "paid", 2500, 500)
    assert await _money(deps, shop) == {"EUR": 2000}  # 2 x 12.50 - 5.00
    lead = (await documents(deps, "leads", shop.tenant.site_id))[0]
    assert lead["orderCompleted"] is True  # the lead still ends the recording


async def test_the_block_checkout_is_reported_and_a_failed_payment_never_counts(
        open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    basket = "%7B%22" + str(shop.wp.product_id) + "%22%3A1%7D"
    visitor = {"Cookie": f"svc_vid=visitor-block-9; fake_wc_cart={basket}"}
    page = await _page(shop, "<!-- wp:woocommerce/checkout /-->")
    assert (await shop.http(page, headers=visitor)).code == 200
    assert (await _events(deps, shop, 1))[0]["type"] == "checkout_started"
    orders = []
    for n in range(2):
        placed = await shop.http(f"/?fake_wc_checkout=1&block=1&email=b{n}@example.com",
                                 headers=visitor)
        orders.append(int(re.search(rb"Order (\d+) received", placed.body).group(1)))
    # The first order's payment fails; the second is paid and then cancelled.
    await shop.http(f"/?fake_wc_order={orders[0]}&status=failed")
    await shop.http(f"/?fake_wc_order={orders[1]}&status=processing")
    await _events(deps, shop, 5)
    assert (await _order(deps, shop, orders[0]))["status"] == "failed"
    assert await _money(deps, shop) == {"EUR": 1250}
    await shop.http(f"/?fake_wc_order={orders[1]}&status=cancelled")
    await _events(deps, shop, 6)
    assert (await _order(deps, shop, orders[1]))["status"] == "cancelled"
    assert await _money(deps, shop) == {}


async def test_a_gpc_visitors_cart_and_order_are_not_sent(open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    basket = "%7B%22" + str(shop.wp.product_id) + "%22%3A1%7D"
    gpc = {"Cookie": f"svc_vid=visitor-gpc-9; fake_wc_cart={basket}", "Sec-GPC": "1"}
    await shop.http(f"/?add-to-cart={shop.wp.product_id}&quantity=3", headers=gpc)
    placed = await shop.http("/?fake_wc_checkout=1&block=1&email=g@example.com", headers=gpc)
    order_id = int(re.search(rb"Order (\d+) received", placed.body).group(1))
    await shop.http(f"/?fake_wc_order={order_id}&payment_complete=1")
    assert await shop.wp.php("return \\VisitorService\\Outbox::backlog();") == 0
    assert await documents(deps, commerce.EVENTS, shop.tenant.site_id) == []


# Paid means paid (issue 40 point 2): order_paid when WooCommerce records the payment, by the
# gateway's payment_complete or by date_paid, never for a status alone; one per order.

async def _checkout(shop: Shop, gateway: str) -> int:
    """An order of one mug placed through the classic checkout, paid with `gateway`; its id."""
    basket = "%7B%22" + str(shop.wp.product_id) + "%22%3A1%7D"
    placed = await shop.http(
        f"/?fake_wc_checkout=1&email={gateway}@example.com&payment_method={gateway}",
        headers={"Cookie": f"svc_vid=visitor-{gateway}-1; fake_wc_cart={basket}"})
    return int(re.search(rb"Order (\d+) received", placed.body).group(1))


async def _steps(deps, shop: Shop, order_id: int) -> list[str]:
    """Each step the plugin sent for an order, once per event id: still in its outbox (where
    every event is kept before the request that made it ends), or delivered to the service. The
    outbox first: a row leaves it only after the service stored its event."""
    kept = await shop.wp.php("""global $wpdb; return $wpdb->get_col("SELECT body FROM
        {$wpdb->prefix}visitor_service_outbox WHERE path = '/ingest/commerce'");""")
    sent = {body["eventId"]: body["type"] for body in map(json.loads, kept)
            if body.get("orderId") == str(order_id)}
    for doc in await documents(deps, commerce.EVENTS, shop.tenant.site_id):
        if doc.get("orderId") == str(order_id):
            sent[doc["_id"].split(":", 1)[1]] = doc["type"]
    return sorted(sent.values())


async def _status_in_shop(shop: Shop, order_id: int) -> str:
    return await shop.wp.php(f"return wc_get_order({order_id})->status;")


async def test_an_online_payment_is_paid_when_the_gateway_completes_it(
        open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    order_id = await _checkout(shop, "stripe")
    assert await _status_in_shop(shop, order_id) == "pending"
    assert await _steps(deps, shop, order_id) == ["order_placed"]
    # The provider's callback: payment_complete records the payment, paid at once.
    await shop.http(f"/?fake_wc_order={order_id}&payment_complete=1")
    assert await _steps(deps, shop, order_id) == ["order_paid", "order_placed"]
    await _events(deps, shop, 2)
    assert (await _order(deps, shop, order_id))["status"] == "paid"
    assert await _money(deps, shop) == {"EUR": 1250}
    # Shipped later: Completed is no second payment.
    await shop.http(f"/?fake_wc_order={order_id}&status=completed")
    assert await _steps(deps, shop, order_id) == ["order_paid", "order_placed"]


async def test_cash_on_delivery_is_paid_at_completed_and_one_cancelled_before_never_counts(
        open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    delivered, refused = await _checkout(shop, "cod"), await _checkout(shop, "cod")
    # Processing is where cash on delivery waits for the parcel: not paid.
    for order_id in (delivered, refused):
        assert await _status_in_shop(shop, order_id) == "processing"
        assert await _steps(deps, shop, order_id) == ["order_placed"]
    await _events(deps, shop, 2)
    assert await _money(deps, shop) == {}
    # The parcel is refused and the order cancelled: it never counted as revenue.
    await shop.http(f"/?fake_wc_order={refused}&status=cancelled")
    assert await _steps(deps, shop, refused) == ["order_cancelled", "order_placed"]
    # The other is paid on delivery: Completed, where WooCommerce sets its date_paid.
    await shop.http(f"/?fake_wc_order={delivered}&status=completed")
    assert await _steps(deps, shop, delivered) == ["order_paid", "order_placed"]
    await _events(deps, shop, 4)
    assert [(await _order(deps, shop, order_id))["status"] for order_id in (delivered, refused)
            ] == ["paid", "cancelled"]
    assert await _money(deps, shop) == {"EUR": 1250}


async def test_a_bank_transfer_is_paid_when_the_shop_marks_it_paid(open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    order_id = await _checkout(shop, "bacs")
    assert await _status_in_shop(shop, order_id) == "on-hold"  # awaiting the transfer
    assert await _steps(deps, shop, order_id) == ["order_placed"]
    # The money arrived and the shop moves the order on to Processing: date_paid, paid.
    await shop.http(f"/?fake_wc_order={order_id}&status=processing")
    assert await _steps(deps, shop, order_id) == ["order_paid", "order_placed"]
    await shop.http(f"/?fake_wc_order={order_id}&status=completed")
    assert await _steps(deps, shop, order_id) == ["order_paid", "order_placed"]
    await _events(deps, shop, 2)
    assert (await _order(deps, shop, order_id))["status"] == "paid"
    assert await _money(deps, shop) == {"EUR": 1250}
