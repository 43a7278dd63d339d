"""The digest: a daily or weekly e-mail per member who asked for it (documents/alerts.py's member
settings), per site, with the period's visitors, orders, revenue and conversion against the
period before, the errors with the most revenue at risk and the shop funnel's biggest drop-off.

A step of the alert evaluator's pass (tasks/alerts.py). Periods are the site's days
(`sites.day_clock`): "daily" is yesterday, "weekly" the last whole week, Monday to Sunday. A
period's digest is due from SEND_HOUR in the site's zone on the day after it ends, until the
next period ends; a digest missed in that window is not sent late. Each (member, site, period)
is claimed by an insert under a unique key (documents/digests.py) before its mail is sent, so
any number of evaluators send it once. The figures are read through the reports' own functions
(derived/daily_figures.py, conversion_impact.py, funnel_reports.py); the mail carries figures,
error titles and links, never a visitor's data.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Protocol

from config.metrics import Metrics
from derived import conversion_impact, daily_figures, funnel_reports
from derived.alert_figures import Offload, in_thread
from documents import accounts, alerts, commerce, digests, error_records, funnels, sites
from documents import notifications as channels
from privacy.exclusion import page_matcher

log = logging.getLogger(__name__)

#: The site's local hour from which the day after a period ends gets its digest: after the
#: night's late orders and before the owner's working day.
SEND_HOUR = 7
#: The errors a digest lists at most.
TOP_ERRORS = 5
#: An error's title in a digest is cut here: it is the shop's text, and a mail stays short.
TITLE_LENGTH = 120
OUTCOME_METRIC = "digests_total"
OUTCOME_HELP = "Digests this process claimed, by period and outcome (sent, skipped: no e-mail)."


class DigestSender(Protocol):
    """Where a digest goes (tasks.notifications.Notifier)."""

    def site_link(self, site_id: str) -> str: ...

    async def digest(self, site_id: str, address: str, mail: DigestMail) -> None: ...


@dataclass(frozen=True)
class Period:
    """A digest's days, the days before it of the same length, and its key."""

    kind: str
    first: date
    last: date

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.first.isoformat()}"

    @property
    def before(self) -> tuple[date, date]:
        length = (self.last - self.first).days + 1
        return self.first - timedelta(days=length), self.first - timedelta(days=1)


@dataclass(frozen=True)
class DigestMail:
    """A digest as sent: subject, plain text and HTML, and the event the delivery log keeps."""

    subject: str
    text: str
    html: str
    event: dict[str, Any]


def due_period(kind: str, clock: Any, now: datetime) -> Period | None:
    """The period of `kind` whose digest is due at `now` on the site's clock, if any: the last
    whole one, once SEND_HOUR has come on the day after it ended."""
    today = clock.today(now)
    if kind == "daily":
        period = Period(kind, today - timedelta(days=1), today - timedelta(days=1))
    else:
        monday = today - timedelta(days=today.weekday())
        period = Period(kind, monday - timedelta(days=7), monday - timedelta(days=1))
    due = clock.start_of(period.last + timedelta(days=1)) + timedelta(hours=SEND_HOUR)
    return period if now >= due else None


async def send_due(store: Any, sender: DigestSender, metrics: Metrics, *, now: datetime,
                   offload: Offload = in_thread) -> int:
    """Send every digest due at `now` that no process has claimed yet; returns those sent."""
    sent = 0
    for kind in alerts.DIGEST_PERIODS:
        wanted: dict[str, list[str]] = {}
        for settings in await alerts.digest_subscribers(store, kind):
            wanted.setdefault(settings["siteId"], []).append(settings["userId"])
        for site_id, user_ids in wanted.items():
            try:
                sent += await _send_site(store, sender, metrics, site_id, kind, user_ids,
                                         now=now, offload=offload)
            except Exception:  # noqa: BLE001 - one site's failure must not stop the others
                log.exception("digest failed", extra={"siteId": site_id, "period": kind})
    return sent


