"""What each kind of alert rule reads and tests: one table of kinds, each with its parameters,
its read of the figures and the statistical test that decides whether it fires.

A kind answers a `Verdict`: whether there was enough data to judge at all, and the subjects it
fires about (the rule itself, an error, a lead), each with a title and its figures. Verdicts
carry figures and links, never a visitor's personal data. The tests (decision "Issue 42:
alerts" in docs/decisions.md states them with their assumptions):

* error spike: the last hour's occurrences of an error x against the same clock hour of the
  SPIKE_DAYS days before (B in all); when the error's rate did not change, x given x + B is
  binomial with p = 1 / (SPIKE_DAYS + 1), so the exact conditional test of two Poisson rates is
  `scipy.stats.binomtest(x, x + B, p, alternative="greater")`, fired at SPIKE_ALPHA with at
  least SPIKE_MIN_OCCURRENCES in the hour;
* conversion falling: today's sessions and paid conversions (the site's day, so far) against
  the same weekday of the CONVERSION_WEEKS weeks before, by Fisher's exact test, one-sided
  (`scipy.stats.fisher_exact`, alternative "less"), fired at CONVERSION_ALPHA when the
  conversion also fell by the rule's percentage, never under CONVERSION_MIN_SESSIONS today or
  CONVERSION_MIN_BASELINE_ORDERS in the baseline;
* order silence: the paid orders of the SILENCE_DAYS days before give the shop's usual orders
  per clock hour in its time zone; the expected orders Λ over the time since the last one,
  and P(no order) = `scipy.stats.poisson.pmf(0, Λ)` under a Poisson process; fired at
  SILENCE_ALPHA, only for shops with SILENCE_MIN_ORDERS orders in those days.

The other kinds are thresholds the owner sets (sessions with an error on checkout or cart
pages in the last hour, a survey answer under a score), an event (a lead), a figure already
tested elsewhere (an error's revenue at risk, derived/conversion_impact.py) or the purge's own
clock (documents/retention.py).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from scipy.stats import binomtest, fisher_exact, poisson

from derived import conversion_impact, daily_figures, journeys
from documents import commerce, engagement, error_records, leads, retention, sites
from documents.store import Store
from errors import InvalidInput

#: The error spike's baseline: the same clock hour of this many days before.
SPIKE_DAYS = 7
#: The spike test's false alarm rate per error and evaluation.
SPIKE_ALPHA = 0.001
#: Fewer occurrences in the hour are never a spike, whatever the baseline.
SPIKE_MIN_OCCURRENCES = 10
#: Conversion's baseline: the same weekday of this many weeks before.
CONVERSION_WEEKS = 4
CONVERSION_ALPHA = 0.01
CONVERSION_MIN_SESSIONS = 200
CONVERSION_MIN_BASELINE_ORDERS = 20
DEFAULT_DROP_PERCENT = 20
#: Order silence learns the shop's usual orders per clock hour over this many days.
SILENCE_DAYS = 28
SILENCE_ALPHA = 0.001
SILENCE_MIN_ORDERS = 100
#: How far back the event kinds (a lead, a survey answer) look on each pass; each event fires
#: once (its episode is keyed by its id), so the window only has to outlast a stopped worker.
EVENT_WINDOW = timedelta(days=1)
EVENTS_PER_PASS = 50
#: The revenue at risk rule's range: the site's last seven days, today included.
RISK_DAYS = 7
CHECKOUT_PAGES = ("/checkout", "/cart")

#: How CPU-heavy work (revenue at risk's exact tests) leaves the event loop.
Offload = Callable[[Callable[[Callable[[], None]], Any]], Awaitable[Any]]


async def in_thread(work: Callable[[Callable[[], None]], Any]) -> Any:
    """Run `work` in a thread without a time limit (the evaluator's offload)."""
    return await asyncio.to_thread(work, lambda: None)


@dataclass(frozen=True)
class Finding:
    """One subject a rule fires about: what to say, the figures behind it, where to look."""

    subject: str
    title: str
    figures: dict[str, Any]
    #: The dashboard page that shows it, under /app/sites/{site}/.
    page: str


@dataclass(frozen=True)
class Verdict:
    """A kind's answer: judged (enough data to say), and what it fires about."""

    judged: bool
    findings: list[Finding] = field(default_factory=list)
    #: What the Alerts page shows of this evaluation.
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Situation:
    """What an evaluation knows besides the rule: the store, the site and the moment."""

    store: Store
    site: dict[str, Any]
    now: datetime
    offload: Offload = in_thread
    purge_interval_seconds: float = 3600.0


Evaluate = Callable[[Situation, dict[str, Any]], Awaitable[Verdict]]
CheckParams = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Kind:
    """A kind of rule: its parameters, its evaluation and how its episodes behave."""

    name: str
    label: str
    evaluate: Evaluate
    check_params: CheckParams
    #: Each subject fires once ever (an event), else again after a resolution and cool-down.
    once: bool = False


# The tests, apart from their reads so a simulation can run them -------------------------------


def spike_p_value(last_hour: int, baseline: int, days: int = SPIKE_DAYS) -> float:
    """P(at least `last_hour` of the hour's and the baseline's occurrences fall in the last
    hour) when the rate did not change: the exact conditional test of two Poisson rates."""
    if last_hour == 0:
        return 1.0
    return float(binomtest(last_hour, last_hour + baseline, 1 / (days + 1),
                           alternative="greater").pvalue)


def spike_fires(last_hour: int, baseline: int, days: int = SPIKE_DAYS) -> bool:
    """The spike rule's decision for one error."""
    return last_hour >= SPIKE_MIN_OCCURRENCES and spike_p_value(
        last_hour, baseline, days) <= SPIKE_ALPHA


def conversion_falls(converted: int, sessions: int, base_converted: int, base_sessions: int,
                     drop_percent: float = DEFAULT_DROP_PERCENT) -> bool | None:
    """The conversion rule's decision; None when there is too little data to judge."""
    if sessions < CONVERSION_MIN_SESSIONS or base_converted < CONVERSION_MIN_BASELINE_ORDERS:
        return None
    rate, base_rate = converted / sessions, base_converted / base_sessions
    if rate > base_rate * (1 - drop_percent / 100):
        return False
    table = [[converted, sessions - converted], [base_converted, base_sessions - base_converted]]
    return float(fisher_exact(table, alternative="less").pvalue) <= CONVERSION_ALPHA


def silence_probability(expected_orders: float) -> float:
    """P(no paid order) over a time when `expected_orders` were usual (Poisson)."""
    return float(poisson.pmf(0, expected_orders))


# Parameters ---------------------------------------------------------------------------------


def _no_params(params: dict[str, Any]) -> dict[str, Any]:
    return {}


def _checkout_params(params: dict[str, Any]) -> dict[str, Any]:
    pages = params.get("pages") or list(CHECKOUT_PAGES)
    if not all(isinstance(page, str) and page.startswith("/") for page in pages):
        raise InvalidInput("a page is a path starting with /", field="params.pages")
    return {"sessions": int(params.get("sessions", 5)), "pages": pages[:10]}


def _conversion_params(params: dict[str, Any]) -> dict[str, Any]:
    return {"dropPercent": int(params.get("dropPercent", DEFAULT_DROP_PERCENT))}


def _survey_params(params: dict[str, Any]) -> dict[str, Any]:
    if "below" not in params:
        raise InvalidInput("a survey rule needs the score under which it fires",
                           field="params.below")
    return {"below": int(params["below"]), "surveyId": params.get("surveyId")}


# Reads and evaluations ----------------------------------------------------------------------


async def _revenue_at_risk(situation: Situation, params: dict[str, Any]) -> Verdict:
    last = sites.day_clock(situation.site).today(situation.now)
    first = last - timedelta(days=RISK_DAYS - 1)
    impacts = await conversion_impact.error_impacts(situation.store, situation.site, first,
                                                    last, situation.offload)
    findings = [
        Finding(error_id, f"An error puts {impact['revenueAtRiskText']} at risk "
                          f"(90 % interval {impact['revenueAtRiskLowText']} to "
                          f"{impact['revenueAtRiskHighText']}) over the last {RISK_DAYS} days",
                {key: impact[key] for key in (
                    "revenueAtRisk", "revenueAtRiskLow", "revenueAtRiskHigh", "currency",
                    "affectedSessions", "affectedConversion", "baselineConversion",
                    "adjustedPValue")} | {"errorId": error_id},
                f"errors/{error_id}")
        for error_id, impact in sorted(impacts.items()) if impact["status"] == "significant"]
    return Verdict(True, findings, {"errorsAtRisk": len(findings)})


async def _checkout_errors(situation: Situation, params: dict[str, Any]) -> Verdict:
    sessions = await error_records.sessions_with_errors_on_pages(
        situation.store, situation.site["_id"], params["pages"],
        situation.now - timedelta(hours=1), situation.now)
    figures = {"sessions": sessions, "threshold": params["sessions"]}
    if sessions < params["sessions"]:
        return Verdict(True, [], figures)
    return Verdict(True, [Finding(
        "rule", f"{sessions} sessions hit an error on checkout or cart pages in the last hour "
                f"(threshold {params['sessions']})", figures, "errors")], figures)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


async def _error_spike(situation: Situation, params: dict[str, Any]) -> Verdict:
    site, now = situation.site, situation.now
    # The baseline is only a baseline once the site has had all its days.
    if _aware(site.get("createdAt") or now) > now - timedelta(days=SPIKE_DAYS, hours=1):
        return Verdict(False, [], {"reason": "the site is younger than its baseline"})
    hour = timedelta(hours=1)
    last_hour = await error_records.occurrences_by_error(situation.store, site["_id"],
                                                         now - hour, now)
    baseline: Counter[str] = Counter()
    if any(count >= SPIKE_MIN_OCCURRENCES for count in last_hour.values()):
        for days in range(1, SPIKE_DAYS + 1):
            end = now - timedelta(days=days)
            baseline.update(await error_records.occurrences_by_error(
                situation.store, site["_id"], end - hour, end))
    findings = [
        Finding(error_id, f"An error happened {count} times in the last hour; the same hour "
                          f"of the {SPIKE_DAYS} days before had {baseline[error_id]} in all",
                {"errorId": error_id, "lastHour": count, "baseline": baseline[error_id],
                 "baselineDays": SPIKE_DAYS,
                 "pValue": spike_p_value(count, baseline[error_id])},
                f"errors/{error_id}")
        for error_id, count in sorted(last_hour.items())
        if spike_fires(count, baseline[error_id])]
    return Verdict(True, findings, {"errorsInLastHour": sum(last_hour.values()),
                                    "spikes": len(findings)})


def _conversion(counts: Counter[str]) -> tuple[int, int]:
    """Paid sessions and sessions of a day's `stage` counts."""
    return (sum(count for value, count in counts.items() if value.endswith("1")),
            sum(counts.values()))


async def _conversion_drop(situation: Situation, params: dict[str, Any]) -> Verdict:
    site_id, today = situation.site["_id"], sites.day_clock(situation.site).today(situation.now)
    before = [today - timedelta(weeks=weeks) for weeks in range(1, CONVERSION_WEEKS + 1)]
    days = await daily_figures.session_figures_by_day(situation.store, site_id,
                                                      [today, *before], journeys.STAGE)
    converted, sessions = _conversion(days[today])
    base_converted, base_sessions = _conversion(sum((days[day] for day in before), Counter()))
    figures = {"sessions": sessions, "converted": converted,
               "conversion": converted / sessions if sessions else None,
               "baselineSessions": base_sessions, "baselineConverted": base_converted,
               "baselineConversion": base_converted / base_sessions if base_sessions else None,
               "baselineWeeks": CONVERSION_WEEKS}
    falls = conversion_falls(converted, sessions, base_converted, base_sessions,
                             params["dropPercent"])
    if falls is None:
        return Verdict(False, [], figures)
    if not falls:
        return Verdict(True, [], figures)
    return Verdict(True, [Finding(
        "rule", f"Conversion today is {figures['conversion']:.1%} of {sessions} sessions, "
                f"against {figures['baselineConversion']:.1%} on the same weekday of the "
                f"{CONVERSION_WEEKS} weeks before", figures, "funnels")], figures)


def expected_orders(paid_at: list[datetime], since: datetime, now: datetime,
                    zone: Any, days: int = SILENCE_DAYS) -> float:
    """The orders the shop usually has between `since` and `now`: its orders per clock hour
    (in `zone`) over the `days` before, summed over the hours between, in part at both ends."""
    per_hour = Counter(moment.astimezone(zone).hour for moment in paid_at)
    expected = 0.0
    moment = since
    while moment < now:
        local = moment.astimezone(zone)
        hour_end = (local.replace(minute=0, second=0, microsecond=0)
                    + timedelta(hours=1)).astimezone(UTC)
        step_end = min(hour_end, now)
        expected += per_hour[local.hour] / days * (step_end - moment) / timedelta(hours=1)
        moment = step_end
    return expected


async def _order_silence(situation: Situation, params: dict[str, Any]) -> Verdict:
    site, now = situation.site, situation.now
    orders = await commerce.paid_orders(situation.store, site["_id"],
                                        now - timedelta(days=SILENCE_DAYS), now)
    paid_at = [_aware(order["paidAt"]) for order in orders if order.get("paidAt")]
    figures: dict[str, Any] = {"ordersInBaseline": len(paid_at), "baselineDays": SILENCE_DAYS}
    if len(paid_at) < SILENCE_MIN_ORDERS:
        return Verdict(False, [], figures)
    last = max(paid_at)
    expected = expected_orders(paid_at, last, now, sites.time_zone(site))
    minutes = int((now - last) / timedelta(minutes=1))
    figures |= {"minutesSinceLastOrder": minutes, "expectedOrders": round(expected, 2),
                "probability": silence_probability(expected)}
    if figures["probability"] > SILENCE_ALPHA:
        return Verdict(True, [], figures)
    return Verdict(True, [Finding(
        "rule", f"No paid order for {minutes} minutes; the shop usually has {expected:.1f} "
                "in that time (the shop may be broken)", figures, "orders")], figures)


async def _lead(situation: Situation, params: dict[str, Any]) -> Verdict:
    since = situation.now - EVENT_WINDOW
    found = await leads.recent_leads(situation.store, situation.site["_id"], since,
                                     EVENTS_PER_PASS, left_out=[])
    # The lead's id and when, never its name or address.
    return Verdict(True, [Finding(lead["_id"], "A new lead", {"leadId": lead["_id"]},
                                  f"leads/{lead['_id']}") for lead in found],
                   {"leadsInWindow": len(found)})


async def _survey_score(situation: Situation, params: dict[str, Any]) -> Verdict:
    query: dict[str, Any] = {"siteId": situation.site["_id"],
                             "answeredAt": {"$gte": situation.now - EVENT_WINDOW},
                             "answers.0.score": {"$lt": params["below"]}}
    if params.get("surveyId"):
        query["surveyId"] = params["surveyId"]
    answers = await engagement.survey_answers(situation.store, query).limit(
        EVENTS_PER_PASS).to_list(EVENTS_PER_PASS)
    return Verdict(True, [
        Finding(answer["_id"], f"A survey answer scored {answer['answers'][0]['score']} "
                               f"(under {params['below']})",
                {"surveyId": answer["surveyId"], "score": answer["answers"][0]["score"]},
                f"surveys/{answer['surveyId']}") for answer in answers],
        {"answersUnder": len(answers)})


async def _purge_overdue(situation: Situation, params: dict[str, Any]) -> Verdict:
    clock = await retention.purge_clock(
        situation.store, now=situation.now,
        after=retention.overdue_after(situation.purge_interval_seconds))
    figures = {"lastCompletedAt": clock.last_completed_at, "overdueSince": clock.overdue_since}
    if clock.overdue_since is None:
        return Verdict(True, [], figures)
    return Verdict(True, [Finding(
        "rule", "The retention purge has not finished a run since "
                f"{clock.overdue_since:%Y-%m-%d %H:%M} UTC: data past its retention is not "
                "being removed", figures, "privacy")], figures)


KINDS = {kind.name: kind for kind in (
    Kind("errorRevenueAtRisk", "An error newly significant for revenue at risk",
         _revenue_at_risk, _no_params),
    Kind("checkoutErrors", "Errors on checkout or cart pages", _checkout_errors,
         _checkout_params),
    Kind("errorSpike", "An error spike", _error_spike, _no_params),
    Kind("conversionDrop", "Conversion falling", _conversion_drop, _conversion_params),
    Kind("orderSilence", "No paid order for unusually long", _order_silence, _no_params),
    Kind("lead", "A new lead", _lead, _no_params, once=True),
    Kind("surveyScore", "A survey answer under a score", _survey_score, _survey_params,
         once=True),
    Kind("purgeOverdue", "The retention purge overdue", _purge_overdue, _no_params),
)}


def checked_params(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """A rule's parameters as its kind keeps them; InvalidInput for an unknown kind."""
    if kind not in KINDS:
        raise InvalidInput(f"an alert rule's kind is one of {', '.join(KINDS)}", field="kind")
    return KINDS[kind].check_params(params)
