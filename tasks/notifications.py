"""Notifications to the Client: an error new or re-opened, the retention purge in trouble, and
alert episodes (tasks/alerts.py), by e-mail, signed webhook and Slack-compatible webhook; and a
member's digest (tasks/digests.py), by e-mail only.

`Notifier.error_opened` is called by the error worker after processing, `Notifier.alert` by the
alert evaluator. It only schedules the
work and returns, so a slow SMTP server or a dead webhook can never fail or slow error
processing. Each delivery is logged (documents/notifications.py), retried with exponential
backoff and jitter, and recorded as failed when the attempts run out; the dashboard reads that
log. Webhooks are JSON POSTs signed with HMAC-SHA256 over ``"<timestamp>.<body>"``:

    X-Visitor-Service-Signature: t=<unix seconds>,v1=<lowercase hex HMAC-SHA256>

Receivers recompute the HMAC with their secret, compare in constant time, and refuse a
timestamp more than SIGNATURE_TOLERANCE_SECONDS away from their clock (the replay window).
`verify_webhook_signature` is the reference implementation.

Webhook URLs pass the address guard (privacy/addresses.py) twice: `check_webhook_url` when
saved, and, unless WEBHOOK_ALLOW_PRIVATE_ADDRESSES is set, the guarded HTTP client at delivery,
so a name re-pointed at an internal address after it was saved (DNS rebinding) is refused at
delivery too.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import random
import smtplib
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from documents import notifications
from documents.accounts import new_id
from documents.store import Store
from errors import InvalidInput
from instants import format_instant
from privacy import addresses
from privacy.sealing import SealedSecretError, SecretSealer
from realtime.events import new_error_event_from_record
from tasks.digests import DigestMail

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Visitor-Service-Signature"
DELIVERY_HEADER = "X-Visitor-Service-Delivery"
EVENT_HEADER = "X-Visitor-Service-Event"
#: Receivers refuse signatures older (or newer) than this; retries sign afresh each attempt.
SIGNATURE_TOLERANCE_SECONDS = 300
#: Per-attempt network timeout for SMTP and webhook calls.
ATTEMPT_TIMEOUT_SECONDS = 10.0
#: Deliveries in flight at once per process; a burst of errors queues behind these.
MAX_CONCURRENT_DELIVERIES = 16
#: A retention notice's subject, by problem (tasks/purge.py).
RETENTION_PROBLEMS = {"failed": "The retention purge failed",
                      "behind": "The retention purge is behind",
                      "overdue": "The retention purge has not run"}


class DeliveryFailed(Exception):
    """One attempt did not deliver; the message is safe to store (no secrets)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        #: The HTTP status the receiver answered, when it answered.
        self.status = status


#: What an attempt returns: the HTTP status a receiver answered, None for e-mail.
Send = Callable[[str], Awaitable[int | None]]


async def check_webhook_url(url: str, *, allow_private: bool, field: str = "webhook.url"
                            ) -> None:
    """Raise InvalidInput (on `field`) when the URL has no http(s) host, or when its host is or
    resolves to an address the guard refuses (unless `allow_private`)."""
    try:
        addresses.url_host(url)
        if not allow_private:
            await addresses.check_url(url)
    except addresses.ForbiddenAddress as refused:
        raise InvalidInput(f"the webhook URL points to a {refused} address, which the service "
                           "does not call", field=field) from None
    except ValueError:  # UnicodeError included; also a port out of range
        raise InvalidInput("the webhook URL needs http(s) and a valid host and port",
                           field=field) from None


def sign_webhook(secret: str, body: bytes, timestamp: int) -> str:
    """The signature header value for `body` sent at `timestamp`."""
    digest = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={digest.hexdigest()}"


def verify_webhook_signature(secret: str, header: str, body: bytes, *, now: float | None = None,
                             tolerance: int = SIGNATURE_TOLERANCE_SECONDS) -> bool:
    """True when `header` signs `body` with `secret` and its timestamp is inside the window."""
    parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = sign_webhook(secret, body, timestamp).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))


