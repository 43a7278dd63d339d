"""The orders list and the visitor profile's orders (issue 41 point 1), from orders sent through
the real commerce ingest and folded visits. Expected lists are worked out by hand below.

The shop (days are UTC days before today; every time of day is 08:00 plus a few minutes, so no
order crosses a midnight):

| order | visitor | session | source         | placed        | then                      | value  |
|-------|---------|---------|----------------|---------------|---------------------------|--------|
| o1    | ann     | ann-s   | newsletter     | day 11, 08:03 | paid 08:05                | 20 EUR |
| o2    | bob     | bob-s   | google.com     | day 4, 08:00  | paid day 3, refunded 5.50 | 40 EUR |
| o3    | cat     | cat-s   | (direct)       | day 4, 08:00  | -                         | 12 USD |
| o4    | dan     | none    | google.com (*) | day 2, 08:30  | cancelled                 | 99.99  |
| o5    | eve     | eve-s   | (unknown)      | day 2, 08:40  | failed                    | 30 EUR |
| o6    | fay     | fay-s   | (direct)       | day 1, 08:00  | paid, refunded in full    | 0 EUR  |
| o7    | gus     | gus-s   | (direct)       | day 1, 08:10  | paid; gus is restricted   | 10 EUR |

(*) o4 was sent without a session: it joins dan's visit of 08:00 that day, the last before it.
o4 is 99.99 EUR. o2 and o3 were placed at the same moment: o3's id sorts after o2's, so o3
comes first (newest first, then by id, descending).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest

SHOP = "https://shop.example"
TODAY = datetime.now(UTC).date()


def _day(days_ago: int) -> date:
    return TODAY - timedelta(days=days_ago)


def _at(days_ago: int, minute: int = 0) -> str:
    day = _day(days_ago)
    return datetime(day.year, day.month, day.day, 8, minute, tzinfo=UTC).isoformat()


async def _pageview(ingest: Ingest, visitor: str, session: str, at: str, *,
                    url: str = f"{SHOP}/", referrer: str | None = None) -> None:
    body: dict[str, Any] = {"visitorId": visitor, "sessionId": session, "url": url,
                            "occurredAt": at}
    if referrer:
        body["referrer"] = referrer
    await ingest("pageviews", body)


async def _order(ingest: Ingest, order: str, visitor: str, session: str | None, total: str,
                 currency: str, placed: str, *steps: tuple[str, str, str | None]) -> None:
    """Place the order, then each (type, at, refunded amount) step."""
    context: dict[str, Any] = {"visitorId": visitor}
    if session:
        context["sessionId"] = session
    await ingest("commerce", {"eventId": f"{order}-placed", "type": "order_placed", **context,
                              "orderId": order, "total": total, "currency": currency,
                              "occurredAt": placed})
    for kind, at, amount in steps:
        event: dict[str, Any] = {"eventId": f"{order}-{kind}", "type": kind, "orderId": order,
                                 "occurredAt": at}
        if amount:
            event.update(amount=amount, currency=currency)
        await ingest("commerce", event)


async def _shop(fetch: Fetch, tenant: Tenant, ingest: Ingest, deps) -> None:
    await _pageview(ingest, "ann", "ann-s", _at(11), url=f"{SHOP}/?utm_source=newsletter")
    await _pageview(ingest, "ann", "ann-s", _at(11, 2), url=f"{SHOP}/checkout")
    await _order(ingest, "o1", "ann", "ann-s", "20.00", "EUR", _at(11, 3),
                 ("order_paid", _at(11, 5), None))
    await _pageview(ingest, "bob", "bob-s", _at(4), referrer="https://www.google.com/")
    await _order(ingest, "o2", "bob", "bob-s", "45.50", "EUR", _at(4),
                 ("order_paid", _at(3), None), ("order_refunded", _at(3, 30), "5.50"))
    await _pageview(ingest, "cat", "cat-s", _at(4))
    await _order(ingest, "o3", "cat", "cat-s", "12.00", "USD", _at(4))
    await _pageview(ingest, "dan", "dan-s", _at(2), referrer="https://google.com/search")
    await _order(ingest, "o4", "dan", None, "99.99", "EUR", _at(2, 30),
                 ("order_cancelled", _at(2, 50), None))
    await _order(ingest, "o5", "eve", "eve-s", "30.00", "EUR", _at(2, 40),
                 ("order_failed", _at(2, 45), None))
    await _pageview(ingest, "fay", "fay-s", _at(1))
    await _order(ingest, "o6", "fay", "fay-s", "60.00", "EUR", _at(1),
                 ("order_paid", _at(1, 1), None), ("order_refunded", _at(1, 20), "60.00"))
    await _pageview(ingest, "gus", "gus-s", _at(1, 5))
    await _order(ingest, "o7", "gus", "gus-s", "10.00", "EUR", _at(1, 10),
                 ("order_paid", _at(1, 11), None))
    await deps.derivation.fold()
    held = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/gus/restriction", "PUT",
                       json_body={"on": True}, token=tenant.token)
    assert held.code == 200, held


@pytest.fixture
async def shop(fetch: Fetch, tenant: Tenant, ingest: Ingest, deps) -> Tenant:
    await _shop(fetch, tenant, ingest, deps)
    return tenant


async def _list(fetch: Fetch, tenant: Tenant, query: str = "", *, token: str | None = None
                ) -> dict[str, Any]:
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/orders{query}",
                         token=token or tenant.token)
    assert answer.code == 200, answer
    return answer.json()


async def _ids(fetch: Fetch, tenant: Tenant, query: str = "") -> list[str]:
    return [order["orderId"] for order in (await _list(fetch, tenant, query))["items"]]


async def _all_pages(fetch: Fetch, tenant: Tenant, query: str) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        suffix = f"&cursor={cursor}" if cursor else ""
        page = await _list(fetch, tenant, f"{query}{suffix}")
        pages.append([order["orderId"] for order in page["items"]])
        cursor = page["nextCursor"]
        if cursor is None:
            return pages


async def test_orders_are_listed_newest_placing_first_with_value_source_journey_and_links(
        fetch: Fetch, shop: Tenant, viewer_token: str):
    page = await _list(fetch, shop, token=viewer_token)
    assert [o["orderId"] for o in page["items"]] == ["o6", "o5", "o4", "o3", "o2", "o1"]
    assert page["nextCursor"] is None and page["partial"] is False
    orders = {order["orderId"]: order for order in page["items"]}
    assert [(o["status"], o["currency"], o["totalText"], o["value"], o["valueText"], o["source"])
            for o in page["items"]] == [
        ("refunded", "EUR", "60.00", 0, "0.00", "(direct)"),
        ("failed", "EUR", "30.00", 3000, "30.00", "(unknown)"),
        ("cancelled", "EUR", "99.99", 9999, "99.99", "google.com"),
        ("placed", "USD", "12.00", 1200, "12.00", "(direct)"),
        ("paid", "EUR", "45.50", 4000, "40.00", "google.com"),
        ("paid", "EUR", "20.00", 2000, "20.00", "newsletter"),
    ]
    # What it adds to revenue stays order_view's: only a paid order counts.
    assert (orders["o2"]["net"], orders["o2"]["counted"]) == (4000, True)
    assert (orders["o4"]["net"], orders["o4"]["counted"]) == (0, False)
    site = f"/app/sites/{shop.site_id}"
    assert orders["o1"]["links"] == {"visitor": f"{site}/visitors/ann",
                                     "journey": f"{site}/visitors/ann#sessions-title",
                                     "replay": None}
    assert orders["o1"]["journey"]["entry"] == "/"
    assert orders["o1"]["journey"]["exit"] == "/checkout"
    assert orders["o1"]["journey"]["pages"] == ["/", "/checkout"]
    assert orders["o4"]["journey"]["startedAt"] == _at(2).replace("+00:00", ".000Z")
    assert orders["o5"]["journey"] is None and orders["o5"]["links"]["journey"] is None
    assert orders["o5"]["links"]["visitor"] == f"{site}/visitors/eve"


async def test_each_filter_leaves_the_orders_it_names(fetch: Fetch, shop: Tenant):
    expected = {
        "?status=paid": ["o2", "o1"],
        "?status=refunded": ["o6"],
        "?status=cancelled": ["o4"],
        "?status=failed": ["o5"],
        "?status=placed": ["o3"],
        "?currency=USD": ["o3"],
        "?currency=eur": ["o6", "o5", "o4", "o2", "o1"],
        # 30.00 to 45.00 EUR: o5 (30.00) and o2 (45.50 less 5.50), both ends included.
        "?currency=EUR&minNet=30&maxNet=45.00": ["o5", "o2"],
        "?currency=EUR&minNet=99.99": ["o4"],
        "?currency=EUR&maxNet=0": ["o6"],
        "?source=google.com": ["o4", "o2"],
        "?source=(direct)": ["o6", "o3"],
        "?source=(unknown)": ["o5"],
        "?source=newsletter": ["o1"],
        f"?from={_day(4)}&to={_day(2)}": ["o5", "o4", "o3", "o2"],
        f"?from={_day(11)}&to={_day(11)}": ["o1"],
        f"?to={_day(5)}": ["o1"],
        "?status=paid&source=google.com&currency=EUR": ["o2"],
    }
    found = {query: await _ids(fetch, shop, query) for query in expected}
    assert found == expected


async def test_orders_sort_by_payment_and_by_value(fetch: Fetch, shop: Tenant):
    # Payment: o6 day 1, o2 day 3, o1 day 11; never paid are left out; the range is of payment.
    assert await _ids(fetch, shop, "?sort=paid") == ["o6", "o2", "o1"]
    assert await _ids(fetch, shop, f"?sort=paid&from={_day(3)}&to={_day(3)}") == ["o2"]
    # o2 was placed on day 4 but paid on day 3.
    assert await _ids(fetch, shop, f"?sort=paid&from={_day(4)}&to={_day(4)}") == []
    assert await _ids(fetch, shop, "?sort=value&currency=EUR") == ["o4", "o2", "o5", "o1", "o6"]
    assert await _ids(fetch, shop, "?sort=value&currency=EUR&status=paid") == ["o2", "o1"]


async def test_pages_by_cursor_without_gaps_or_repeats(fetch: Fetch, shop: Tenant):
    assert await _all_pages(fetch, shop, "?limit=2") == [["o6", "o5"], ["o4", "o3"], ["o2", "o1"]]
    assert await _all_pages(fetch, shop, "?limit=4&sort=paid") == [["o6", "o2", "o1"]]
    assert await _all_pages(fetch, shop, "?limit=2&sort=value&currency=EUR") == [
        ["o4", "o2"], ["o5", "o1"], ["o6"]]
    assert await _all_pages(fetch, shop, "?limit=1&source=google.com") == [["o4"], ["o2"]]
    assert await _all_pages(fetch, shop, "?limit=1&source=(direct)&currency=USD") == [["o3"]]


async def test_a_restricted_visitors_orders_are_left_out_until_the_restriction_is_lifted(
        fetch: Fetch, shop: Tenant):
    assert "o7" not in await _ids(fetch, shop, "?sort=paid")
    lifted = await fetch(f"/api/v1/sites/{shop.site_id}/visitors/gus/restriction", "PUT",
                         json_body={"on": False}, token=shop.token)
    assert lifted.code == 200, lifted
    assert await _ids(fetch, shop, f"?from={_day(1)}") == ["o7", "o6"]
    assert (await _list(fetch, shop, "?status=paid&limit=1"))["items"][0]["source"] == \
        "(direct)"


async def test_filters_that_cannot_be_answered_are_refused(fetch: Fetch, tenant: Tenant):
    for query, field in (("?minNet=10", "minNet"), ("?sort=value", "sort"),
                         ("?currency=EUR&minNet=1.234", "minNet"),
                         ("?currency=EUR&minNet=50&maxNet=10", "minNet"),
                         ("?status=shipped", "status"), ("?sort=cheapest", "sort"),
                         ("?minNet=-1&currency=EUR", "minNet"), ("?currency=E1", "currency"),
                         ("?cursor=bm90LWEtY3Vyc29y", "cursor"),
                         ("?sort=value&currency=EUR&cursor=bm90LWEtY3Vyc29y", "cursor")):
        answer = await fetch(f"/api/v1/sites/{tenant.site_id}/orders{query}",
                             token=tenant.token)
        assert answer.code == 422, (query, answer)
        assert answer.json()["error"]["field"] == field, query


async def test_another_organizations_site_answers_404(fetch: Fetch, shop: Tenant, make_tenant):
    stranger = await make_tenant("stranger")
    answer = await fetch(f"/api/v1/sites/{shop.site_id}/orders", token=stranger.token)
    assert answer.code == 404
    assert "o1" not in answer.body.decode()


async def test_the_visitor_profile_lists_the_visitors_orders(fetch: Fetch, tenant: Tenant,
                                                              ingest: Ingest, deps):
    await _pageview(ingest, "ann", "ann-s", _at(6), referrer="https://duckduckgo.com/")
    await _order(ingest, "a1", "ann", "ann-s", "15.00", "EUR", _at(6, 5),
                 ("order_paid", _at(6, 6), None))
    await _order(ingest, "a2", "ann", "ann-s", "7.50", "GBP", _at(6, 20))
    await _order(ingest, "b1", "bob", "bob-s", "9.00", "EUR", _at(6, 30))
    await deps.derivation.fold()
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/ann", token=tenant.token)
    assert answer.code == 200, answer
    assert [(o["orderId"], o["status"], o["valueText"], o["currency"], o["source"])
            for o in answer.json()["orders"]] == [
        ("a2", "placed", "7.50", "GBP", "duckduckgo.com"),
        ("a1", "paid", "15.00", "EUR", "duckduckgo.com"),
    ]


async def test_an_order_links_to_the_recording_running_when_it_was_placed(
        fetch: Fetch, tenant: Tenant, ingest: Ingest, deps):
    context = {"visitorId": "hal", "sessionId": "hal-s", "url": f"{SHOP}/checkout"}
    await ingest("pageviews", context)
    started = await ingest("recordings/start", {**context, "recordingId":
                                                "0f0e0d0c-0b0a-4909-8807-060504030201"})
    await _order(ingest, "h1", "hal", "hal-s", "5.00", "EUR",
                 datetime.now(UTC).isoformat())
    await deps.derivation.fold()
    order = (await _list(fetch, tenant))["items"][0]
    recording_id = started.get("recordingId") or "0f0e0d0c-0b0a-4909-8807-060504030201"
    assert order["recordingId"] == recording_id
    assert order["links"]["replay"].startswith(
        f"/app/sites/{tenant.site_id}/recordings/{recording_id}?at=")
