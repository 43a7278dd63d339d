"""Notifications for new and re-opened errors: channel API, SMTP e-mail, signed webhooks."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from email import message_from_bytes
from typing import Any

import pytest
import tornado.httpserver
import tornado.netutil
import tornado.web
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

import server
from tasks.notifications import (
    DELIVERY_HEADER,
    SIGNATURE_HEADER,
    Notifier,
    sign_webhook,
    verify_webhook_signature,
)
from tasks.worker import open_worker_clients
from tests.support.app import Fetch, Tenant, all_documents_text
from tests.support.processes import free_port

SMTP_PASSWORD = "smtp-pass-" + uuid.uuid4().hex
WEBHOOK_SECRET = "whsec-" + uuid.uuid4().hex


@pytest.fixture
def settings_env(settings_env: dict[str, str]) -> dict[str, str]:
    """Fast retries so the give-up path runs in a test; receivers here are on 127.0.0.1."""
    return {**settings_env, "NOTIFY_MAX_ATTEMPTS": "3", "NOTIFY_RETRY_SECONDS": "0.02",
            "WEBHOOK_ALLOW_PRIVATE_ADDRESSES": "true"}


class Mailbox:
    """An aiosmtpd handler that keeps what it receives and checks the login."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        self.messages.append(message_from_bytes(envelope.content))
        return "250 OK"


def _check_login(server: Any, session: Any, envelope: Any, mechanism: str,
                 auth_data: Any) -> AuthResult:
    ok = isinstance(auth_data, LoginPassword) and auth_data.password == SMTP_PASSWORD.encode()
    return AuthResult(success=ok)


@pytest.fixture
def smtp_server() -> Iterator[tuple[Mailbox, int]]:
    """A real local SMTP server that requires a login."""
    mailbox = Mailbox()
    port = free_port()
    controller = Controller(mailbox, hostname="127.0.0.1", port=port,
                            authenticator=_check_login, auth_require_tls=False)
    controller.start()
    yield mailbox, port
    controller.stop()


class Receiver(tornado.web.RequestHandler):
    """A webhook receiver that verifies the signature like a Client would."""

    def initialize(self, received: list[dict[str, Any]], answers: list[int]) -> None:
        self.received = received
        self.answers = answers

    def post(self) -> None:
        header = self.request.headers.get(SIGNATURE_HEADER, "")
        valid = verify_webhook_signature(WEBHOOK_SECRET, header, self.request.body)
        self.received.append({"valid": valid, "body": json.loads(self.request.body),
                              "delivery": self.request.headers.get(DELIVERY_HEADER)})
        self.set_status(self.answers.pop(0) if self.answers else (204 if valid else 401))


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[str, list[dict[str, Any]], list[int]]]:
    """A real local HTTP receiver: its URL, what it received, status codes to answer first."""
    received: list[dict[str, Any]] = []
    answers: list[int] = []
    app = tornado.web.Application([(r"/hook", Receiver, {"received": received,
                                                         "answers": answers})])
    http_server = tornado.httpserver.HTTPServer(app)
    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
    http_server.add_sockets(sockets)
    yield f"http://127.0.0.1:{sockets[0].getsockname()[1]}/hook", received, answers
    http_server.stop()
    await http_server.close_all_connections()


def error_record(**changes: Any) -> dict[str, Any]:
    return {"_id": str(uuid.uuid4()), "fingerprint": "fp-1", "type": "js",
            "message": "TypeError: cart is undefined\r\nBcc: victim@example.com",
            "occurrenceCount": 3, "status": "open", **changes}


async def configure(fetch: Fetch, tenant: Tenant, body: dict[str, Any]) -> Any:
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications", "PUT",
                         token=tenant.token, json_body=body)
    assert answer.code == 200, answer
    return answer


def email_channel(port: int) -> dict[str, Any]:
    return {"enabled": True, "recipients": ["owner@shop.example"], "from": "alerts@vs.example",
            "smtpHost": "127.0.0.1", "smtpPort": port, "smtpSecurity": "none",
            "smtpUsername": "alerts", "smtpPassword": SMTP_PASSWORD}


async def test_channel_secrets_are_write_only_and_sealed_at_rest(
        fetch: Fetch, deps: server.Deps, tenant: Tenant, caplog: pytest.LogCaptureFixture):
    put = await configure(fetch, tenant, {
        "email": email_channel(2525),
        "webhook": {"enabled": True, "url": "https://hooks.shop.example/x",
                    "secret": WEBHOOK_SECRET},
    })
    shown = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications", token=tenant.token)
    for answer in (put, shown):
        assert SMTP_PASSWORD.encode() not in answer.body
        assert WEBHOOK_SECRET.encode() not in answer.body
    assert shown.json()["email"]["smtpPasswordSet"] is True
    assert shown.json()["webhook"]["secretSet"] is True
    stored = await all_documents_text(deps.store)
    assert SMTP_PASSWORD not in stored and WEBHOOK_SECRET not in stored
    assert SMTP_PASSWORD not in caplog.text and WEBHOOK_SECRET not in caplog.text


async def test_leaving_a_secret_out_keeps_it_and_null_clears_it(fetch: Fetch, tenant: Tenant):
    await configure(fetch, tenant, {"email": email_channel(2525)})
    without = {k: v for k, v in email_channel(2526).items() if k != "smtpPassword"}
    kept = await configure(fetch, tenant, {"email": without})
    assert kept.json()["email"]["smtpPasswordSet"] is True
    assert kept.json()["email"]["smtpPort"] == 2526
    cleared = await configure(fetch, tenant, {"email": {**without, "smtpPassword": None}})
    assert cleared.json()["email"]["smtpPasswordSet"] is False


