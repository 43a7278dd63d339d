"""Which errors, and which pages with rage and dead clicks, cost orders: the revenue at risk.

For a date range, every session that started in it is counted by the shop funnel stage it
reached (none, product view, add to cart, checkout) and whether it went on to a paid order;
each session hit by an error (or by a rage or dead click on a page) is counted by the stage it
had reached when first hit, too. The fold keeps these counts per day (derived/journeys.py),
so a report reads a few documents per error and day, whatever the number of sessions. A
session hit is compared with the sessions of the site that were not hit and reached the same
stage as the hit session had when it was hit; each stage is one 2x2 table (hit or not,
converted or not):

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
  range's paid orders in the reporting currency, net of refunds, from the daily figures), with
  a 90 % interval: the exact (Clopper-Pearson) intervals of a and of each stage's p_s, combined
  by recovering their variance estimates (Newcombe; Zou and Donner). Otherwise the answer is
  "not enough data", never a figure.

The method, its assumptions and its references: decision "Issue 39" in docs/decisions.md; its
error rate and power, measured by simulation: docs/performance.md. Restricted visitors are
left out of the counts and erasure takes a visitor's sessions out of them, as it does of
every daily figure (decision "Issue 39: reports read folded journeys").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np
from scipy.stats import beta, false_discovery_control, hypergeom

from derived import daily_figures, funnel_reports, journeys
from derived.journeys import Stratum
from documents import commerce
from documents.store import Store

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

#: The method in one sentence, for the error's page.
METHOD = ("Compared with the sessions not hit that reached the same shop step, by an exact test "
          f"per step (Mantel-Haenszel) at a {FALSE_DISCOVERY_RATE * 100:g} % false discovery "
          "rate over the range's errors; a correlation, not a proof of cause.")

Name = TypeVar("Name")


def no_impact(currency: str | None) -> dict[str, Any]:
    """The answer for what hit no session of the range, or too few to test."""
    return {"affectedSessions": 0, "affectedConversion": None, "baselineConversion": None,
            "pValue": None, "adjustedPValue": None, "status": "notEnoughData",
            "revenueAtRisk": None, "revenueAtRiskText": None, "revenueAtRiskLow": None,
            "revenueAtRiskLowText": None, "revenueAtRiskHigh": None,
            "revenueAtRiskHighText": None, "currency": currency}


@dataclass(frozen=True)
class Measure:
    """What the stages' tables say about the sessions hit, before any figure."""

    sessions: int
    converted: int
    affected: Fraction
    baseline: Fraction
    p_value: float
    tables: tuple[Stratum, ...]


def loss_p_value(tables: Sequence[Stratum]) -> float:
    """The exact one-sided p-value that the sessions hit convert less than those not hit at
    the same stages: P(X <= converted | every table's margins) under no effect."""
    # Each stage's count of hit sessions that converted is hypergeometric given its margins;
    # their sum's distribution is the convolution. logpmf rather than pmf: the same figures to
    # 1e-10, a hundred times faster over a support of thousands.
    # Every stage's support in one call: scipy's cost is mostly per call, not per point.
    lows, supports = [], []
    for table in tables:
        total = table.hit + table.comparable
        converted = table.hit_converted + table.comparable_converted
        lows.append(max(0, table.hit - (total - converted)))
        supports.append((np.arange(lows[-1], min(table.hit, converted) + 1), total, converted,
                         table.hit))
    sizes = [len(points) for points, *_ in supports]
    pmfs = np.split(np.exp(hypergeom.logpmf(
        np.concatenate([points for points, *_ in supports]),
        *(np.repeat([margins[at] for _, *margins in supports], sizes) for at in range(3)))),
        np.cumsum(sizes)[:-1])
    null, offset = np.ones(1), 0
    for pmf, low in zip(pmfs, lows, strict=True):
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


