"""Alerts delivered: e-mail over a real SMTP server, a signed webhook the receiver verifies,
a Slack-compatible incoming webhook, each logged with its rule, attempts and the receiver's
status; "Send test" on a channel."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import tornado.httpserver
import tornado.netutil
import tornado.web

from config.metrics import Metrics
from tasks.alerts import AlertEvaluator
from tests.alerts import figures
from tests.notifications.test_notifications import (
    WEBHOOK_SECRET,
    Mailbox,
    configure,
    email_channel,
    receiver,
    settings_env,
    smtp_server,
)
from tests.support.app import Fetch, Tenant, all_documents_text

__all__ = ["receiver", "settings_env", "smtp_server"]


class SlackReceiver(tornado.web.RequestHandler):
    """An incoming webhook that keeps the messages it is sent."""

    def initialize(self, received: list[dict[str, Any]]) -> None:
        self.received = received

    def post(self) -> None:
        self.received.append(json.loads(self.request.body))
        self.set_status(200)


@pytest.fixture
async def slack() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    received: list[dict[str, Any]] = []
    app = tornado.web.Application([(r"/services/T0/B0/x", SlackReceiver,
                                    {"received": received})])
    http_server = tornado.httpserver.HTTPServer(app)
    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
    http_server.add_sockets(sockets)
    yield f"http://127.0.0.1:{sockets[0].getsockname()[1]}/services/T0/B0/x", received
    http_server.stop()
    await http_server.close_all_connections()


async def test_an_alert_goes_to_every_channel_of_its_rule_and_each_delivery_is_logged(
        fetch: Fetch, tenant: Tenant, deps, smtp_server: tuple[Mailbox, int], receiver,
        slack):
    mailbox, port = smtp_server
    hook_url, hooked, _ = receiver
    slack_url, slacked = slack
    await configure(fetch, tenant, {
        "email": email_channel(port),
        "webhook": {"enabled": True, "url": hook_url, "secret": WEBHOOK_SECRET},
        "slack": {"enabled": True, "url": slack_url}})
    rule = await figures.rule(fetch, tenant, "checkoutErrors", {"sessions": 2},
                              channels=["email", "webhook", "slack"])
    now = datetime.now(UTC)
    await figures.occurrences(deps.store, tenant.site_id, "e1", now - timedelta(minutes=5), 3,
                              page="/checkout")
    evaluator = AlertEvaluator(deps.store, Metrics(), deps.notifier, interval_seconds=60,
                               purge_interval_seconds=3600)
    await evaluator.evaluate_site(tenant.site_id, now)
    assert await deps.notifier.drain(within=10)

    [mail] = mailbox.messages
    subject = " ".join(mail["Subject"].split())
    assert subject == ("[shop site] 3 sessions hit an error on checkout or cart pages in the "
                       "last hour (threshold 2)")
    link = f"http://127.0.0.1:8888/app/sites/{tenant.site_id}/errors"
    assert link in mail.get_payload() and "sessions: 3" in mail.get_payload()
    [hook] = hooked
    assert hook["valid"] is True
    assert (hook["body"]["type"], hook["body"]["rule"]["id"]) == ("alert.fired", rule["id"])
    assert hook["body"]["figures"] == {"sessions": 3, "threshold": 2}
    assert hook["body"]["dashboardUrl"] == link
    [message] = slacked
    assert message["text"].startswith("3 sessions hit an error on checkout or cart pages")
    assert link in message["text"]

    log = await fetch(f"/api/v1/sites/{tenant.site_id}/alert-deliveries", token=tenant.token)
    entries = log.json()["deliveries"]
    assert sorted((e["channel"], e["status"], e["attempts"], e["responseStatus"], e["ruleId"])
                  for e in entries) == [
        ("email", "delivered", 1, None, rule["id"]), ("slack", "delivered", 1, 200, rule["id"]),
        ("webhook", "delivered", 1, 204, rule["id"])]


async def test_send_test_answers_the_delivery_and_a_failing_receiver_is_shown_failed(
        fetch: Fetch, tenant: Tenant, receiver, viewer_token: str):
    hook_url, hooked, answers = receiver
    answers.append(500)
    await configure(fetch, tenant, {
        "webhook": {"enabled": True, "url": hook_url, "secret": WEBHOOK_SECRET}})
    base = f"/api/v1/sites/{tenant.site_id}/notifications"
    failed = await fetch(f"{base}/webhook/test", "POST", token=tenant.token, body=b"")
    assert failed.code == 200, failed
    assert (failed.json()["status"], failed.json()["attempts"],
            failed.json()["responseStatus"]) == ("failed", 1, 500)
    delivered = await fetch(f"{base}/webhook/test", "POST", token=tenant.token, body=b"")
    assert (delivered.json()["status"], delivered.json()["responseStatus"]) == ("delivered",
                                                                                 204)
    assert [hook["body"]["type"] for hook in hooked] == ["alert.test", "alert.test"]
    assert hooked[1]["valid"] is True
    absent = await fetch(f"{base}/email/test", "POST", token=tenant.token, body=b"")
    assert absent.code == 422
    viewer = await fetch(f"{base}/webhook/test", "POST", token=viewer_token, body=b"")
    assert viewer.code == 403


async def test_a_slack_url_is_sealed_never_shown_and_needed_when_enabled(
        fetch: Fetch, tenant: Tenant, deps):
    secret_url = "https://hooks.slack.example/services/T0/B0/secretpart123"
    shown = await configure(fetch, tenant, {"slack": {"enabled": True, "url": secret_url}})
    assert shown.json()["slack"] == {"enabled": True, "urlSet": True}
    assert "secretpart123" not in await all_documents_text(deps.store)
    missing = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications", "PUT",
                          token=tenant.token, json_body={"slack": {"enabled": True}})
    assert missing.code == 200  # kept from before
    cleared = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications", "PUT",
                          token=tenant.token, json_body={"slack": {"enabled": True, "url": None}})
    assert cleared.code == 422 and cleared.json()["error"]["field"] == "slack.url"
