"""Which errors, and which pages with rage and dead clicks, cost orders: the revenue at risk.

For a date range, every session that started in it goes through the shop funnel
(documents/funnels.py). A session *hit* by an error (or by a rage or dead click on a page)
is compared with the sessions of the site that were not hit and reached the same funnel
stage (none, product view, add to cart, checkout) as the hit session had reached when it was
hit; each stage is one 2x2 table (hit or not, converted or not):

* affected conversion a = x / n, the hit sessions that went on to a paid order, of the n hit
  sessions; a session that had paid before it was hit is not at risk and is left out, and so
  is one whose stage no session without the hit reached;
* baseline conversion b = sum over stages s of n_s * p_s / n, where p_s is the conversion of
  the sessions not hit that reached stage s;
* the p-value is the exact conditional test of a common odds ratio across the stages' tables
  (exact Mantel-Haenszel, one-sided: a loss): given every table's margins, the hit sessions'
  conversions x follow the convolution of the stages' hypergeometric distributions when being
  hit changes nothing, and p = P(X <= x);
* a range's errors are one family of tests, its pages another: the p-values of those with at
  least MIN_AFFECTED sessions hit are adjusted together (Benjamini-Hochberg), and a drop is
  significant when its adjusted p-value is at most FALSE_DISCOVERY_RATE;
* only then is there a figure: revenue at risk = (b - a) * n * average order value (the
  range's paid orders in the reporting currency, net of refunds), with a 90 % interval: the
  exact (Clopper-Pearson) intervals of a and of each stage's p_s, combined by recovering
  their variance estimates (Newcombe; Zou and Donner). Otherwise the answer is "not enough
  data", never a figure.

The method, its assumptions and its references: decision "Issue 39" in docs/decisions.md; its
error rate and power, measured by simulation: docs/performance.md. Computed when asked from
raw facts (visits, commerce steps, error occurrences, interactions), restricted visitors left
out, so erasure and restriction are exact (decision "Issue 31").
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np
from scipy.stats import binomtest, false_discovery_control, hypergeom

from documents import commerce, error_records, funnels, interactions, visits
from documents.store import Store
from documents.visitors import restricted_visitor_ids

#: Fewer sessions hit give no figure and are not tested: the exact test could only call a
#: total loss among them, and the interval of a figure from so few would span most of it.
MIN_AFFECTED = 30
#: The false discovery rate held over each family: at most 1 % of the drops called
#: significant, on average, are chance.
FALSE_DISCOVERY_RATE = 0.01
#: The confidence of the interval given with a figure.
INTERVAL = 0.90
#: A stage's hypergeometric probabilities below this are left out of the convolution: a p-value
#: loses less than 1e-25 even over supports of thousands, and a long support convolves fast.
NEGLIGIBLE = 1e-30
#: The shop funnel's steps before the order: the stages a session can have reached.
STAGES = 3
RULE = ("Revenue at risk compares the sessions hit with the sessions not hit that reached the "
        "same shop funnel stage (none, product view, cart, checkout). It is shown only when at "
        f"least {MIN_AFFECTED} sessions were hit and an exact test stratified by stage (exact "
        "Mantel-Haenszel, one-sided) finds their conversion lower at a false discovery rate of "
        f"{FALSE_DISCOVERY_RATE * 100:g} % over all the errors (or all the pages) of the range "
        f"(Benjamini-Hochberg: adjusted p-value at most {FALSE_DISCOVERY_RATE:g}). It is then "
        "(baseline conversion - conversion of the sessions hit) x sessions hit x average order "
        f"value, with a {INTERVAL * 100:g} % interval combining the exact (Clopper-Pearson) "
        "intervals of both conversions (Newcombe). A correlation, not a proof of cause. "
        "Otherwise: not enough data. References: Mantel and Haenszel 1959; Benjamini and "
        "Hochberg 1995; Clopper and Pearson 1934; Newcombe 1998.")

Key = tuple[str, str]
Name = TypeVar("Name")


@dataclass(frozen=True)
class Funnelled:
    """The range's sessions through the shop funnel, and what an order is worth."""

    paths: dict[Key, funnels.SessionPath]
    currency: str | None
    #: Average net order value in minor units of `currency`; None without paid orders.
    order_value: Fraction | None


@dataclass(frozen=True)
class Stratum:
    """One funnel stage's 2x2 table: the sessions hit at it, and those not hit that reached
    it, each with how many went on to a paid order."""

    hit: int
    hit_converted: int
    comparable: int
    comparable_converted: int


@dataclass(frozen=True)
class Measure:
    """What the stages' tables say about the sessions hit, before any figure."""

    sessions: int
    converted: int
    affected: Fraction
    baseline: Fraction
    p_value: float
    tables: tuple[Stratum, ...]


def _paid_at(path: funnels.SessionPath) -> datetime | None:
    return next((at for kind, at in path.commerce if kind == commerce.PAID), None)


