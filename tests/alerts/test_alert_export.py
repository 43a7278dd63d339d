"""The account export holds each site's alert rules, each member's own alert settings and the
notification delivery log."""

from __future__ import annotations

from tests.alerts import figures
from tests.notifications.test_notifications import (
    WEBHOOK_SECRET,
    configure,
    receiver,
    settings_env,
)
from tests.support.app import Fetch, Tenant

__all__ = ["receiver", "settings_env"]


async def test_the_account_export_has_the_alert_rules_and_the_delivery_log(
        fetch: Fetch, tenant: Tenant, receiver):
    url, _, _ = receiver
    await configure(fetch, tenant, {"webhook": {"enabled": True, "url": url,
                                                "secret": WEBHOOK_SECRET}})
    rule = await figures.rule(fetch, tenant, "orderSilence", channels=["webhook"])
    await fetch(f"/api/v1/sites/{tenant.site_id}/alert-preferences", "PATCH", token=tenant.token,
                json_body={"muted": {rule["id"]: True}, "digest": "daily"})
    sent = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications/webhook/test", "POST",
                       token=tenant.token, body=b"")
    export = (await fetch("/auth/me/export.json", token=tenant.token)).json()
    [site] = export["sites"]
    assert [r["id"] for r in site["alertRules"]] == [rule["id"]]
    assert site["alertMemberSettings"] == [
        {"userId": tenant.user_id, "mutedRules": [rule["id"]], "digest": "daily"}]
    assert [(d["id"], d["event"], d["status"]) for d in site["notificationDeliveries"]] == [
        (sent.json()["id"], "alert.test", "delivered")]
