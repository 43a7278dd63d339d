"""The alert rules' evaluator: on an interval, evaluates every site's rules over the folded
figures, off the request path, and tells the owner when an episode opens or is resolved.

It runs where the derivation runs (tasks/derivation.py): in the server process on the
embedded default, in the worker when REDIS_URL is set. Several evaluators may run side by
side: a lease per site (`derived.derivation.claim` on the key "alerts/<site>", held for most
of an interval) keeps them off each other's sites, and when two meet anyway the unique episode
key (documents/alerts.py) lets exactly one of them open, or resolve, an episode, and only
that one sends it. What each kind reads and tests is derived/alert_figures.py. A member who
muted a rule for themselves is left out of its e-mail (documents/alerts.py's member settings).
Each pass ends with the digest step (tasks/digests.py): the members' daily and weekly digests
that are due, each sent once whatever the number of evaluators.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from config.background import PeriodicTask
from config.metrics import Metrics
from derived import alert_figures, derivation
from derived.alert_figures import Finding, Situation, Verdict
from documents import accounts, alerts, sites
from documents.accounts import new_id
from documents.alerts import Episode
from documents.store import Store
from instants import format_instant
from tasks import digests
from tasks.digests import DigestSender

log = logging.getLogger(__name__)

SENT_METRIC = "alerts_sent_total"
SENT_HELP = "Alert episodes this process opened or resolved and sent, by kind and what."
FAILED_METRIC = "alert_rule_failures_total"
FAILED_HELP = "Rule evaluations that failed (tried again on the next pass)."


class AlertSender(DigestSender, Protocol):
    """Where an alert, and a digest, goes (tasks.notifications.Notifier)."""

    async def alert(self, site_id: str, rule: dict[str, Any], event: dict[str, Any], *,
                    muted_addresses: list[str]) -> None: ...


def lease_key(site_id: str) -> str:
    """The lease a site's evaluation holds, beside the fold's in the leases collection."""
    return f"alerts/{site_id}"


def _plain(value: Any) -> Any:
    # Figures go into JSON bodies and the rule's evaluation: instants as the API spells them.
    if isinstance(value, datetime):
        return format_instant(value)
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


class AlertEvaluator:
    """Evaluates every site's alert rules on an interval and sends what opens or resolves."""

    def __init__(self, store: Store, metrics: Metrics, sender: AlertSender, *,
                 interval_seconds: float, purge_interval_seconds: float) -> None:
        self.store = store
        self.metrics = metrics
        self.sender = sender
        self.interval = interval_seconds
        self.purge_interval = purge_interval_seconds
        #: One owner name per process, so its leases are its own.
        self.owner = new_id()
        self._loop = PeriodicTask("alert-evaluation", [("alert evaluation", self.evaluate_all),
                                                     ("digests", self.send_digests)],
                                  pause=lambda: self.interval, logger=log)

    async def evaluate_all(self, now: datetime | None = None) -> int:
        """Evaluate the rules of every site this process can lease now; returns the alerts
        sent."""
        sent = 0
        # Held for most of an interval: another evaluator's next pass finds it free again.
        lease = timedelta(seconds=max(1.0, self.interval * 0.9))
        for site_id in await alerts.sites_with_rules(self.store):
            if not await derivation.claim(self.store, lease_key(site_id), self.owner,
                                          now=datetime.now(UTC), lease=lease):
                continue
            sent += await self.evaluate_site(site_id, now)
        return sent

    async def send_digests(self, now: datetime | None = None) -> int:
        """Send the members' digests due at `now` that no process sent; returns how many."""
        return await digests.send_due(self.store, self.sender, self.metrics,
                                      now=now or datetime.now(UTC))

    async def evaluate_kind(self, kind: str, now: datetime | None = None) -> int:
        """Evaluate every site's rules of one kind at `now`, without leases (each episode is
        still sent once); returns the alerts sent. The purge checks its overdue rules so in
        every process, since the worker that evaluates the others may be the one down."""
        now = now or datetime.now(UTC)
        sent = 0
        site: dict[str, Any] | None = None
        for rule in await alerts.active_rules_of_kind(self.store, kind):
            if site is None or site["_id"] != rule["siteId"]:
                site = await sites.find_site(self.store, rule["siteId"])
            if site is not None:
                sent += await self._evaluate_rule(self._situation(site, now), rule)
        return sent

    def _situation(self, site: dict[str, Any], now: datetime) -> Situation:
        return Situation(self.store, site, now, purge_interval_seconds=self.purge_interval)

    async def evaluate_site(self, site_id: str, now: datetime | None = None) -> int:
        """Evaluate one site's rules at `now`; returns the alerts sent."""
        now = now or datetime.now(UTC)
        site = await sites.find_site(self.store, site_id)
        if site is None:
            return 0
        situation = self._situation(site, now)
        sent = 0
        for rule in await alerts.active_rules(self.store, site_id):
            try:
                sent += await self._evaluate_rule(situation, rule)
            except Exception:  # noqa: BLE001 - one rule's failure must not stop the others
                log.exception("alert rule evaluation failed",
                              extra={"siteId": site_id, "ruleId": rule["_id"]})
                self.metrics.count(FAILED_METRIC, FAILED_HELP, kind=rule["kind"])
                await alerts.record_evaluation(self.store, rule["_id"], {
                    "at": now, "state": "failed", "figures": {}})
        return sent

    async def _evaluate_rule(self, situation: Situation, rule: dict[str, Any]) -> int:
        kind = alert_figures.KINDS[rule["kind"]]
        verdict = await kind.evaluate(situation, rule.get("params") or {})
        now = situation.now
        sent = 0
        firing = {finding.subject: finding for finding in verdict.findings}
        latest = await alerts.latest_episodes(self.store, rule["_id"], list(firing))
        cooldown = timedelta(minutes=rule.get("cooldownMinutes",
                                              alerts.DEFAULT_COOLDOWN_MINUTES))
        for subject, finding in firing.items():
            before = latest.get(subject)
            if not alerts.may_open(before, now=now, cooldown=cooldown, once=kind.once):
                continue
            number = before["number"] + 1 if before else 1
            opened = await alerts.open_episode(self.store, rule, subject, number,
                                               _plain(finding.figures), now)
            if opened is not None:
                await self._send(rule, opened, "fired", finding.title, finding, now)
                sent += 1
        if verdict.judged and not kind.once:
            for episode in await alerts.open_episodes(self.store, rule["_id"]):
                if episode["subject"] in firing:
                    continue
                resolved = await alerts.resolve_episode(self.store, episode, now)
                if resolved is not None:
                    await self._send(rule, resolved, "resolved", f"Resolved: {rule['name']}",
                                     None, now, figures=verdict.figures)
                    sent += 1
        await alerts.record_evaluation(self.store, rule["_id"], {
            "at": now, "state": _state(verdict), "figures": _plain(verdict.figures),
            "firing": sorted(firing)})
        return sent

    async def _send(self, rule: dict[str, Any], episode: Episode, what: str, title: str,
                    finding: Finding | None, now: datetime, *,
                    figures: dict[str, Any] | None = None) -> None:
        page = finding.page if finding else _resolved_page(rule, episode)
        await self.sender.alert(rule["siteId"], rule, {
            "type": f"alert.{what}", "id": episode.id, "siteId": rule["siteId"],
            "at": format_instant(now),
            "rule": {"id": rule["_id"], "kind": rule["kind"], "name": rule["name"]},
            "subject": episode.subject, "episode": episode.number, "title": title,
            "figures": _plain(finding.figures if finding else figures or {}), "page": page},
            muted_addresses=await self._muted_addresses(rule))
        self.metrics.count(SENT_METRIC, SENT_HELP, kind=rule["kind"], what=what)

    async def _muted_addresses(self, rule: dict[str, Any]) -> list[str]:
        # Only e-mail goes to a person; webhooks and Slack go to the shop's own systems.
        if "email" not in (rule.get("channels") or ()):
            return []
        addresses = []
        for user_id in await alerts.members_muting(self.store, rule["siteId"], rule["_id"]):
            user = await accounts.find_user(self.store, user_id)
            if user is not None:
                addresses.append(user["email"])
        return addresses

    def start(self) -> None:
        """Run in the background until `close`."""
        self._loop.start()

    async def close(self) -> None:
        """Stop the background loop."""
        await self._loop.close()


def _state(verdict: Verdict) -> str:
    if verdict.findings:
        return "firing"
    return "ok" if verdict.judged else "notEnoughData"


def _resolved_page(rule: dict[str, Any], episode: Episode) -> str:
    # An error's episode is resolved on the error's page; the rule's own, on the Alerts page.
    return "alerts" if episode.subject == "rule" else f"errors/{episode.subject}"
