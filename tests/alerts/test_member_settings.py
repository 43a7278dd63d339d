"""Each member's own alert settings: a member mutes a rule for themselves (their address is
left out of its e-mail, the rule still fires for the others) and chooses a digest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from config.metrics import Metrics
from tasks.alerts import AlertEvaluator
from tests.alerts import figures
from tests.alerts.conftest import Outbox
from tests.notifications.test_notifications import (
    Mailbox,
    configure,
    email_channel,
    settings_env,
    smtp_server,
)
from tests.support.app import Fetch, Tenant

__all__ = ["settings_env", "smtp_server"]


async def test_a_viewer_mutes_a_rule_for_themselves_and_only_their_address_is_left_out(
        fetch: Fetch, tenant: Tenant, deps, viewer_token: str,
        smtp_server: tuple[Mailbox, int]):
    mailbox, port = smtp_server
    channel = email_channel(port)
    channel["recipients"] = [tenant.email, "Viewer@example.com"]
    await configure(fetch, tenant, {"email": channel})
    rule = await figures.rule(fetch, tenant, "checkoutErrors", {"sessions": 1})
    base = f"/api/v1/sites/{tenant.site_id}/alert-preferences"
    assert (await fetch(base, token=viewer_token)).json() == {"mutedRules": [], "digest": None}
    muted = await fetch(base, "PATCH", token=viewer_token,
                        json_body={"muted": {rule["id"]: True}})
    assert muted.code == 200, muted
    assert muted.json() == {"mutedRules": [rule["id"]], "digest": None}
    # The owner's own settings are theirs: nothing muted.
    assert (await fetch(base, token=tenant.token)).json()["mutedRules"] == []

    now = datetime.now(UTC)
    await figures.occurrences(deps.store, tenant.site_id, "e1", now - timedelta(minutes=5), 1,
                              page="/checkout")
    evaluator = AlertEvaluator(deps.store, Metrics(), deps.notifier, interval_seconds=60,
                               purge_interval_seconds=3600)
    await evaluator.evaluate_site(tenant.site_id, now)
    assert await deps.notifier.drain(within=10)
    [mail] = mailbox.messages
    assert mail["To"] == tenant.email

    # Heard again once unmuted.
    await fetch(base, "PATCH", token=viewer_token, json_body={"muted": {rule["id"]: False}})
    await evaluator.evaluate_site(tenant.site_id, now + timedelta(hours=2))  # resolved
    assert await deps.notifier.drain(within=10)
    assert mailbox.messages[1]["To"] == f"{tenant.email}, Viewer@example.com"


async def test_when_every_recipient_muted_the_rule_no_mail_is_sent_but_the_rule_fires(
        fetch: Fetch, tenant: Tenant, deps, evaluator: AlertEvaluator, outbox: Outbox):
    rule = await figures.rule(fetch, tenant, "checkoutErrors", {"sessions": 1},
                              channels=["email", "webhook"])
    await fetch(f"/api/v1/sites/{tenant.site_id}/alert-preferences", "PATCH",
                token=tenant.token, json_body={"muted": {rule["id"]: True}})
    now = datetime.now(UTC)
    await figures.occurrences(deps.store, tenant.site_id, "e1", now - timedelta(minutes=5), 1,
                              page="/cart")
    await evaluator.evaluate_site(tenant.site_id, now)
    assert len(outbox.of("fired")) == 1
    [muted] = outbox.muted
    assert muted == [tenant.email]


async def test_a_member_mutes_only_the_sites_rules_and_a_deleted_rule_leaves_their_settings(
        fetch: Fetch, tenant: Tenant, viewer_token: str):
    rule = await figures.rule(fetch, tenant, "lead")
    base = f"/api/v1/sites/{tenant.site_id}/alert-preferences"
    unknown = await fetch(base, "PATCH", token=viewer_token,
                          json_body={"muted": {"00000000-0000-4000-8000-000000000000": True}})
    assert unknown.code == 404, unknown
    odd = await fetch(base, "PATCH", token=viewer_token, json_body={"digest": "hourly"})
    assert odd.code == 422, odd
    both = await fetch(base, "PATCH", token=viewer_token,
                       json_body={"muted": {rule["id"]: True}, "digest": "weekly"})
    assert both.json() == {"mutedRules": [rule["id"]], "digest": "weekly"}
    await fetch(f"/api/v1/sites/{tenant.site_id}/alert-rules/{rule['id']}", "DELETE",
                token=tenant.token)
    assert (await fetch(base, token=viewer_token)).json() == {"mutedRules": [],
                                                             "digest": "weekly"}
