"""Errors and pages that cost orders (issues 31 point 4 and 39): crafted sessions whose
conversion, baseline, exact p-value, revenue at risk and its interval are worked out by hand
below; a figure only when at least 30 sessions were hit and the drop survives the false
discovery rate, otherwise "not enough data"; the errors list sorts by it; erasure and
restriction keep it exact. The test's error rate and power: test_revenue_at_risk_calibration."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from math import comb
from typing import Any

import pytest

from derived import conversion_impact
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


def _at_most(observed: int, *, sessions: int, converted: int, hit: int) -> Any:
    """P(X <= observed) for X the converted among `hit` sessions drawn from `sessions` of
    which `converted` converted: the exact p-value of one funnel stage, from binomials."""
    tail = sum(comb(converted, k) * comb(sessions - converted, hit - k)
               for k in range(observed + 1))
    return pytest.approx(tail / comb(sessions, hit), rel=1e-3)


def _not_enough_data(**observed: Any) -> dict[str, Any]:
    return {**observed, "status": "notEnoughData", "revenueAtRisk": None,
            "revenueAtRiskText": None, "revenueAtRiskLow": None, "revenueAtRiskLowText": None,
            "revenueAtRiskHigh": None, "revenueAtRiskHighText": None, "currency": "EUR"}


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
    # them paid, b = 0.75. Of the 70 sessions 36 paid; if being hit changed nothing, the 30
    # hit would be 30 drawn from the 70, and 6 or fewer of them paying has probability
    # sum_{k<=6} C(36,k) C(34,30-k) / C(70,30) = 4.99e-6. The only other error hit 5
    # sessions, too few to be tested, so the family is this one: adjusted p = p <= 0.01.
    # Revenue at risk = (0.75 - 0.2) x 30 x 20.00 EUR = 330.00 EUR. Its 90 % interval:
    # Clopper-Pearson gives 6/30 in [0.09087, 0.35701] and 30/40 in [0.61294, 0.85763]; the
    # drop 0.55 goes down by sqrt((0.75-0.61294)^2 + (0.35701-0.2)^2) = 0.20842 and up by
    # sqrt((0.85763-0.75)^2 + (0.2-0.09087)^2) = 0.15327: [0.34158, 0.70327] x 600.00 EUR.
    p_value = _at_most(6, sessions=70, converted=36, hit=30)
    assert pay == {"affectedSessions": 30, "affectedConversion": 0.2, "baselineConversion": 0.75,
                   "pValue": p_value, "adjustedPValue": p_value, "status": "significant",
                   "revenueAtRisk": 33000, "revenueAtRiskText": "330.00",
                   "revenueAtRiskLow": 20495, "revenueAtRiskLowText": "204.95",
                   "revenueAtRiskHigh": 42196, "revenueAtRiskHighText": "421.96",
                   "currency": "EUR"}
    # 5 sessions hit (and all paid): never a figure, nor a test, under 30 sessions.
    tooltip = ranked["items"][1]["impact"]
    assert (tooltip["affectedSessions"], tooltip["status"], tooltip["adjustedPValue"],
            tooltip["revenueAtRisk"]) == (5, "notEnoughData", None, None)


async def test_pages_with_rage_and_dead_clicks_are_ranked_by_revenue_at_risk(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _traffic(ingest, deps)
    first = BASE.date().isoformat()
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/revenue-at-risk/pages?from={first}",
                         token=viewer_token)
    assert answer.code == 200, answer
    pages = answer.json()["items"]
    assert [(page["page"], page["affectedSessions"], page["status"], page["revenueAtRisk"],
             page["revenueAtRiskLow"], page["revenueAtRiskHigh"]) for page in pages] == [
        ("/pay", 30, "significant", 33000, 20495, 42196),
        ("/checkout", 5, "notEnoughData", None, None, None)]


async def test_an_errors_page_has_its_revenue_at_risk_and_opens_the_sessions_it_hit(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _traffic(ingest, deps)
    for visitor in ("h0", "h1", "u0"):
        await ingest("recordings/start", {"visitorId": visitor, "sessionId": f"{visitor}-s",
                                          "recordingId": str(uuid.uuid4()),
                                          "url": f"{SHOP}/product/a"})
    pay = (await _ranked(fetch, tenant, viewer_token))["items"][0]
    days = f"from={BASE.date().isoformat()}&to={datetime.now(UTC).date().isoformat()}"
    site = f"/api/v1/sites/{tenant.site_id}"
    answer = await fetch(f"{site}/errors/{pay['id']}/breakdown?{days}", token=viewer_token)
    assert answer.code == 200, answer
    # The same answer as the list's: the same range, adjusted over the same family.
    assert answer.json()["impact"] == pay["impact"]
    assert answer.json()["impact"]["revenueAtRisk"] == 33000
    assert "Mantel-Haenszel" in answer.json()["method"]
    # The sessions behind it: of the three recorded sessions, the two the error hit.
    answer = await fetch(f"{site}/recordings?error={pay['id']}&{days}", token=viewer_token)
    assert answer.code == 200, answer
    assert {row["sessionId"] for row in answer.json()["items"]} == {"h0-s", "h1-s"}


async def test_a_drop_that_is_not_significant_gets_no_figure(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    # 30 sessions hit, 20 of them pay; 40 not hit, 30 pay. a = 2/3, b = 0.75; 50 of the 70
    # paid, and 20 or fewer paying among 30 drawn from them has probability 0.31 > 0.01.
    for n in range(30):
        await _session(ingest, f"h{n}", paid=n < 20, minute=n)
    for n in range(40):
        await _session(ingest, f"u{n}", paid=n < 30, minute=n)
    await send_errors(ingest, deps, [_error(f"h{n}", "slow", n) for n in range(30)])
    await deps.derivation.fold()
    impact = (await _ranked(fetch, tenant, viewer_token))["items"][0]["impact"]
    p_value = _at_most(20, sessions=70, converted=50, hit=30)
    assert impact == _not_enough_data(affectedSessions=30, affectedConversion=0.6667,
                                      baselineConversion=0.75, pValue=p_value,
                                      adjustedPValue=p_value)


async def test_erasure_and_restriction_keep_the_revenue_at_risk_exact(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _traffic(ingest, deps)
    # u0 (not hit by "pay is undefined", paid) is erased: 29 of 39 comparable sessions paid,
    # 35 orders of 20.00 EUR. Revenue at risk = (29/39 - 1/5) x 30 x 2000 cents
    # = (106/195) x 60000 = 32615.38 -> 32615; p = P(X <= 6), 35 of 69 paid, 30 drawn.
    erased = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/u0/data", "DELETE",
                         token=tenant.token)
    assert erased.code == 200, erased
    pay = (await _ranked(fetch, tenant, viewer_token))["items"][0]["impact"]
    assert (pay["baselineConversion"], pay["pValue"], pay["revenueAtRisk"],
            pay["revenueAtRiskText"]) == (round(29 / 39, 4),
                                          _at_most(6, sessions=69, converted=35, hit=30),
                                          32615, "326.15")
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


async def test_of_a_thousand_sessions_at_3_percent_30_without_an_order_are_chance_and_300_are_not(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    # 1,000 sessions of one page (stage "none"), 30 of them paying 20.00 EUR: 3 %. "banner"
    # hits c0..c29 and "checkout broke" c30..c329, none of whom paid.
    for n in range(1000):
        visitor = f"c{n}"
        context = {"visitorId": visitor, "sessionId": f"{visitor}-s"}
        await ingest("pageviews", {**context, "url": f"{SHOP}/", "occurredAt": _at(n % 120)})
        if n >= 970:
            await ingest("commerce", {"eventId": f"{visitor}-placed", "type": "order_placed",
                                      **context, "orderId": f"o-{visitor}", "total": "20.00",
                                      "currency": "EUR", "occurredAt": _at(n % 120 + 1)})
            await ingest("commerce", {"eventId": f"{visitor}-paid", "type": "order_paid",
                                      "orderId": f"o-{visitor}", "occurredAt": _at(n % 120 + 2)})
    await send_errors(ingest, deps, [
        {**_error(f"c{n}", "banner" if n < 30 else "checkout broke", n % 120),
         "url": f"{SHOP}/"} for n in range(330)])
    await deps.derivation.fold()
    impacts = {item["message"]: item["impact"]
               for item in (await _ranked(fetch, tenant, viewer_token))["items"]}
    # 30 sessions with no order where 3 % convert: chance does it 0.97^30 = 40 % of the
    # time. Exactly: 30 of the 1,000 paid, and none among 30 drawn has probability
    # C(970,30)/C(1000,30) = 0.3955. The family is both errors; Benjamini-Hochberg leaves
    # the larger of two p-values as it is.
    p_value = _at_most(0, sessions=1000, converted=30, hit=30)
    assert impacts["banner"] == _not_enough_data(
        affectedSessions=30, affectedConversion=0.0, baselineConversion=round(30 / 970, 4),
        pValue=p_value, adjustedPValue=p_value)
    # 300 sessions with no order: C(970,300)/C(1000,300) = 1.86e-5, the smaller of the two,
    # so Benjamini-Hochberg multiplies it by 2 tests / rank 1.
    # b = 30/700; revenue at risk = (30/700) x 300 x 20.00 EUR = 257.14 EUR. Interval: 0/300
    # is in [0, 0.009936] and 30/700 in [0.031014, 0.057683] (Clopper-Pearson, 90 %), so
    # the drop goes down by sqrt((30/700 - 0.031014)^2 + 0.009936^2) = 0.015459 and up by
    # 0.057683 - 30/700 = 0.014826: [0.027398, 0.057683] x 6,000.00 EUR.
    p_value = _at_most(0, sessions=1000, converted=30, hit=300)
    assert impacts["checkout broke"] == {
        "affectedSessions": 300, "affectedConversion": 0.0,
        "baselineConversion": round(30 / 700, 4), "pValue": p_value,
        "adjustedPValue": pytest.approx(2 * p_value.expected, rel=1e-3),
        "status": "significant", "revenueAtRisk": 25714, "revenueAtRiskText": "257.14",
        "revenueAtRiskLow": 16439, "revenueAtRiskLowText": "164.39",
        "revenueAtRiskHigh": 34610, "revenueAtRiskHighText": "346.10", "currency": "EUR"}
