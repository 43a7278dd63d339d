"""Alert rules in the dashboard API: owners and admins create, change, mute and delete them
(audited), members read them with each rule's last evaluation; each member's own settings
(rules muted for themselves, the digest); the alerts' delivery log; and "Send test" on a
notification channel. What each kind tests is derived/alert_figures.py;
the evaluation runs in tasks/alerts.py, never here."""

from __future__ import annotations

from derived import alert_figures
from documents import alerts, notifications
from handlers.site_api import SITE_ID, UUID, SiteDataHandler

CHANNEL = r"(email|webhook|slack)"


class AlertRulesHandler(SiteDataHandler):
    """GET lists the site's rules and the kinds; POST creates one (owner or admin)."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        rules = await alerts.list_rules(self.deps.store, site["_id"])
        self.write_json({"rules": [alerts.view(rule) for rule in rules],
                         "kinds": [{"kind": kind.name, "label": kind.label}
                                   for kind in alert_figures.KINDS.values()]})

    async def post(self, site_id: str) -> None:
        site = await self.admin_site(site_id)
        body = self.validated_body("AlertRuleCreate")
        params = alert_figures.checked_params(body["kind"], body.get("params") or {})

        rule = await self.audited(
            site, "alert_rule.created",
            lambda session: alerts.create_rule(self.deps.store, site, body, params,
                                               session=session),
            lambda created: {"ruleId": created["_id"], "kind": created["kind"]})
        self.write_json(alerts.view(rule), status=201)


class AlertRuleHandler(SiteDataHandler):
    """GET reads one rule; PATCH changes or mutes it, DELETE removes it (owner or admin)."""

    async def get(self, site_id: str, rule_id: str) -> None:
        site = await self.readable_site(site_id)
        self.write_json(alerts.view(await alerts.find_rule(self.deps.store, site["_id"],
                                                           rule_id)))

    async def patch(self, site_id: str, rule_id: str) -> None:
        site = await self.admin_site(site_id)
        changes = self.validated_body("AlertRuleUpdate")
        if "params" in changes:
            rule = await alerts.find_rule(self.deps.store, site["_id"], rule_id)
            changes["params"] = alert_figures.checked_params(rule["kind"], changes["params"])

        rule, _ = await self.audited(
            site, "alert_rule.changed",
            lambda session: alerts.update_rule(self.deps.store, site["_id"], rule_id, changes,
                                               session=session),
            lambda updated: {"ruleId": rule_id, "fields": updated[1]} if updated[1] else None)
        self.write_json(alerts.view(rule))

    async def delete(self, site_id: str, rule_id: str) -> None:
        site = await self.admin_site(site_id)

        await self.audited(
            site, "alert_rule.deleted",
            lambda session: alerts.delete_rule(self.deps.store, site["_id"], rule_id,
                                               session=session),
            lambda _: {"ruleId": rule_id})
        self.set_status(204)
        self.finish()


class AlertPreferencesHandler(SiteDataHandler):
    """GET the caller's own alert settings for the site; PATCH mutes or unmutes rules for them
    and sets their digest. Any member, for themselves only."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        self.write_json(alerts.member_view(
            await alerts.member_settings(self.deps.store, site["_id"], self.user.id)))

    async def patch(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        changes = self.validated_body("AlertPreferencesUpdate")
        self.write_json(alerts.member_view(await alerts.change_member_settings(
            self.deps.store, site["_id"], self.user.id, changes)))


class AlertDeliveriesHandler(SiteDataHandler):
    """GET the alerts' newest deliveries: time, rule, channel, outcome, attempts, status."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        found = await notifications.recent_deliveries(self.deps.store, site["_id"], None, 100,
                                                      alerts_only=True)
        self.write_json({"deliveries": found})


class ChannelTestHandler(SiteDataHandler):
    """POST sends a test message on one channel now (owner or admin) and answers its
    delivery log entry, delivered or failed."""

    async def post(self, site_id: str, channel: str) -> None:
        site = await self.admin_site(site_id)
        delivery_id = await self.deps.notifier.send_test(site["_id"], channel)
        self.write_json(await notifications.find_delivery(self.deps.store, site["_id"],
                                                          delivery_id))


default_handlers = [
    (rf"/api/v1/sites/{SITE_ID}/alert-rules", AlertRulesHandler),
    (rf"/api/v1/sites/{SITE_ID}/alert-rules/{UUID}", AlertRuleHandler),
    (rf"/api/v1/sites/{SITE_ID}/alert-preferences", AlertPreferencesHandler),
    (rf"/api/v1/sites/{SITE_ID}/alert-deliveries", AlertDeliveriesHandler),
    (rf"/api/v1/sites/{SITE_ID}/notifications/{CHANNEL}/test", ChannelTestHandler),
]