def exact_intervals(successes: Sequence[int], trials: Sequence[int]
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The INTERVAL exact (Clopper-Pearson) intervals of the proportions successes/trials, all
    at once: the beta quantiles that bound them (binomtest's `proportion_ci` finds the same
    bounds one at a time by root-finding, a hundred times slower)."""
    x, n = np.asarray(successes, dtype=float), np.asarray(trials, dtype=float)
    tail = (1 - INTERVAL) / 2
    with np.errstate(invalid="ignore"):
        low = np.where(x > 0, beta.ppf(tail, x, n - x + 1), 0.0)
        high = np.where(x < n, beta.ppf(1 - tail, x + 1, n - x), 1.0)
    return low, high


def loss_interval(found: Measure) -> tuple[float, float]:
    """The INTERVAL (90 %) interval of b - a: the exact (Clopper-Pearson) intervals of a and of
    each stage's p_s, combined by recovering their variance estimates (Newcombe's hybrid
    interval; Zou and Donner for b, a weighted sum of the p_s)."""
    return loss_intervals([found])[0]


def loss_intervals(found: Sequence[Measure]) -> list[tuple[float, float]]:
    """`loss_interval` of each, their exact intervals worked out in one call."""
    successes: list[int] = []
    trials: list[int] = []
    for one in found:
        successes += [one.converted, *(table.comparable_converted for table in one.tables)]
        trials += [one.sessions, *(table.comparable for table in one.tables)]
    lows, highs = exact_intervals(successes, trials)
    intervals, at = [], 0
    for one in found:
        a = float(one.affected)
        a_low, a_high = float(lows[at]), float(highs[at])
        below = above = 0.0
        for offset, table in enumerate(one.tables, start=at + 1):
            weight = table.hit / one.sessions
            p = table.comparable_converted / table.comparable
            below += (weight * (p - float(lows[offset]))) ** 2
            above += (weight * (float(highs[offset]) - p)) ** 2
        at += 1 + len(one.tables)
        difference = float(one.baseline) - a
        intervals.append((difference - math.sqrt(below + (a_high - a) ** 2),
                          difference + math.sqrt(above + (a - a_low) ** 2)))
    return intervals


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
    significant = [name for name in adjusted if adjusted[name] <= FALSE_DISCOVERY_RATE]
    intervals = dict(zip(significant, loss_intervals([tested[name] for name in significant]),
                         strict=True))
    for name, found in measures.items():
        answer = no_impact(currency)
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
        low, high = intervals[name]
        # Never below nothing: a figure is only given for a drop the test found.
        figures = {"revenueAtRisk": _minor_units((found.baseline - found.affected) * worth),
                   "revenueAtRiskLow": max(0, _minor_units(Fraction(low) * worth)),
                   "revenueAtRiskHigh": _minor_units(Fraction(high) * worth)}
        answer.update(status="significant", **figures,
                      **{f"{field}Text": commerce.decimal_text(amount, currency)
                         for field, amount in figures.items()})
    return answers


@dataclass(frozen=True)
class _Read:
    """What revenue at risk reads of a range: the stage tables of each error (or page) hit,
    and what an order is worth in the reporting currency."""

    tables: dict[str, list[Stratum]]
    currency: str | None
    #: Average net order value in minor units of `currency`; None without paid orders.
    order_value: Fraction | None

    def impacts(self, check: funnel_reports.Checkpoint) -> dict[str, dict[str, Any]]:
        """Each one's measure and answer, adjusted as one family (CPU only)."""
        measures = {}
        for name, tables in self.tables.items():
            check()
            measures[name] = measure(tables)
        return judged(measures, self.order_value, self.currency)


async def _read(store: Store, site: dict[str, Any], first: date, last: date, hits: str
                ) -> _Read:
    """The range's outcome counts (`hits`: journeys.ERROR_HIT or PAGE_HIT) as stage tables,
    and the average order value from the range's daily figures."""
    counts = await daily_figures.session_figures(store, site["_id"], first, last,
                                                 dimensions=(journeys.STAGE, hits))
    tables = journeys.strata_by_name(counts[journeys.STAGE].items(), counts[hits].items())
    currency, _ = commerce.reporting_currency(site)
    days = daily_figures.period(await daily_figures.site_days(store, site["_id"], first, last),
                                first, last)
    orders = days.orders.get(currency or "", 0)
    value = Fraction(days.revenue.get(currency or "", 0), orders) if orders > 0 else None
    return _Read(tables, currency, value)


async def error_impacts(store: Store, site: dict[str, Any], first: date, last: date,
                        offload: funnel_reports.Offload) -> dict[str, dict[str, Any]]:
    """Each error that hit a session of the range: its impact, by error id, the range's
    errors adjusted as one family. Read here, worked out through `offload` (a report thread
    with a time limit)."""
    read = await _read(store, site, first, last, journeys.ERROR_HIT)
    return await offload(read.impacts)


async def page_impacts(store: Store, site: dict[str, Any], first: date, last: date,
                       offload: funnel_reports.Offload) -> list[dict[str, Any]]:
    """The pages with rage or dead clicks in the range's sessions, each with its impact (the
    range's pages adjusted as one family): significant revenue at risk first, largest first,
    then by sessions hit. Read here, worked out through `offload`."""
    read = await _read(store, site, first, last, journeys.PAGE_HIT)
    impacts = await offload(read.impacts)
    return sort_by_risk([{"page": page, **impact} for page, impact in impacts.items()], "page")


def sort_by_risk(rows: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """Significant revenue at risk first, largest first; then by sessions hit."""
    return sorted(rows, key=lambda row: (-(row["revenueAtRisk"] or -1),
                                         -row["affectedSessions"], str(row[name])))
