"""Which errors, and which pages with rage and dead clicks, cost orders: the revenue at risk.

For a date range, every session that started in it goes through the shop funnel
(documents/funnels.py). A session *hit* by an error (or by a rage or dead click on a page)
is compared with the sessions of the site that were not hit and reached the same funnel
stage (none, product view, add to cart, checkout) as the hit session had reached when it was
hit, standardised by stage:

* affected conversion a = x / n, the hit sessions that went on to a paid order, of the n hit
  sessions; a session that had paid before it was hit is not at risk and is left out, and so
  is one whose stage no session without the hit reached;
* baseline conversion b = sum over stages s of n_s * p_s / n, where p_s is the conversion of
  the sessions not hit that reached stage s (m_s of them);
* the difference is significant when n >= MIN_AFFECTED and a one-sided two-proportion z-test
  says b > a at 99 % confidence: z = (b - a) / sqrt(a(1-a)/n + sum (n_s/n)^2 p_s(1-p_s)/m_s)
  >= Z_99 (with one stage, the unpooled two-proportion test);
* only then is there a figure: revenue at risk = (b - a) * n * average order value (the
  range's paid orders in the reporting currency, net of refunds). Otherwise the answer is
  "not enough data", never a figure.

Computed when asked from raw facts (visits, commerce steps, error occurrences, interactions),
restricted visitors left out, so erasure and restriction are exact (decision "Issue 31" in
docs/decisions.md).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from typing import Any

from documents import commerce, error_records, funnels, interactions, visits
from documents.store import Store
from documents.visitors import restricted_visitor_ids

MIN_AFFECTED = 30
#: The one-sided 99 % quantile of the standard normal distribution.
Z_99 = 2.3263478740408408
#: The shop funnel's steps before the order: the stages a session can have reached.
STAGES = 3
RULE = ("Revenue at risk compares the sessions hit with the sessions not hit that reached the "
        "same shop funnel stage (none, product view, cart, checkout). It is shown only when at "
        f"least {MIN_AFFECTED} sessions were hit and their conversion is lower with 99 % "
        "confidence (one-sided two-proportion z-test); it is then (baseline conversion - "
        "conversion of the sessions hit) x sessions hit x average order value. Otherwise: not "
        "enough data.")

Key = tuple[str, str]


@dataclass(frozen=True)
class Funnelled:
    """The range's sessions through the shop funnel, and what an order is worth."""

    paths: dict[Key, funnels.SessionPath]
    currency: str | None
    #: Average net order value in minor units of `currency`; None without paid orders.
    order_value: Fraction | None


def _paid_at(path: funnels.SessionPath) -> datetime | None:
    return next((at for kind, at in path.commerce if kind == commerce.PAID), None)


def _stage(path: funnels.SessionPath, until: datetime | None = None) -> int:
    """How many of the shop funnel's steps before the order the session had reached."""
    return sum(1 for at in path.reached[:STAGES] if until is None or at <= until)


async def funnelled(store: Store, site: dict[str, Any], first: date, last: date,
                    page_matches: funnels.PageMatch) -> Funnelled:
    """Every session of the range through the shop funnel, and the average order value."""
    paths = await funnels.session_paths(store, site["_id"], funnels.shop_funnel(), first, last,
                                        page_matches=page_matches)
    start, end = funnels.day_bounds(first, last)
    currency, _ = await commerce.reporting_currency(store, site["_id"], site.get("settings"))
    nets = [order["net"] for order in await commerce.paid_orders(store, site["_id"], start, end)
            if order["counted"] and order["currency"] == currency]
    return Funnelled({(path.visitor_id, path.session_id): path for path in paths
                      if path.session_id},
                     currency, Fraction(sum(nets), len(nets)) if nets else None)


