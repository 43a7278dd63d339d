"""Errors and pages that cost orders (issue 31 point 4): crafted sessions whose conversion,
baseline and revenue at risk are worked out by hand below; a figure only when at least 30
sessions were hit and the drop is significant at 99 %, otherwise "not enough data"; the errors
list sorts by it; erasure and restriction keep it exact."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from documents import conversion_impact
from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest, send_errors

SHOP = "https://shop.example"
BASE = (datetime.now(UTC) - timedelta(hours=3)).replace(second=0, microsecond=0)


def _at(minute: float) -> str:
    return (BASE + timedelta(minutes=minute)).isoformat()


async def _session(ingest: Ingest, visitor: str, *, paid: bool, minute: int) -> None:
    """A session that views a product, adds it to the cart, starts the checkout (stage 3)
    and, when `paid`, pays a 20.00 EUR order 5 minutes in."""
    context = {"visitorId": visitor, "sessionId": f"{visitor}-s"}
    await ingest("pageviews", {**context, "url": f"{SHOP}/product/a", "productId": "p",
                               "occurredAt": _at(minute)})
    await ingest("commerce", {"eventId": f"{visitor}-cart", "type": "add_to_cart",
                              **context, "productId": "p", "occurredAt": _at(minute + 1)})
    await ingest("commerce", {"eventId": f"{visitor}-checkout", "type": "checkout_started",
                              **context, "occurredAt": _at(minute + 2)})
    if paid:
        await ingest("commerce", {"eventId": f"{visitor}-placed", "type": "order_placed",
                                  **context, "orderId": f"o-{visitor}", "total": "20.00",
                                  "currency": "EUR", "occurredAt": _at(minute + 4)})
        await ingest("commerce", {"eventId": f"{visitor}-paid", "type": "order_paid",
                                  "orderId": f"o-{visitor}", "occurredAt": _at(minute + 5)})


def _error(visitor: str, message: str, minute: int) -> dict[str, Any]:
    return {"visitorId": visitor, "sessionId": f"{visitor}-s", "source": "javascript",
            "type": "TypeError", "message": message, "url": f"{SHOP}/checkout",
            "stack": f"TypeError: {message}\n    at pay (https://shop.example/pay.js:1:1)",
            "occurredAt": _at(minute + 3)}


async def _traffic(ingest: Ingest, deps) -> None:
    """70 sessions, all reaching the checkout (stage 3):

    * h0..h29 hit by "pay is undefined" at the checkout; h0..h5 pay afterwards: 6 of 30;
    * u0..u39 not hit; u0..u29 pay: 30 of 40. u0..u4 are hit by "tooltip" (5 sessions,
      all of them paying) and rage click on /checkout; h0..h29 dead click on /pay.

    36 paid orders of 20.00 EUR: the average order value is 2000 cents.
    """
    for n in range(30):
        await _session(ingest, f"h{n}", paid=n < 6, minute=n)
    for n in range(40):
        await _session(ingest, f"u{n}", paid=n < 30, minute=n)
    await send_errors(ingest, deps, [
        *[_error(f"h{n}", "pay is undefined", n) for n in range(30)],
        *[_error(f"u{n}", "tooltip is null", n) for n in range(5)]])
    for visitor, page, kind, count in (
            *[(f"h{n}", "/pay", "dead_click", 1) for n in range(30)],
            *[(f"u{n}", "/checkout", "rage_click", 4) for n in range(5)]):
        minute = int(visitor[1:])
        await ingest("recordings/interactions", {
            "visitorId": visitor, "sessionId": f"{visitor}-s", "url": f"{SHOP}{page}",
            "interactions": [{"kind": kind, "selector": "#pay", "count": count,
                              "at": _at(minute + 3)}]})
    await deps.derivation.fold()


def _expected(a: float, b: float, n: int, m: int, p: float) -> dict[str, Any]:
    """The figures the rule gives, worked out from the counts."""
    z = (b - a) / math.sqrt(a * (1 - a) / n + p * (1 - p) / m)
    return {"affectedConversion": round(a, 4), "baselineConversion": round(b, 4),
            "z": round(z, 2)}


async def _ranked(fetch: Fetch, tenant: Tenant, token: str) -> dict[str, Any]:
    first = BASE.date().isoformat()
    last = datetime.now(UTC).date().isoformat()
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/error-trends?from={first}&to={last}"
                         "&sort=revenueAtRisk", token=token)
    assert answer.code == 200, answer
    return answer.json()


async def test_an_error_that_costs_orders_has_a_revenue_at_risk_and_leads_the_list(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _traffic(ingest, deps)
    ranked = await _ranked(fetch, tenant, viewer_token)
    assert ranked["rule"] == conversion_impact.RULE
    assert [item["message"] for item in ranked["items"]] == ["pay is undefined",
                                                             "tooltip is null"]
    pay = ranked["items"][0]["impact"]
    # a = 6/30 = 0.2; comparable sessions not hit at the checkout stage: the 40 u's, 30 of
    # them paid, b = 0.75; z = 0.55 / sqrt(0.2*0.8/30 + 0.75*0.25/40) = 5.49 >= 2.33.
    # Revenue at risk = (0.75 - 0.2) x 30 x 20.00 EUR = 330.00 EUR.
    assert pay == {"affectedSessions": 30, **_expected(0.2, 0.75, 30, 40, 0.75),
                   "status": "significant", "revenueAtRisk": 33000,
                   "revenueAtRiskText": "330.00", "currency": "EUR"}
    # 5 sessions hit (and all paid): never a figure under 30 sessions.
    tooltip = ranked["items"][1]["impact"]
    assert (tooltip["affectedSessions"], tooltip["status"], tooltip["revenueAtRisk"]) == (
        5, "notEnoughData", None)


async def test_pages_with_rage_and_dead_clicks_are_ranked_by_revenue_at_risk(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _traffic(ingest, deps)
    first = BASE.date().isoformat()
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/revenue-at-risk/pages?from={first}",
                         token=viewer_token)
    assert answer.code == 200, answer
    pages = answer.json()["items"]
    assert [(page["page"], page["affectedSessions"], page["status"], page["revenueAtRisk"])
            for page in pages] == [("/pay", 30, "significant", 33000),
                                   ("/checkout", 5, "notEnoughData", None)]


async def test_a_drop_that_is_not_significant_gets_no_figure(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    # 30 sessions hit, 20 of them pay; 40 not hit, 30 pay. a = 2/3, b = 0.75:
    # z = (0.75 - 0.6667) / sqrt((2/3)(1/3)/30 + 0.75*0.25/40) = 0.74 < 2.33.
    for n in range(30):
        await _session(ingest, f"h{n}", paid=n < 20, minute=n)
    for n in range(40):
        await _session(ingest, f"u{n}", paid=n < 30, minute=n)
    await send_errors(ingest, deps, [_error(f"h{n}", "slow", n) for n in range(30)])
    await deps.derivation.fold()
    impact = (await _ranked(fetch, tenant, viewer_token))["items"][0]["impact"]
    assert impact == {"affectedSessions": 30, **_expected(2 / 3, 0.75, 30, 40, 0.75),
                      "status": "notEnoughData", "revenueAtRisk": None,
                      "revenueAtRiskText": None, "currency": "EUR"}


async def test_erasure_and_restriction_keep_the_revenue_at_risk_exact(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _traffic(ingest, deps)
    # u0 (not hit by "pay is undefined", paid) is erased: 29 of 39 comparable sessions paid,
    # 35 orders of 20.00 EUR. Revenue at risk = (29/39 - 1/5) x 30 x 2000 cents
    # = (106/195) x 60000 = 32615.38 -> 32615.
    erased = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/u0/data", "DELETE",
                         token=tenant.token)
    assert erased.code == 200, erased
    pay = (await _ranked(fetch, tenant, viewer_token))["items"][0]["impact"]
    assert (pay["baselineConversion"], pay["revenueAtRisk"], pay["revenueAtRiskText"]) == (
        round(29 / 39, 4), 32615, "326.15")
    # h29 (hit, did not pay) is restricted: 29 sessions hit, under 30, so no figure.
    switch = f"/api/v1/sites/{tenant.site_id}/visitors/h29/restriction"
    answer = await fetch(switch, "PUT", json_body={"on": True}, token=tenant.token)
    assert answer.code == 200, answer
    pay = (await _ranked(fetch, tenant, viewer_token))["items"][0]["impact"]
    assert (pay["affectedSessions"], pay["status"], pay["revenueAtRisk"]) == (
        29, "notEnoughData", None)
    answer = await fetch(switch, "PUT", json_body={"on": False}, token=tenant.token)
    assert answer.code == 200, answer
    pay = (await _ranked(fetch, tenant, viewer_token))["items"][0]["impact"]
    assert (pay["affectedSessions"], pay["revenueAtRisk"]) == (30, 32615)