async def test_an_enabled_webhook_without_a_secret_is_refused(fetch: Fetch, tenant: Tenant):
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications", "PUT",
                         token=tenant.token,
                         json_body={"webhook": {"enabled": True, "url": "https://h.example/x"}})
    assert answer.code == 422
    assert answer.json()["error"]["field"] == "webhook.secret"


async def test_a_new_error_is_emailed_over_smtp(
        fetch: Fetch, deps: server.Deps, tenant: Tenant, smtp_server: tuple[Mailbox, int]):
    mailbox, port = smtp_server
    await configure(fetch, tenant, {"email": email_channel(port)})
    await deps.notifier.error_opened(tenant.site_id, error_record(), reopened=False)
    assert await deps.notifier.drain(within=10)
    assert len(mailbox.messages) == 1
    mail = mailbox.messages[0]
    assert mail["To"] == "owner@shop.example"
    subject = " ".join(mail["Subject"].split())  # undo header folding
    assert subject.startswith("[shop site] New error: TypeError: cart is undefined")
    assert mail["Bcc"] is None  # the message's line break did not become a header
    assert "Occurrences: 3" in mail.get_payload()


async def test_a_reopened_error_posts_a_webhook_the_receiver_can_verify(
        fetch: Fetch, deps: server.Deps, tenant: Tenant, receiver):
    url, received, _ = receiver
    await configure(fetch, tenant, {"webhook": {"enabled": True, "url": url,
                                                "secret": WEBHOOK_SECRET}})
    record = error_record()
    await deps.notifier.error_opened(tenant.site_id, record, reopened=True)
    assert await deps.notifier.drain(within=10)
    assert len(received) == 1 and received[0]["valid"] is True
    body = received[0]["body"]
    assert body["type"] == "new_error" and body["id"] == record["_id"]
    assert body["error"]["reopened"] is True
    log = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications/deliveries",
                      token=tenant.token)
    [entry] = log.json()["deliveries"]
    assert entry["id"] == received[0]["delivery"]
    assert (entry["status"], entry["attempts"]) == ("delivered", 1)


async def test_a_failing_webhook_is_retried_then_recorded_failed_for_the_dashboard(
        fetch: Fetch, deps: server.Deps, tenant: Tenant, receiver):
    url, received, answers = receiver
    answers.extend([500, 500, 500])
    await configure(fetch, tenant, {"webhook": {"enabled": True, "url": url,
                                                "secret": WEBHOOK_SECRET}})
    await deps.notifier.error_opened(tenant.site_id, error_record(), reopened=False)
    assert await deps.notifier.drain(within=10)
    assert len(received) == 3
    log = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications/deliveries?status=failed",
                      token=tenant.token)
    [entry] = log.json()["deliveries"]
    assert (entry["attempts"], entry["lastError"]) == (3, "DeliveryFailed: HTTP 500")


async def test_a_webhook_that_recovers_is_delivered_on_a_retry(
        fetch: Fetch, deps: server.Deps, tenant: Tenant, receiver):
    url, received, answers = receiver
    answers.append(503)
    await configure(fetch, tenant, {"webhook": {"enabled": True, "url": url,
                                                "secret": WEBHOOK_SECRET}})
    await deps.notifier.error_opened(tenant.site_id, error_record(), reopened=False)
    assert await deps.notifier.drain(within=10)
    assert [r["valid"] for r in received] == [True, True]
    log = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications/deliveries",
                      token=tenant.token)
    assert log.json()["deliveries"][0]["status"] == "delivered"


async def test_error_processing_does_not_wait_for_a_hanging_channel(
        fetch: Fetch, deps: server.Deps, tenant: Tenant):
    silent = tornado.netutil.bind_sockets(0, "127.0.0.1")[0]  # accepts, never answers
    port = silent.getsockname()[1]
    await configure(fetch, tenant, {"webhook": {"enabled": True, "secret": WEBHOOK_SECRET,
                                                "url": f"http://127.0.0.1:{port}/hook"}})
    started = time.monotonic()
    await deps.notifier.error_opened(tenant.site_id, error_record(), reopened=False)
    assert time.monotonic() - started < 0.05
    await asyncio.sleep(0.1)
    silent.close()


def test_a_signature_is_refused_outside_the_replay_window_or_for_another_body():
    body = b'{"type":"new_error"}'
    now = int(time.time())
    header = sign_webhook(WEBHOOK_SECRET, body, now)
    assert verify_webhook_signature(WEBHOOK_SECRET, header, body, now=now + 299)
    assert not verify_webhook_signature(WEBHOOK_SECRET, header, body, now=now + 301)
    assert not verify_webhook_signature(WEBHOOK_SECRET, header, body + b" ", now=now)
    assert not verify_webhook_signature("another-secret-value", header, body, now=now)


async def test_the_worker_builds_the_real_notifier_and_drains_it_before_closing(
        fetch: Fetch, settings, store, tenant: Tenant, receiver, redis_url: str):
    url, received, _ = receiver
    await configure(fetch, tenant, {"webhook": {"enabled": True, "url": url,
                                                "secret": WEBHOOK_SECRET}})
    clients = await open_worker_clients(dataclasses.replace(settings, redis_url=redis_url),
                                        store=store)
    assert type(clients.notifier) is Notifier
    await clients.notifier.error_opened(tenant.site_id, error_record(), reopened=False)
    await clients.close()  # no drain of our own: closing must let the delivery finish
    assert [r["valid"] for r in received] == [True]
    log = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications/deliveries",
                      token=tenant.token)
    assert log.json()["deliveries"][0]["status"] == "delivered"
