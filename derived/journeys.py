"""A session's journey: the shop steps, orders, errors and frustrated clicks folded into its
visit, and what it adds to the daily outcome counts that revenue at risk reads.

The fold (derived/derivation.py) attaches each folded record of those kinds to one visit
(derived/visits.py), as `journey` in the visit document:

* a record sent with a browser session goes to that session's visit; when that visit has no
  pageview folded yet, to a visit of no pageviews (`pageviews` 0) that the first pageview
  then fills, so the order in which facts are folded does not matter;
* one sent without (the plugin's events from the shop's server) goes to the visitor's visit
  that started last before it, if it came at most LATE after that visit's last pageview.

What a visit then adds to the counts is a function of the visit document alone
(`outcome_contributions`, part of `visits.contributions`): the fold, erasure, restriction, the
retention purge and a rebuild all count a visit's journey as they count its entry page, so the
counts stay exact under all of them (decision "Issue 39: reports read folded journeys").

The counts, per day a session started (`session_days`), are:

* `stage` `<reached><paid>`: sessions that reached 0 to 3 of the shop funnel's steps before
  the order (product view, add to cart, checkout), and whether they went on to a paid order;
* `errorHit` `<at hit><reached><paid><paid before>:<error id>`, and `pageHit` the same for a
  page with rage or dead clicks: the sessions hit, by the stage they had reached when first
  hit, the stage they reached in the end, whether they paid, and whether before the hit
  (kept in one document per error or page and day, by outcome: `split_hit`).

Revenue at risk's stratified tables come from these (derived/conversion_impact.py): reading
them costs a few documents per error and day, whatever the number of sessions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from documents.commerce import ADD_TO_CART, CHECKOUT_STARTED, PAID
from documents.funnels import PRODUCT_VIEW

#: A record sent without a browser session belongs to the visitor's last visit before it for
#: this long after that visit's last pageview (a payment confirmed after the visit).
LATE = timedelta(days=1)
#: The shop funnel's steps before the order, in order: the stages a session can reach.
STAGE_STEPS = (PRODUCT_VIEW, ADD_TO_CART, CHECKOUT_STARTED)
STAGES = len(STAGE_STEPS)
#: What a journey keeps per visit, the earliest first: enough for any session, bounded.
MAX_STEPS = 200
MAX_HITS = 100
STAGE, ERROR_HIT, PAGE_HIT = "stage", "errorHit", "pageHit"
#: A hit count is kept in one document per day and error (or page), its sessions counted by
#: outcome under HITS: so a range's hits cost a document per error and day, however many
#: sessions there were and however they ended.
HIT_DIMENSIONS = (ERROR_HIT, PAGE_HIT)
HITS = "hits"


def aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def empty() -> dict[str, Any]:
    """A journey with nothing in it yet."""
    return {"steps": [], "orders": [], "errors": [], "frustrated": []}


def of(visit: dict[str, Any] | None) -> dict[str, Any]:
    return {**empty(), **((visit or {}).get("journey") or {})}


def with_step(journey: dict[str, Any], kind: str, at: datetime) -> dict[str, Any]:
    """An add to cart or a checkout started, in time order."""
    steps = sorted([*journey["steps"], [kind, aware(at)]], key=lambda step: aware(step[1]))
    return {**journey, "steps": steps[:MAX_STEPS]}


def with_order_change(journey: dict[str, Any], order_id: str, record: dict[str, Any]
                      ) -> dict[str, Any]:
    """An order's figure change (documents/commerce.py `figure_change`): its paid count and
    net revenue summed per order; an order that no longer counts leaves the journey."""
    orders = {entry[0]: list(entry) for entry in journey["orders"]}
    entry = orders.setdefault(order_id, [order_id, aware(record["at"]), record["currency"], 0, 0])
    entry[3] += int(record["orders"])
    entry[4] += int(record["revenue"])
    if record["orders"] > 0:
        entry[1], entry[2] = aware(record["at"]), record["currency"]
    if entry[3] <= 0 and entry[4] <= 0:
        del orders[order_id]
    return {**journey, "orders": sorted(orders.values(), key=lambda e: (aware(e[1]), e[0]))}


def _with_first(listed: list[list[Any]], name: str, at: datetime) -> list[list[Any]]:
    firsts = {entry[0]: aware(entry[1]) for entry in listed}
    if name in firsts:
        firsts[name] = min(firsts[name], aware(at))
    elif len(firsts) < MAX_HITS:
        firsts[name] = aware(at)
    else:
        return listed
    return sorted([[key, moment] for key, moment in firsts.items()],
                  key=lambda entry: (entry[1], entry[0]))


def with_error(journey: dict[str, Any], error_id: str, at: datetime) -> dict[str, Any]:
    """An error's first occurrence in the session."""
    return {**journey, "errors": _with_first(journey["errors"], error_id, at)}


