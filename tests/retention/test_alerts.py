"""A failing or overdue purge reaches the owner through the site's own channels: a signed webhook
and an e-mail, logged with the other deliveries (an overdue one as the site's purge-overdue
alert rule, issue 42)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tasks.purge import RetentionPurger
from tests.notifications.test_notifications import (  # noqa: F401 - fixtures
    WEBHOOK_SECRET,
    configure,
    email_channel,
    receiver,
    settings_env,
    smtp_server,
)
from tests.retention.conftest import OVERDUE_AFTER, as_stored, make_purger
from tests.support.app import Fetch, Tenant
from tests.support.faulty_store import FaultPlan, FaultyStore


@pytest.fixture
async def owner_channels(fetch: Fetch, tenant: Tenant, receiver, smtp_server  # noqa: F811
                         ) -> tuple[list[dict[str, Any]], Any]:
    """The site's webhook and e-mail channels, both on: what the webhook received, the mailbox."""
    url, received, _ = receiver
    mailbox, port = smtp_server
    await configure(fetch, tenant, {
        "webhook": {"enabled": True, "url": url, "secret": WEBHOOK_SECRET},
        "email": email_channel(port)})
    return received, mailbox


async def test_a_failing_purge_posts_a_signed_webhook_and_an_email(
        fetch: Fetch, deps, tenant: Tenant, owner_channels):
    received, mailbox = owner_channels
    plan = FaultPlan()
    plan.fail("survey_responses", "delete_many")
    purger = RetentionPurger(FaultyStore(deps.store, plan), deps.metrics, deps.notifier,
                             interval_seconds=3600, batch=200, purges=True)
    # A survey answer past its year, so that the failing delete is reached.
    await deps.store.collection("survey_responses").insert_one({
        "_id": "old-answer", "siteId": tenant.site_id, "visitorId": "v", "surveyId": "nps",
        "answeredAt": datetime.now(UTC) - timedelta(days=400), "answers": []})
    with pytest.raises(Exception, match="surveys"):
        await purger.purge()
    assert await deps.notifier.drain(within=10)

    (hook,) = received
    assert hook["valid"] is True
    body = hook["body"]
    assert (body["type"], body["siteId"], body["kinds"]) == (
        "retention_purge_failed", tenant.site_id, ["surveys"])
    assert body["dashboardUrl"].endswith(f"/app/sites/{tenant.site_id}/privacy")
    (mail,) = mailbox.messages
    assert "The retention purge failed" in " ".join(mail["Subject"].split())
    assert "surveys" in mail.get_payload()
    log = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications/deliveries",
                      token=tenant.token)
    assert log.code == 200, log
    assert sorted((d["channel"], d["status"]) for d in log.json()["deliveries"]) == [
        ("email", "delivered"), ("webhook", "delivered")]


async def test_an_overdue_purge_posts_a_signed_webhook_and_an_email_saying_since_when(
        deps, tenant: Tenant, owner_channels):
    received, mailbox = owner_channels
    server = make_purger(deps.store, deps.notifier, purges=False)
    started = datetime.now(UTC)
    await server.measure(started)
    await server.measure(started + OVERDUE_AFTER + timedelta(seconds=1))
    assert await deps.notifier.drain(within=10)
    (hook,) = received
    assert hook["valid"] is True
    body = hook["body"]
    assert (body["type"], body["siteId"], body["rule"]["kind"]) == (
        "alert.fired", tenant.site_id, "purgeOverdue")
    since = as_stored(started).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert body["figures"]["overdueSince"] == since
    assert body["dashboardUrl"].endswith(f"/app/sites/{tenant.site_id}/privacy")
    (mail,) = mailbox.messages
    assert "The retention purge has not finished a run since" in " ".join(
        mail["Subject"].split())
    assert f"overdueSince: {since}" in mail.get_payload()