def _stage(path: funnels.SessionPath, until: datetime | None = None) -> int:
    """How many of the shop funnel's steps before the order the session had reached."""
    return sum(1 for at in path.reached[:STAGES] if until is None or at <= until)


@dataclass(frozen=True)
class _Read:
    """What revenue at risk reads of a range on the event loop: its sessions, and what an
    order is worth (the rest is CPU work, done through the caller's offload)."""

    sessions: funnels.RangeSessions
    currency: str | None
    order_value: Fraction | None

    def funnelled(self, page_matches: funnels.PageMatch, check: funnels.Checkpoint
                  ) -> Funnelled:
        """Every session of the range through the shop funnel (CPU only)."""
        paths = funnels.paths_through(funnels.shop_funnel(), self.sessions,
                                      page_matches=page_matches, check=check)
        return Funnelled({(path.visitor_id, path.session_id): path for path in paths
                          if path.session_id}, self.currency, self.order_value)


async def _read(store: Store, site: dict[str, Any], first: date, last: date) -> _Read:
    """The range's sessions, restricted visitors left out, and the average order value."""
    sessions = await funnels.read_sessions(store, site["_id"], first, last)
    start, end = funnels.day_bounds(first, last)
    currency, _ = await commerce.reporting_currency(store, site["_id"], site.get("settings"))
    nets = [order["net"] for order in await commerce.paid_orders(store, site["_id"], start, end)
            if order["counted"] and order["currency"] == currency]
    return _Read(sessions, currency, Fraction(sum(nets), len(nets)) if nets else None)


def strata(hits: dict[Key, datetime], sessions: Funnelled) -> list[Stratum]:
    """The stages' tables for the sessions `hits` names (each with its first hit)."""
    hit: dict[int, list[bool]] = defaultdict(list)
    for key, at in hits.items():
        path = sessions.paths.get(key)
        if path is None:
            continue
        paid = _paid_at(path)
        if paid is not None and paid <= at:
            continue
        hit[_stage(path, at)].append(paid is not None)
    reached: dict[int, list[bool]] = defaultdict(list)
    for key, path in sessions.paths.items():
        if key in hits:
            continue
        converted = _paid_at(path) is not None
        for stage in range(_stage(path) + 1):
            reached[stage].append(converted)
    return [Stratum(len(hit[stage]), sum(hit[stage]), len(reached[stage]), sum(reached[stage]))
            for stage in sorted(hit) if reached.get(stage)]


def loss_p_value(tables: Sequence[Stratum]) -> float:
    """The exact one-sided p-value that the sessions hit convert less than those not hit at
    the same stages: P(X <= converted | every table's margins) under no effect."""
    # Each stage's count of hit sessions that converted is hypergeometric given its margins;
    # their sum's distribution is the convolution. logpmf rather than pmf: the same figures to
    # 1e-10, a hundred times faster over a support of thousands.
    null, offset = np.ones(1), 0
    for table in tables:
        total = table.hit + table.comparable
        converted = table.hit_converted + table.comparable_converted
        low = max(0, table.hit - (total - converted))
        pmf = np.exp(hypergeom.logpmf(np.arange(low, min(table.hit, converted) + 1), total,
                                      converted, table.hit))
        kept = np.flatnonzero(pmf >= NEGLIGIBLE)
        null = np.convolve(null, pmf[kept[0]:kept[-1] + 1])
        offset += low + int(kept[0])
    observed = sum(table.hit_converted for table in tables)
    return float(min(1.0, null[:max(0, observed - offset + 1)].sum()))


def measure(tables: Sequence[Stratum]) -> Measure | None:
    """The conversions and p-value of the stages' tables; None when no session was hit."""
    n = sum(table.hit for table in tables)
    if not n:
        return None
    # Exact fractions: the figure is money, and equal inputs must give equal cents.
    x = sum(table.hit_converted for table in tables)
    baseline = sum((Fraction(table.hit * table.comparable_converted, table.comparable)
                    for table in tables), Fraction(0)) / n
    return Measure(n, x, Fraction(x, n), baseline, loss_p_value(tables), tuple(tables))


def _exact_interval(successes: int, trials: int) -> tuple[float, float]:
    found = binomtest(successes, trials).proportion_ci(INTERVAL)
    return found.low, found.high


def loss_interval(found: Measure) -> tuple[float, float]:
    """The INTERVAL (90 %) interval of b - a: the exact (Clopper-Pearson) intervals of a and of
    each stage's p_s, combined by recovering their variance estimates (Newcombe's hybrid
    interval; Zou and Donner for b, a weighted sum of the p_s)."""
    a = float(found.affected)
    a_low, a_high = _exact_interval(found.converted, found.sessions)
    below = above = 0.0
    for table in found.tables:
        weight = table.hit / found.sessions
        p = table.comparable_converted / table.comparable
        low, high = _exact_interval(table.comparable_converted, table.comparable)
        below += (weight * (p - low)) ** 2
        above += (weight * (high - p)) ** 2
    difference = float(found.baseline) - a
    return (difference - math.sqrt(below + (a_high - a) ** 2),
            difference + math.sqrt(above + (a - a_low) ** 2))