async def _send_site(store: Any, sender: DigestSender, metrics: Metrics, site_id: str,
                     kind: str, user_ids: list[str], *, now: datetime, offload: Offload
                     ) -> int:
    site = await sites.find_site(store, site_id)
    if site is None:
        return 0
    period = due_period(kind, sites.day_clock(site), now)
    if period is None:
        return 0
    taken = await digests.delivered_users(store, site_id, period.key)
    members = [user for user in await _members(store, site, user_ids) if user["_id"] not in taken]
    if not members:
        return 0
    email = (await channels.channels_for_site(store, site_id) or {}).get("email")
    mail = None
    if email and email.get("enabled"):
        figures = await digest_figures(store, site, period, offload)
        mail = digest_mail(site, period, figures, sender.site_link(site_id))
    sent = 0
    for user in members:
        if not await digests.claim(store, site_id, user["_id"], period.key, now):
            continue  # another process has this one
        outcome = "skipped: no e-mail channel" if mail is None else "sent"
        if mail is not None:
            await sender.digest(site_id, user["email"], mail)
            sent += 1
        await digests.record_outcome(store, site_id, user["_id"], period.key, outcome)
        metrics.count(OUTCOME_METRIC, OUTCOME_HELP, period=kind,
                      outcome="sent" if mail is not None else "skipped")
    return sent


async def _members(store: Any, site: dict[str, Any], user_ids: Iterable[str]
                   ) -> list[dict[str, Any]]:
    # Settings outlive a membership only until its removal is noticed: ask the organization.
    found = []
    for user_id in user_ids:
        if await accounts.find_membership(store, site["organizationId"], user_id) is None:
            continue
        user = await accounts.find_user(store, user_id)
        if user is not None and user.get("email"):
            found.append(user)
    return found


def _totals(days: daily_figures.Period, currency: str | None) -> dict[str, Any]:
    # Orders of the reporting currency, as the overview counts them beside its revenue.
    orders = days.orders.get(currency, 0) if currency else sum(days.orders.values())
    return {"visitors": days.visitors, "orders": orders,
            "revenue": days.revenue.get(currency, 0) if currency else None,
            "conversion": round(orders / days.visitors, 4) if days.visitors else None}


async def digest_figures(store: Any, site: dict[str, Any], period: Period, offload: Offload
                         ) -> dict[str, Any]:
    """The digest's figures for the site and period, each read through its report."""
    site_id = site["_id"]
    before_first, before_last = period.before
    currency, _ = commerce.reporting_currency(site)
    documents = await daily_figures.site_days(store, site_id, before_first, period.last)
    now = _totals(daily_figures.period(documents, period.first, period.last), currency)
    before = _totals(daily_figures.period(documents, before_first, before_last), currency)
    impacts = await conversion_impact.error_impacts(store, site, period.first, period.last,
                                                    offload)
    at_risk = sorted(((impact["revenueAtRisk"], error_id) for error_id, impact in impacts.items()
                      if impact["status"] == "significant"), reverse=True)[:TOP_ERRORS]
    errors: list[dict[str, Any]] = [{"errorId": error_id, "revenueAtRisk": amount}
                                    for amount, error_id in at_risk]
    if not errors:
        counted = await daily_figures.error_figures(store, site_id, period.first, period.last)
        busiest = sorted(counted.items(), key=lambda item: (-item[1].occurrences, item[0]))
        errors = [{"errorId": error_id, "occurrences": figures.occurrences}
                  for error_id, figures in busiest[:TOP_ERRORS]]
    for row in errors:
        error = await error_records.find_error(store, site_id, row["errorId"]) or {}
        title = error_records.title_message(str(error.get("type") or "Error"),
                                            str(error.get("message") or ""))
        row["title"] = " ".join(f"{error.get('type') or 'Error'}: {title}".split())[
            :TITLE_LENGTH]
    report = await funnel_reports.funnel_report(
        store, site_id, funnels.shop_funnel(), period.first, period.last, source=None,
        page_matches=page_matcher(), offload=offload)
    steps = report["steps"]
    drop = max(steps, key=lambda step: step["dropOff"]) if steps else None
    drop_off = None
    if drop is not None and drop["dropOff"] > 0:
        drop_off = {"step": drop["label"], "next": steps[drop["index"]]["label"],
                    "sessions": drop["sessions"], "dropOff": drop["dropOff"]}
    return {"from": period.first.isoformat(), "to": period.last.isoformat(),
            "currency": currency, "current": now, "previous": before,
            "errors": errors, "errorsAtRisk": bool(at_risk), "funnelDropOff": drop_off}


