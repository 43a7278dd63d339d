"""A real local SMTP server (aiosmtpd) that keeps what it receives, for account mail tests."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from contextlib import contextmanager
from email import message_from_bytes
from email.message import Message
from typing import Any

from aiosmtpd.controller import Controller

from tests.support.processes import free_port


class Mailbox:
    """An aiosmtpd handler that keeps every message it receives."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        self.messages.append(message_from_bytes(envelope.content))
        return "250 OK"

    async def wait_for(self, to: str) -> Message:
        """The first message to `to`, waiting up to ten seconds for it to arrive."""
        for _ in range(200):
            for message in self.messages:
                if message["To"] == to:
                    return message
            await asyncio.sleep(0.05)
        raise AssertionError(f"no mail to {to} within ten seconds")


def link_in(message: Message) -> str:
    """The one dashboard link in a plain-text message."""
    text = message.get_payload(decode=True).decode()
    found = re.findall(r"https?://\S+/app/\S+", text)
    assert len(found) == 1, text
    return found[0]


@contextmanager
def running_smtp_server() -> Iterator[tuple[Mailbox, int]]:
    """A local SMTP server without TLS or login: its mailbox and port."""
    mailbox = Mailbox()
    port = free_port()
    controller = Controller(mailbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield mailbox, port
    finally:
        controller.stop()