def with_frustration(journey: dict[str, Any], page: str, at: datetime) -> dict[str, Any]:
    """A page's first rage or dead click in the session."""
    return {**journey, "frustrated": _with_first(journey["frustrated"], page, at)}


# What a journey says --------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """Where a session went: the moments it reached the shop funnel's steps before the order
    (steps not skipped) and its first counted payment."""

    reached: tuple[datetime, ...]
    paid_at: datetime | None

    def stage(self, until: datetime | None = None) -> int:
        """How many of the steps before the order it had reached (by `until`)."""
        return sum(1 for at in self.reached if until is None or at <= until)


def paid_moments(visit: dict[str, Any]) -> list[datetime]:
    return [aware(entry[1]) for entry in of(visit)["orders"] if entry[3] > 0]


def step_moments(visit: dict[str, Any]) -> list[tuple[str, datetime]]:
    """The session's commerce steps (kind, at) in time order, counted payments as "paid"."""
    steps = [(kind, aware(at)) for kind, at in of(visit)["steps"]]
    steps += [(PAID, at) for at in paid_moments(visit)]
    return sorted(steps, key=lambda step: step[1])


def outcome(visit: dict[str, Any]) -> Outcome:
    pages = visit.get("pages") or []
    moments = {PRODUCT_VIEW: [aware(page["at"]) for page in pages if page.get("product")]}
    for kind, at in of(visit)["steps"]:
        moments.setdefault(kind, []).append(aware(at))
    reached: list[datetime] = []
    for step in STAGE_STEPS:
        after = reached[-1] if reached else None
        found = min((at for at in moments.get(step, []) if after is None or at >= after),
                    default=None)
        if found is None:
            break
        reached.append(found)
    paid = paid_moments(visit)
    return Outcome(tuple(reached), min(paid) if paid else None)


def _hit_value(found: Outcome, at: datetime, name: str) -> str:
    paid_before = found.paid_at is not None and found.paid_at <= aware(at)
    return (f"{found.stage(aware(at))}{found.stage()}{int(found.paid_at is not None)}"
            f"{int(paid_before)}:{name}")


def split_hit(value: str) -> tuple[str, str]:
    """A hit value's name (the error or page) and the field of the name's document its
    outcome is counted under; a letter first, so no store reads the field as an array index."""
    return value[5:], f"{HITS}.o{value[:4]}"


def joined_hit(outcome_key: str, name: str) -> str:
    """The hit value of a count kept under `outcome_key` (a key of HITS) of the name's
    document: the inverse of `split_hit`."""
    return f"{outcome_key[1:]}:{name}"


def outcome_contributions(visit: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(day, dimension, value) of each outcome count a session adds 1 to; none for a visit
    without a browser session (it cannot be told apart from the visitor's others)."""
    if not visit.get("sessionId"):
        return []
    day = visit["day"]
    found = outcome(visit)
    journey = of(visit)
    keys = [(day, STAGE, f"{found.stage()}{int(found.paid_at is not None)}")]
    keys += [(day, ERROR_HIT, _hit_value(found, at, error_id))
             for error_id, at in journey["errors"]]
    keys += [(day, PAGE_HIT, _hit_value(found, at, page)) for page, at in journey["frustrated"]]
    return keys


# Reading the counts ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Stratum:
    """One funnel stage's 2x2 table: the sessions hit at it, and those not hit that reached
    it, each with how many went on to a paid order."""

    hit: int
    hit_converted: int
    comparable: int
    comparable_converted: int


def strata_by_name(stage_counts: Iterable[tuple[str, int]],
                   hit_counts: Iterable[tuple[str, int]]) -> dict[str, list[Stratum]]:
    """Each error's (or page's) stage tables from the range's `stage` and hit counts (value,
    sessions): a session paid before it was hit is not at risk and is left out of the hit
    sessions, and a session hit is never one of the comparable ones."""
    reached = [[0, 0] for _ in range(STAGES + 1)]
    for value, sessions in stage_counts:
        final, paid = int(value[0]), int(value[1])
        for stage in range(final + 1):
            reached[stage][0] += sessions
            reached[stage][1] += sessions * paid
    hit: dict[str, list[list[int]]] = {}
    for value, sessions in hit_counts:
        at_hit, final, paid, paid_before = (int(digit) for digit in value[:4])
        name = value[5:]
        mine = hit.setdefault(name, [[0, 0, 0, 0] for _ in range(STAGES + 1)])
        if not paid_before:
            mine[at_hit][0] += sessions
            mine[at_hit][1] += sessions * paid
        for stage in range(final + 1):
            mine[stage][2] += sessions
            mine[stage][3] += sessions * paid
    tables: dict[str, list[Stratum]] = {}
    for name, stages in hit.items():
        tables[name] = [
            Stratum(counts[0], counts[1], reached[stage][0] - counts[2],
                    reached[stage][1] - counts[3])
            for stage, counts in enumerate(stages)
            if counts[0] and reached[stage][0] - counts[2] > 0]
    return tables