class Notifier:
    """Delivers new/re-opened error notifications in the background."""

    def __init__(self, store: Store, sealer: SecretSealer, *, public_url: str,
                 max_attempts: int, retry_seconds: float,
                 allow_private_webhooks: bool = False) -> None:
        self._store = store
        self._allow_private_webhooks = allow_private_webhooks
        self._http: AsyncHTTPClient | None = None
        self._sealer = sealer
        self._public_url = public_url
        self._max_attempts = max_attempts
        self._retry_seconds = retry_seconds
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_DELIVERIES)

    async def error_opened(self, site_id: str, error: dict[str, Any], *, reopened: bool) -> None:
        """Schedule notifications for a new or re-opened error and return at once."""
        task = asyncio.create_task(self._notify(site_id, dict(error), reopened),
                                   name=f"notify-{site_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def retention_alert(self, site_id: str, *, problem: str, kinds: list[str],
                              since: datetime | None = None) -> None:
        """Schedule a notice that the retention purge failed, fell behind or is overdue (no run
        finished since `since`) for the site (tasks/purge.py) and return at once; `problem` is
        "failed", "behind" or "overdue"."""
        task = asyncio.create_task(self._notify_retention(site_id, problem, kinds, since),
                                   name=f"notify-retention-{site_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def alert(self, site_id: str, rule: dict[str, Any], event: dict[str, Any], *,
                    muted_addresses: Iterable[str] = ()) -> None:
        """Schedule an alert episode's deliveries on the rule's channels and return at once;
        `event` is what tasks/alerts.py built (figures and a page, no visitor's data). The
        e-mail leaves out `muted_addresses` (members who muted the rule for themselves)."""
        task = asyncio.create_task(self._notify_alert(site_id, rule, event,
                                                      set(map(str.lower, muted_addresses))),
                                   name=f"notify-alert-{site_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def site_link(self, site_id: str) -> str:
        """The dashboard's address of a site, under which its pages are."""
        return f"{self._public_url}/app/sites/{site_id}"

    async def digest(self, site_id: str, address: str, mail: DigestMail) -> None:
        """Schedule a member's digest (tasks/digests.py) to `address` through the site's
        e-mail channel, as plain text and HTML, logged like any delivery; return at once."""
        task = asyncio.create_task(self._notify_digest(site_id, address, mail),
                                   name=f"notify-digest-{site_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self, within: float) -> bool:
        """Wait for deliveries in flight; True when all finished within `within` seconds."""
        if not self._tasks:
            return True
        _, pending = await asyncio.wait(set(self._tasks), timeout=within)
        return not pending

    async def close(self) -> None:
        """Give deliveries in flight a few seconds, then cancel the rest (they stay logged)."""
        if not await self.drain(5.0):
            log.warning("notifications still in flight at shutdown; cancelling",
                        extra={"count": len(self._tasks)})
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._http is not None:
            self._http.close()
            self._http = None

    def _http_client(self) -> AsyncHTTPClient:
        # Created on first use, on the loop that delivers; an instance of its own, so the
        # guarded resolver never leaks into (or is closed with) the loop's shared client.
        if self._http is None:
            self._http = addresses.guarded_http_client(allow_private=self._allow_private_webhooks)
        return self._http

    async def _notify(self, site_id: str, error_doc: dict[str, Any], reopened: bool) -> None:
        try:
            channels = await notifications.channels_for_site(self._store, site_id)
            if not channels:
                return
            event = new_error_event_from_record(site_id, error_doc, reopened)
            senders: dict[str, Callable[[str], Awaitable[None]]] = {}
            email = channels.get("email")
            if email and email.get("enabled"):
                name = await notifications.site_name(self._store, site_id)
                senders["email"] = lambda _id: self._send_email(site_id, name, email, event)
            webhook = channels.get("webhook")
            if webhook and webhook.get("enabled"):
                senders["webhook"] = lambda delivery_id: self._send_webhook(
                    site_id, webhook, event, delivery_id)
            await asyncio.gather(*(
                self._deliver(site_id, channel, event, send) for channel, send in senders.items()
            ))
        except Exception:  # noqa: BLE001 - background boundary: log, never reach the worker
            log.exception("notification failed", extra={"siteId": site_id})

    async def _notify_retention(self, site_id: str, problem: str, kinds: list[str],
                                since: datetime | None) -> None:
        try:
            channels = await notifications.channels_for_site(self._store, site_id)
            if not channels:
                return
            event = {"type": f"retention_purge_{problem}", "id": new_id(), "siteId": site_id,
                     "at": format_instant(datetime.now(UTC)),
                     "kinds": sorted(kinds)}
            if since is not None:
                event["since"] = format_instant(since)
            link = f"{self._public_url}/app/sites/{site_id}/privacy"
            senders: dict[str, Callable[[str], Awaitable[None]]] = {}
            email = channels.get("email")
            if email and email.get("enabled"):
                name = await notifications.site_name(self._store, site_id)
                what = RETENTION_PROBLEMS[problem]
                text = (f"{what} on {name}.\n\n"
                        + (f"No run has finished since {event['since']}: data past its "
                           "retention is not being removed. Check that the process that "
                           "purges is running (the worker, where REDIS_URL is set).\n\n"
                           if since is not None else "")
                        + f"Kinds of data concerned: {', '.join(sorted(kinds))}\n\n"
                        f"See Privacy & exports: {link}\n")
                senders["email"] = lambda _id: self._send_text_email(
                    site_id, email, f"[{name}] {what}", text)
            webhook = channels.get("webhook")
            if webhook and webhook.get("enabled"):
                senders["webhook"] = lambda delivery_id: self._send_webhook(
                    site_id, webhook, event, delivery_id, link=link)
            await asyncio.gather(*(
                self._deliver(site_id, channel, event, send)
                for channel, send in senders.items()))
        except Exception:  # noqa: BLE001 - background boundary: log, never reach the purge
            log.exception("retention notification failed", extra={"siteId": site_id})

    async def _notify_alert(self, site_id: str, rule: dict[str, Any],
                            event: dict[str, Any], muted: set[str]) -> None:
        try:
            channels = await notifications.channels_for_site(self._store, site_id)
            if not channels:
                return
            link = f"{self._public_url}/app/sites/{site_id}/{event['page']}"
            event = {key: value for key, value in event.items() if key != "page"}
            name = await notifications.site_name(self._store, site_id)
            text = alert_text(name, event, link)
            wanted = set(rule.get("channels") or ())
            senders: dict[str, Send] = {}
            email = channels.get("email")
            recipients = [address for address in (email or {}).get("recipients") or ()
                          if address.lower() not in muted]
            if "email" in wanted and email and email.get("enabled") and recipients:
                senders["email"] = lambda _id: self._send_text_email(
                    site_id, {**email, "recipients": recipients}, f"[{name}] {event['title']}",
                    text)
            webhook = channels.get("webhook")
            if "webhook" in wanted and webhook and webhook.get("enabled"):
                senders["webhook"] = lambda delivery_id: self._send_webhook(
                    site_id, webhook, event, delivery_id, link=link)
            slack = channels.get("slack")
            if "slack" in wanted and slack and slack.get("enabled"):
                senders["slack"] = lambda _id: self._send_slack(site_id, slack, text)
            await asyncio.gather(*(
                self._deliver(site_id, channel, event, send, rule_id=rule["_id"])
                for channel, send in senders.items()))
        except Exception:  # noqa: BLE001 - background boundary: log, never reach the evaluator
            log.exception("alert notification failed", extra={"siteId": site_id})

    async def _notify_digest(self, site_id: str, address: str, mail: DigestMail) -> None:
        try:
            email = (await notifications.channels_for_site(self._store, site_id) or {}).get(
                "email")
            if not email or not email.get("enabled"):
                return
            event = {**mail.event, "id": new_id(), "at": format_instant(datetime.now(UTC))}
            await self._deliver(site_id, "email", event, lambda _id: self._send_text_email(
                site_id, {**email, "recipients": [address]}, mail.subject, mail.text,
                html=mail.html))
        except Exception:  # noqa: BLE001 - background boundary: log, never reach the evaluator
            log.exception("digest notification failed", extra={"siteId": site_id})

    async def send_test(self, site_id: str, channel: str) -> str:
        """Deliver a test message on one channel now, in one attempt, logged like any delivery;
        returns the delivery's id. InvalidInput when the channel is not enabled."""
        channels = await notifications.channels_for_site(self._store, site_id) or {}
        config = channels.get(channel)
        if not config or not config.get("enabled"):
            raise InvalidInput(f"the {channel} channel is not enabled", field="channel")
        name = await notifications.site_name(self._store, site_id)
        link = f"{self._public_url}/app/sites/{site_id}/alerts"
        event = {"type": "alert.test", "id": new_id(), "siteId": site_id,
                 "at": format_instant(datetime.now(UTC)), "title": "Test message",
                 "figures": {}}
        text = alert_text(name, event, link)
        sends: dict[str, Send] = {
            "email": lambda _id: self._send_text_email(site_id, config,
                                                       f"[{name}] Test message", text),
            "webhook": lambda delivery_id: self._send_webhook(site_id, config, event,
                                                              delivery_id, link=link),
            "slack": lambda _id: self._send_slack(site_id, config, text)}
        return await self._deliver(site_id, channel, event, sends[channel], attempts=1)

    async def _deliver(self, site_id: str, channel: str, event: dict[str, Any],
                       send: Send, *, rule_id: str | None = None,
                       attempts: int | None = None) -> str:
        """Deliver with retries (`attempts`, else the configured number); returns the id."""
        error = event.get("error") or {}
        delivery_id = await notifications.start_delivery(
            self._store, site_id=site_id, channel=channel,
            error_id=event["id"] if error else None, fingerprint=error.get("fingerprint"),
            reopened=bool(error.get("reopened")),
            event="new_error" if error else event["type"], rule_id=rule_id)
        attempts = attempts or self._max_attempts
        for attempt in range(1, attempts + 1):
            try:
                async with self._slots:
                    status = await send(delivery_id)
            except (DeliveryFailed, smtplib.SMTPException, OSError, SealedSecretError) as exc:
                final = attempt == attempts
                reason = _describe(exc)
                await notifications.record_attempt(
                    self._store, delivery_id, error=reason, final=final,
                    response_status=exc.status if isinstance(exc, DeliveryFailed) else None)
                log.warning("notification attempt failed", extra={
                    "siteId": site_id, "channel": channel, "deliveryId": delivery_id,
                    "attempt": attempt, "final": final, "error": reason})
                if final:
                    return delivery_id
                delay = self._retry_seconds * 2 ** (attempt - 1)
                await asyncio.sleep(random.uniform(delay / 2, delay))
            else:
                await notifications.record_attempt(self._store, delivery_id, error=None,
                                                   final=True, response_status=status)
                return delivery_id
        return delivery_id

    def _dashboard_link(self, site_id: str, error_id: str) -> str:
        return f"{self._public_url}/dashboard/sites/{site_id}/errors/{error_id}"

    async def _send_email(self, site_id: str, site_name: str, config: dict[str, Any],
                          event: dict[str, Any]) -> int | None:
        summary = event["error"]
        what = "Re-opened error" if summary["reopened"] else "New error"
        # Header values must be single lines (`_send_text_email`); error messages are
        # attacker-influenced text.
        return await self._send_text_email(
            site_id, config, f"[{site_name}] {what}: {summary['message']}",
            f"{what} on {site_name}\n\n"
            f"Message: {summary['message']}\n"
            f"Occurrences: {summary['occurrenceCount']}\n"
            f"Status: {summary['status']}\n"
            f"Fingerprint: {summary['fingerprint']}\n\n"
            f"{self._dashboard_link(site_id, event['id'])}\n")

    async def _send_text_email(self, site_id: str, config: dict[str, Any], subject: str,
                               text: str, *, html: str | None = None) -> None:
        password = ""
        if config.get("smtpPasswordSealed"):
            password = self._sealer.open(config["smtpPasswordSealed"],
                                         notifications.secret_purpose(site_id, "email"))
        message = EmailMessage()
        message["Subject"] = _one_line(subject)[:200]
        try:
            message["From"] = config["from"]
            message["To"] = ", ".join(config["recipients"])
        except ValueError:  # saved before addresses were checked for control characters
            raise DeliveryFailed("an address of the channel cannot be written in a mail "
                                 "header; save the channel again") from None
        message.set_content(text)
        if html is not None:
            message.add_alternative(html, subtype="html")
        await asyncio.to_thread(_send_smtp, config, password, message)

    async def _send_webhook(self, site_id: str, config: dict[str, Any], event: dict[str, Any],
                            delivery_id: str, *, link: str | None = None) -> int:
        secret = self._sealer.open(config["secretSealed"],
                                   notifications.secret_purpose(site_id, "webhook"))
        body = json.dumps(
            {**event, "dashboardUrl": link or self._dashboard_link(site_id, event["id"])},
            separators=(",", ":")).encode()
        request = HTTPRequest(
            config["url"], method="POST", body=body, follow_redirects=False,
            connect_timeout=ATTEMPT_TIMEOUT_SECONDS, request_timeout=ATTEMPT_TIMEOUT_SECONDS,
            headers={"Content-Type": "application/json", "User-Agent": "visitor-service-webhook",
                     SIGNATURE_HEADER: sign_webhook(secret, body, int(time.time())),
                     DELIVERY_HEADER: delivery_id, EVENT_HEADER: event["type"]},
        )
        return await self._post(request)

    async def _send_slack(self, site_id: str, config: dict[str, Any], text: str) -> int:
        # Slack, Mattermost and Discord's /slack endpoint all read {"text": ...} as markdown.
        url = self._sealer.open(config["urlSealed"], notifications.secret_purpose(site_id,
                                                                                  "slack"))
        request = HTTPRequest(
            url, method="POST", body=json.dumps({"text": text}).encode(),
            follow_redirects=False, connect_timeout=ATTEMPT_TIMEOUT_SECONDS,
            request_timeout=ATTEMPT_TIMEOUT_SECONDS,
            headers={"Content-Type": "application/json", "User-Agent": "visitor-service-webhook"})
        return await self._post(request)

    async def _post(self, request: HTTPRequest) -> int:
        try:
            response = await self._http_client().fetch(request, raise_error=False)
        except addresses.ForbiddenAddress as refused:
            raise DeliveryFailed(f"refused: the webhook host resolves to a {refused} "
                                 "address") from None
        if not 200 <= response.code < 300:
            raise DeliveryFailed(f"HTTP {response.code}" if response.code != 599
                                 else f"connection failed: {type(response.error).__name__}",
                                 status=response.code if response.code != 599 else None)
        return response.code


def alert_text(site_name: str, event: dict[str, Any], link: str) -> str:
    """An alert as plain text: what happened, its figures, where to look (e-mail and Slack)."""
    lines = [f"{event['title']} on {site_name}", ""]
    if event.get("rule"):
        lines.append(f"Rule: {event['rule']['name']}")
    lines += [f"{name}: {value}" for name, value in event.get("figures", {}).items()
              if value is not None]
    return "\n".join([*lines, "", link, ""])


def _send_smtp(config: dict[str, Any], password: str, message: EmailMessage) -> None:
    security = config.get("smtpSecurity", "starttls")
    host, port = config["smtpHost"], int(config["smtpPort"])
    context = ssl.create_default_context()
    smtp: smtplib.SMTP
    if security == "tls":
        smtp = smtplib.SMTP_SSL(host, port, timeout=ATTEMPT_TIMEOUT_SECONDS, context=context)
    else:
        smtp = smtplib.SMTP(host, port, timeout=ATTEMPT_TIMEOUT_SECONDS)
    with smtp:
        if security == "starttls":
            smtp.starttls(context=context)
        if config.get("smtpUsername"):
            smtp.login(config["smtpUsername"], password)
        smtp.send_message(message)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _describe(exc: BaseException) -> str:
    # Exception texts from smtplib and the HTTP client carry codes and server replies, never
    # our secrets; the class name keeps the log readable when the text is empty.
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