def impact(hits: dict[Key, datetime], sessions: Funnelled) -> dict[str, Any]:
    """What being hit (`hits`: each session's first hit) did to the sessions' conversion."""
    groups: dict[int, list[bool]] = defaultdict(list)
    for key, at in hits.items():
        path = sessions.paths.get(key)
        if path is None:
            continue
        paid = _paid_at(path)
        if paid is not None and paid <= at:
            continue
        groups[_stage(path, at)].append(paid is not None)
    reached: dict[int, list[bool]] = defaultdict(list)
    for key, path in sessions.paths.items():
        if key in hits:
            continue
        converted = _paid_at(path) is not None
        for stage in range(_stage(path) + 1):
            reached[stage].append(converted)
    groups = {stage: hit for stage, hit in groups.items() if reached.get(stage)}
    n = sum(len(hit) for hit in groups.values())
    answer: dict[str, Any] = {"affectedSessions": n, "affectedConversion": None,
                              "baselineConversion": None, "z": None,
                              "status": "notEnoughData", "revenueAtRisk": None,
                              "revenueAtRiskText": None, "currency": sessions.currency}
    if not n:
        return answer
    # Exact fractions: the figure is money, and equal inputs must give equal cents.
    a = Fraction(sum(sum(hit) for hit in groups.values()), n)
    b = variance = Fraction(0)
    for stage, hit in groups.items():
        p = Fraction(sum(reached[stage]), len(reached[stage]))
        b += len(hit) * p / n
        variance += Fraction(len(hit), n) ** 2 * p * (1 - p) / len(reached[stage])
    variance += a * (1 - a) / n
    if variance > 0:
        z = float(b - a) / math.sqrt(variance)
    else:
        z = math.inf if b > a else 0.0
    answer.update(affectedConversion=round(float(a), 4), baselineConversion=round(float(b), 4),
                  z=round(z, 2) if math.isfinite(z) else None)
    if n >= MIN_AFFECTED and z >= Z_99 and sessions.order_value is not None \
            and sessions.currency:
        loss = (b - a) * n * sessions.order_value
        at_risk = int((Decimal(loss.numerator) / Decimal(loss.denominator)).quantize(
            Decimal(1), ROUND_HALF_UP))
        answer.update(status="significant", revenueAtRisk=at_risk,
                      revenueAtRiskText=commerce.decimal_text(at_risk, sessions.currency))
    return answer


def _first_hits(rows: Iterable[tuple[str, str | None, str | None, datetime]]
                ) -> dict[str, dict[Key, datetime]]:
    """(what, visitorId, sessionId, at) rows as each thing's sessions and first hit in each."""
    hits: dict[str, dict[Key, datetime]] = defaultdict(dict)
    for what, visitor_id, session_id, at in rows:
        if not visitor_id or not session_id:
            continue
        key = (visitor_id, session_id)
        seen = hits[what].get(key)
        hits[what][key] = at if seen is None or at < seen else seen
    return hits


async def error_impacts(store: Store, site: dict[str, Any], first: date, last: date,
                        page_matches: funnels.PageMatch) -> dict[str, dict[str, Any]]:
    """Each error that hit a session of the range: its impact, by error id."""
    sessions = await funnelled(store, site, first, last, page_matches)
    start, end = funnels.day_bounds(first, last)
    rows = await error_records.session_hits(
        store, site["_id"], start, end + funnels.LATE_STEPS,
        hidden=await restricted_visitor_ids(store, site["_id"]))
    return {error_id: impact(hit, sessions) for error_id, hit in _first_hits(rows).items()}


async def page_impacts(store: Store, site: dict[str, Any], first: date, last: date,
                       page_matches: funnels.PageMatch) -> list[dict[str, Any]]:
    """The pages with rage or dead clicks in the range's sessions, each with its impact:
    significant revenue at risk first, largest first, then by sessions hit."""
    sessions = await funnelled(store, site, first, last, page_matches)
    start, end = funnels.day_bounds(first, last)
    rows = [(visits.page_path(url), visitor_id, session_id, at)
            async for visitor_id, session_id, url, at in interactions.frustrated_clicks(
                store, site["_id"], start, end + funnels.LATE_STEPS,
                hidden=await restricted_visitor_ids(store, site["_id"]))]
    pages = [{"page": page, **impact(hit, sessions)}
             for page, hit in _first_hits(rows).items()]
    return sort_by_risk(pages, "page")


def sort_by_risk(rows: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """Significant revenue at risk first, largest first; then by sessions hit."""
    return sorted(rows, key=lambda row: (-(row["revenueAtRisk"] or -1),
                                         -row["affectedSessions"], str(row[name])))