def _minor_units(amount: Fraction) -> int:
    return int((Decimal(amount.numerator) / Decimal(amount.denominator)).quantize(
        Decimal(1), ROUND_HALF_UP))


def _significant_figures(value: float) -> float:
    return float(f"{value:.4g}")


def judged(measures: Mapping[Name, Measure | None], order_value: Fraction | None,
           currency: str | None) -> dict[Name, dict[str, Any]]:
    """Each measure's answer, its p-value adjusted over all of them (one family of tests)."""
    tested = {name: found for name, found in measures.items()
              if found is not None and found.sessions >= MIN_AFFECTED}
    adjusted = dict(zip(tested, false_discovery_control(
        [found.p_value for found in tested.values()], method="bh"), strict=True)) \
        if tested else {}
    answers: dict[Name, dict[str, Any]] = {}
    for name, found in measures.items():
        answer: dict[str, Any] = {
            "affectedSessions": 0, "affectedConversion": None, "baselineConversion": None,
            "pValue": None, "adjustedPValue": None, "status": "notEnoughData",
            "revenueAtRisk": None, "revenueAtRiskText": None, "revenueAtRiskLow": None,
            "revenueAtRiskLowText": None, "revenueAtRiskHigh": None,
            "revenueAtRiskHighText": None, "currency": currency}
        answers[name] = answer
        if found is None:
            continue
        answer.update(affectedSessions=found.sessions,
                      affectedConversion=round(float(found.affected), 4),
                      baselineConversion=round(float(found.baseline), 4),
                      pValue=_significant_figures(found.p_value))
        if name not in adjusted:
            continue
        answer["adjustedPValue"] = _significant_figures(float(adjusted[name]))
        if adjusted[name] > FALSE_DISCOVERY_RATE or order_value is None or not currency:
            continue
        worth = found.sessions * order_value
        low, high = loss_interval(found)
        # Never below nothing: a figure is only given for a drop the test found.
        figures = {"revenueAtRisk": _minor_units((found.baseline - found.affected) * worth),
                   "revenueAtRiskLow": max(0, _minor_units(Fraction(low) * worth)),
                   "revenueAtRiskHigh": _minor_units(Fraction(high) * worth)}
        answer.update(status="significant", **figures,
                      **{f"{field}Text": commerce.decimal_text(amount, currency)
                         for field, amount in figures.items()})
    return answers


def _impacts(hits: dict[Name, dict[Key, datetime]], sessions: Funnelled
             ) -> dict[Name, dict[str, Any]]:
    return judged({name: measure(strata(hit, sessions)) for name, hit in hits.items()},
                  sessions.order_value, sessions.currency)


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
                        page_matches: funnels.PageMatch, offload: funnels.Offload
                        ) -> dict[str, dict[str, Any]]:
    """Each error that hit a session of the range: its impact, by error id, the range's
    errors adjusted as one family. Read here, worked out through `offload` (a report thread
    with a time limit)."""
    read = await _read(store, site, first, last)
    start, end = funnels.day_bounds(first, last)
    hits = _first_hits(await error_records.session_hits(
        store, site["_id"], start, end + funnels.LATE_STEPS,
        hidden=await restricted_visitor_ids(store, site["_id"])))
    return await offload(lambda check: _impacts(hits, read.funnelled(page_matches, check)))


async def page_impacts(store: Store, site: dict[str, Any], first: date, last: date,
                       page_matches: funnels.PageMatch, offload: funnels.Offload
                       ) -> list[dict[str, Any]]:
    """The pages with rage or dead clicks in the range's sessions, each with its impact (the
    range's pages adjusted as one family): significant revenue at risk first, largest first,
    then by sessions hit. Read here, worked out through `offload`."""
    read = await _read(store, site, first, last)
    start, end = funnels.day_bounds(first, last)
    hits = _first_hits([(visits.page_path(url), visitor_id, session_id, at)
                        async for visitor_id, session_id, url, at in
                        interactions.frustrated_clicks(
                            store, site["_id"], start, end + funnels.LATE_STEPS,
                            hidden=await restricted_visitor_ids(store, site["_id"]))])
    impacts = await offload(lambda check: _impacts(hits, read.funnelled(page_matches, check)))
    return sort_by_risk([{"page": page, **impact} for page, impact in impacts.items()], "page")


def sort_by_risk(rows: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """Significant revenue at risk first, largest first; then by sessions hit."""
    return sorted(rows, key=lambda row: (-(row["revenueAtRisk"] or -1),
                                         -row["affectedSessions"], str(row[name])))
