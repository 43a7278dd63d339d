"""The overview's money figures (issue 31 point 2), from crafted traffic whose orders, revenue,
conversion rate, average order value and revenue per visitor are worked out by hand below;
erasure and a restriction keep them exact, and a second currency is shown apart."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from derived import daily_figures
from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest

SHOP = "https://shop.example"


def _today() -> date:
    return datetime.now(UTC).date()


def _at(day: date, hour: int = 10) -> str:
    return datetime(day.year, day.month, day.day, hour, tzinfo=UTC).isoformat()


async def _order(ingest: Ingest, visitor: str, order: str, total: str, currency: str,
                 day: date, *then: tuple[str, date, dict[str, Any]]) -> None:
    """An order placed and paid on `day`, then its later events."""
    await ingest("commerce", {"eventId": f"{order}-placed", "type": "order_placed",
                              "visitorId": visitor, "sessionId": f"{visitor}-s",
                              "orderId": order, "total": total, "currency": currency,
                              "occurredAt": _at(day, 9)})
    for n, (kind, when, extra) in enumerate(then):
        await ingest("commerce", {"eventId": f"{order}-{n}", "type": kind, "orderId": order,
                                  "occurredAt": _at(when, 11), **extra})


async def _traffic(ingest: Ingest, deps, *, fold: bool = True) -> date:
    """Period [T-6, T]: visitors a, b, c, d. Previous period [T-13, T-7]: visitors e, f.

    a: A1 19.99 EUR paid T-1; A2 5.01 EUR paid T-3, cancelled T (taken back).
    b: B1 50.00 EUR paid T-2, 10.00 refunded T (40.00 counted).
    c: C1 12.00 EUR placed T-1, payment failed (never counted).
    d: D1 30.00 USD paid T-1 (another currency: shown apart).
    e: E1 20.00 EUR paid T-8 (the previous period; the site's first paid order).
    """
    t = _today()
    for visitor, day in (("a", t - timedelta(days=1)), ("b", t - timedelta(days=1)),
                         ("c", t - timedelta(days=1)), ("d", t - timedelta(days=1)),
                         ("e", t - timedelta(days=8)), ("f", t - timedelta(days=8))):
        await ingest("pageviews", {"visitorId": visitor, "url": f"{SHOP}/",
                                   "occurredAt": _at(day, 8)})
    paid: dict[str, Any] = {}
    await _order(ingest, "e", "E1", "20.00", "EUR", t - timedelta(days=8),
                 ("order_paid", t - timedelta(days=8), paid))
    await _order(ingest, "a", "A1", "19.99", "EUR", t - timedelta(days=1),
                 ("order_paid", t - timedelta(days=1), paid))
    await _order(ingest, "a", "A2", "5.01", "EUR", t - timedelta(days=3),
                 ("order_paid", t - timedelta(days=3), paid), ("order_cancelled", t, paid))
    await _order(ingest, "b", "B1", "50", "EUR", t - timedelta(days=2),
                 ("order_paid", t - timedelta(days=2), paid),
                 ("order_refunded", t, {"amount": "10.00", "currency": "EUR"}))
    await _order(ingest, "c", "C1", "12.00", "EUR", t - timedelta(days=1),
                 ("order_failed", t - timedelta(days=1), paid))
    await _order(ingest, "d", "D1", "30.00", "USD", t - timedelta(days=1),
                 ("order_paid", t - timedelta(days=1), paid))
    if fold:
        await deps.derivation.fold()
    return t


async def _money(fetch: Fetch, tenant: Tenant, token: str, t: date) -> dict[str, Any]:
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/overview?from="
                         f"{(t - timedelta(days=6)).isoformat()}&to={t.isoformat()}", token=token)
    assert answer.code == 200, answer
    return answer.json()["commerce"]


def _values(money: dict[str, Any]) -> dict[str, Any]:
    return {name: (figure["value"], figure["previous"], figure["change"])
            for name, figure in money["figures"].items()}


async def test_the_overview_counts_paid_orders_less_refunds_in_the_reporting_currency(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    t = await _traffic(ingest, deps)
    money = await _money(fetch, tenant, viewer_token, t)
    assert (money["currency"], money["currencySource"]) == ("EUR", "firstOrder")
    # Now: A1 and B1 count in EUR (2 orders, 4 visitors: 0.5), D1 in USD apart; EUR 19.99 +
    # 40.00 = 59.99 over 2 orders (29.995, shown 30.00) and 4 visitors (14.9975, shown 15.00).
    # Before: E1 alone, 20.00 over 1 order and 2 visitors (0.5). Changes on the exact amounts:
    # 3999/2000 = 1.9995, 999.5/2000 = 0.49975 and 499.75/1000 = 0.49975 (both shown 0.4998).
    assert _values(money) == {
        "orders": (2, 1, 1.0),
        "conversionRate": (0.5, 0.5, 0.0),
        "revenue": ("59.99", "20.00", 1.9995),
        "averageOrderValue": ("30.00", "20.00", 0.4998),
        "revenuePerVisitor": ("15.00", "10.00", 0.4998),
    }
    assert money["otherCurrencies"] == [{"currency": "USD", "orders": 1, "revenue": "30.00"}]
    days = {row["day"]: (row["orders"], row["revenue"]) for row in money["days"]}
    assert len(days) == 7
    assert days[(t - timedelta(days=1)).isoformat()] == (1, "19.99")  # A1; D1 is in USD
    assert days[(t - timedelta(days=2)).isoformat()] == (1, "40.00")  # B1 less its refund
    assert days[(t - timedelta(days=3)).isoformat()] == (0, "0.00")   # A2, cancelled


async def test_every_money_figure_counts_the_reporting_currencys_orders_only(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    # Issue 41 point 8: 39 visitors on T-1, 7 of them pay 45.00 EUR each and one 30.00 USD.
    t, day = _today(), _today() - timedelta(days=1)
    for n in range(39):
        await ingest("pageviews", {"visitorId": f"v{n}", "url": f"{SHOP}/",
                                   "occurredAt": _at(day, 8)})
    for n in range(8):
        await _order(ingest, f"v{n}", f"O{n}", "30.00" if n == 7 else "45.00",
                     "USD" if n == 7 else "EUR", day, ("order_paid", day, {}))
    await deps.derivation.fold()
    money = await _money(fetch, tenant, viewer_token, t)
    values = _values(money)
    # 7 orders, 7 x 45.00 = 315.00, conversion 7/39 unrounded (0.179487...), 315.00 / 39 =
    # 8.0769 (shown 8.08); the USD order apart, with its own count. Nothing before.
    assert values == {
        "orders": (7, 0, None),
        "conversionRate": (7 / 39, 0.0, None),
        "revenue": ("315.00", "0.00", None),
        "averageOrderValue": ("45.00", None, None),
        "revenuePerVisitor": ("8.08", None, None),  # no visitor before
    }
    assert values["orders"][0] * 4500 == 31500  # orders x average order value = revenue
    assert money["otherCurrencies"] == [{"currency": "USD", "orders": 1, "revenue": "30.00"}]
    assert [(row["orders"], row["revenue"]) for row in money["days"]
            if row["day"] == day.isoformat()] == [(7, "315.00")]


async def test_a_reporting_currency_set_for_the_site_shows_the_others_apart(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    t = await _traffic(ingest, deps)
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH",
                         json_body={"settings": {"reportingCurrency": "USD"}},
                         token=tenant.token)
    assert answer.code == 200, answer
    money = await _money(fetch, tenant, viewer_token, t)
    assert (money["currency"], money["currencySource"]) == ("USD", "setting")
    # D1 alone in USD: 30.00 over 1 order, and over 4 visitors 7.50; nothing in USD before.
    assert _values(money)["orders"] == (1, 0, None)
    assert _values(money)["revenue"] == ("30.00", "0.00", None)
    assert _values(money)["averageOrderValue"] == ("30.00", None, None)
    assert _values(money)["revenuePerVisitor"] == ("7.50", "0.00", None)
    assert money["otherCurrencies"] == [{"currency": "EUR", "orders": 2, "revenue": "59.99"}]
    # Set back to nothing, the first paid order's currency reports again.
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH",
                         json_body={"settings": {"reportingCurrency": None}},
                         token=tenant.token)
    assert answer.code == 200, answer
    money = await _money(fetch, tenant, viewer_token, t)
    assert (money["currency"], money["currencySource"]) == ("EUR", "firstOrder")


@pytest.mark.parametrize("folded", [True, False], ids=["folded", "still-pending"])
async def test_erasure_takes_the_visitors_orders_out_of_the_money_figures(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str, folded: bool):
    t = await _traffic(ingest, deps, fold=folded)
    erased = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/b/data", "DELETE",
                         token=tenant.token)
    assert erased.code == 200, erased
    assert erased.json()["counts"]["orders"] == 1
    assert erased.json()["counts"]["commerceEvents"] == 3
    await deps.derivation.fold()
    money = await _money(fetch, tenant, viewer_token, t)
    # Without b: A1 in EUR (1 order, 3 visitors: 1/3) and D1 apart; EUR 19.99 over 1 order,
    # and over 3 visitors 6.6633 (shown 6.66).
    values = _values(money)
    assert values["orders"][0] == 1 and values["conversionRate"][0] == 1 / 3
    assert money["otherCurrencies"] == [{"currency": "USD", "orders": 1, "revenue": "30.00"}]
    assert values["revenue"][0] == "19.99"
    assert values["averageOrderValue"][0] == "19.99"
    assert values["revenuePerVisitor"][0] == "6.66"
    # The same as a rebuild from what is left, and nothing of b's orders is held.
    before_rebuild = await _money(fetch, tenant, viewer_token, t)
    await daily_figures.rebuild_site(deps.store, tenant.site_id)
    assert await _money(fetch, tenant, viewer_token, t) == before_rebuild
    for collection in ("orders", "commerce_events"):
        assert await deps.store.collection(collection).count_documents({"visitorId": "b"}) == 0


async def test_a_restriction_takes_the_orders_out_until_it_is_lifted(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    t = await _traffic(ingest, deps)
    before = await _money(fetch, tenant, viewer_token, t)
    switch = f"/api/v1/sites/{tenant.site_id}/visitors/a/restriction"
    answer = await fetch(switch, "PUT", json_body={"on": True}, token=tenant.token)
    assert answer.code == 200, answer
    # Without a: B1 in EUR and D1 apart (3 visitors); EUR 40.00 over 1 order, 13.33 per
    # visitor.
    values = _values(await _money(fetch, tenant, viewer_token, t))
    assert (values["orders"][0], values["revenue"][0], values["averageOrderValue"][0],
            values["revenuePerVisitor"][0]) == (1, "40.00", "40.00", "13.33")
    answer = await fetch(switch, "PUT", json_body={"on": False}, token=tenant.token)
    assert answer.code == 200, answer
    assert await _money(fetch, tenant, viewer_token, t) == before
