"""Account mail (invitations, password resets) through the operator's SMTP server, SMTP_URL.

`AccountMailer.send` logs the delivery (documents/account_mail.py) and returns at once; the
message goes out in the background with bounded retries, backoff and jitter, so a slow SMTP
server neither slows a request nor, for password resets, tells by timing whether an address has
an account. Without SMTP_URL nothing is sent and callers show the link to the person asking.
"""

from __future__ import annotations

import asyncio
import logging
import random
import smtplib
import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from urllib.parse import parse_qs, unquote, urlsplit

from documents import account_mail
from documents.store import Store

log = logging.getLogger(__name__)

#: Per-attempt network timeout.
ATTEMPT_TIMEOUT_SECONDS = 10.0
#: SMTP_URL schemes and the transport security each means.
SECURITY_BY_SCHEME = {"smtp": "starttls", "smtps": "tls", "smtp+plain": "none"}


@dataclass(frozen=True)
class SmtpServer:
    """Where and how to send, parsed from SMTP_URL."""

    host: str
    port: int
    security: str
    username: str
    password: str
    sender: str


def parse_smtp_url(url: str, public_url: str) -> SmtpServer:
    """The server an SMTP_URL names, sending from its `from` or from visitor-service@ the
    service's own host; ValueError says what is wrong (never echoing the URL, which may hold
    a password)."""
    parts = urlsplit(url)
    if parts.scheme not in SECURITY_BY_SCHEME:
        raise ValueError("must start with smtp:// (STARTTLS), smtps:// (TLS) or smtp+plain:// "
                         "(no encryption, for a relay on the same host)")
    if not parts.hostname:
        raise ValueError("must name a host")
    security = SECURITY_BY_SCHEME[parts.scheme]
    port = parts.port or {"starttls": 587, "tls": 465, "none": 25}[security]
    default_sender = f"visitor-service@{urlsplit(public_url).hostname or 'localhost'}"
    sender = parse_qs(parts.query).get("from", [default_sender])[0]
    return SmtpServer(parts.hostname, port, security, unquote(parts.username or ""),
                      unquote(parts.password or ""), sender)


def _send_smtp(server: SmtpServer, message: EmailMessage) -> None:
    context = ssl.create_default_context()
    smtp: smtplib.SMTP
    if server.security == "tls":
        smtp = smtplib.SMTP_SSL(server.host, server.port, timeout=ATTEMPT_TIMEOUT_SECONDS,
                                context=context)
    else:
        smtp = smtplib.SMTP(server.host, server.port, timeout=ATTEMPT_TIMEOUT_SECONDS)
    with smtp:
        if server.security == "starttls":
            smtp.starttls(context=context)
        if server.username:
            smtp.login(server.username, server.password)
        smtp.send_message(message)


class AccountMailer:
    """Sends account mail in the background when an SMTP server is configured."""

    def __init__(self, store: Store, server: SmtpServer | None, *, max_attempts: int,
                 retry_seconds: float) -> None:
        self._store = store
        self._server = server
        self._max_attempts = max_attempts
        self._retry_seconds = retry_seconds
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def configured(self) -> bool:
        """True when mail can be sent (SMTP_URL is set)."""
        return self._server is not None

    async def send(self, *, kind: str, account_id: str | None, to: str, subject: str,
                   text: str) -> None:
        """Log the delivery and send it in the background; returns at once."""
        if self._server is None:
            raise RuntimeError("no SMTP server configured")
        delivery_id = await account_mail.start_delivery(self._store, kind=kind,
                                                        account_id=account_id)
        message = EmailMessage()
        message["Subject"] = " ".join(subject.split())
        message["From"] = self._server.sender
        message["To"] = to
        message.set_content(text)
        task = asyncio.create_task(self._deliver_logged(delivery_id, kind, message),
                                   name=f"account-mail-{kind}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver_logged(self, delivery_id: str, kind: str, message: EmailMessage
                              ) -> None:
        try:
            await self._deliver(delivery_id, kind, message)
        except Exception:  # noqa: BLE001 - background boundary: log, never reach a request
            log.exception("account mail failed", extra={"deliveryId": delivery_id, "kind": kind})

    async def _deliver(self, delivery_id: str, kind: str, message: EmailMessage) -> None:
        assert self._server is not None
        for attempt in range(1, self._max_attempts + 1):
            try:
                await asyncio.to_thread(_send_smtp, self._server, message)
            except (smtplib.SMTPException, OSError) as exc:
                final = attempt == self._max_attempts
                # smtplib's texts carry codes and the server's replies, not the message.
                reason = f"{type(exc).__name__}: {exc}".strip()[:300]
                await account_mail.record_attempt(self._store, delivery_id, error=reason,
                                                  final=final)
                log.warning("account mail attempt failed", extra={
                    "deliveryId": delivery_id, "kind": kind, "attempt": attempt,
                    "final": final, "error": reason})
                if final:
                    return
                delay = self._retry_seconds * 2 ** (attempt - 1)
                await asyncio.sleep(random.uniform(delay / 2, delay))
            else:
                await account_mail.record_attempt(self._store, delivery_id, error=None,
                                                  final=True)
                return

    async def close(self) -> None:
        """Give deliveries in flight a few seconds, then cancel the rest (they stay logged)."""
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=5.0)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