# The mail ---------------------------------------------------------------------------------


_LABELS = (("visitors", "Visitors"), ("orders", "Orders"), ("revenue", "Revenue"),
           ("conversion", "Conversion (orders per visitor)"))


def _shown(name: str, value: Any, currency: str | None) -> str:
    if value is None:
        return "-"
    if name == "revenue":
        return f"{commerce.decimal_text(int(value), currency or '')} {currency}"
    if name == "conversion":
        return f"{value * 100:.2f} %"
    return str(value)


def _rows(figures: dict[str, Any]) -> list[tuple[str, str, str]]:
    currency = figures["currency"]
    return [(label, _shown(name, figures["current"][name], currency),
             _shown(name, figures["previous"][name], currency))
            for name, label in _LABELS
            if name != "revenue" or currency]


def _error_lines(figures: dict[str, Any]) -> list[str]:
    currency = figures["currency"]
    if figures["errorsAtRisk"]:
        return [f"{row['title']}: {_shown('revenue', row['revenueAtRisk'], currency)} at risk"
                for row in figures["errors"]]
    return [f"{row['title']}: {row['occurrences']} occurrences" for row in figures["errors"]]


def _drop_line(drop: dict[str, Any] | None) -> str:
    if drop is None:
        return "No session stopped in the shop funnel."
    return (f"{drop['dropOff']} of {drop['sessions']} sessions stopped after "
            f"{drop['step']} (before {drop['next']})")


def digest_mail(site: dict[str, Any], period: Period, figures: dict[str, Any], link: str
                ) -> DigestMail:
    """The digest as plain text and as HTML (every text from the shop escaped)."""
    name = str(site.get("name") or site["_id"])
    span = (figures["from"] if period.kind == "daily"
            else f"{figures['from']} to {figures['to']}")
    title = f"{'Daily' if period.kind == 'daily' else 'Weekly'} digest, {span}"
    against = "the day before" if period.kind == "daily" else "the week before"
    rows = _rows(figures)
    errors = _error_lines(figures)
    errors_heading = ("Errors with the most revenue at risk" if figures["errorsAtRisk"]
                      else "Errors with the most occurrences")
    drop = _drop_line(figures["funnelDropOff"])
    links = {"Overview": f"{link}/overview", "Errors": f"{link}/errors",
             "Shop funnel": f"{link}/funnels"}
    text = "\n".join([
        f"{title} for {name}", "", f"Figure: this period (against {against})",
        *[f"{label}: {current} ({previous})" for label, current, previous in rows], "",
        f"{errors_heading}:", *([f"- {line}" for line in errors] or ["- none"]), "",
        f"Biggest shop funnel drop-off: {drop}", "",
        *[f"{label}: {url}" for label, url in links.items()], ""])
    e = html.escape
    table = "".join(f"<tr><th scope=\"row\">{e(label)}</th><td>{e(current)}</td>"
                    f"<td>{e(previous)}</td></tr>" for label, current, previous in rows)
    items = "".join(f"<li>{e(line)}</li>" for line in errors) or "<li>none</li>"
    anchors = " · ".join(f"<a href=\"{e(url)}\">{e(label)}</a>" for label, url in links.items())
    body = (f"<!doctype html><html><body><h1>{e(title)} for {e(name)}</h1>"
            f"<table><thead><tr><th></th><th>This period</th><th>{e(against.capitalize())}"
            f"</th></tr></thead><tbody>{table}</tbody></table>"
            f"<h2>{e(errors_heading)}</h2><ul>{items}</ul>"
            f"<h2>Biggest shop funnel drop-off</h2><p>{e(drop)}</p>"
            f"<p>{anchors}</p></body></html>")
    event = {"type": f"digest.{period.kind}", "siteId": site["_id"], "period": period.key,
             "figures": figures}
    return DigestMail(f"[{name}] {title}", text, body, event)
