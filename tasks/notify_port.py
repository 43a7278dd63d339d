"""The notification port: what the error pipeline calls when an error is new or re-opened.

Delivery (e-mail, webhooks) lives in tasks/notifications.py; the pipeline only knows this
protocol, so processing never waits on, or fails because of, a mail server.
"""

from __future__ import annotations

from typing import Any, Protocol


class Notifier(Protocol):
    """Tells the site's owners that an error is new or has come back."""

    async def error_opened(self, site_id: str, error: dict[str, Any], *, reopened: bool) -> None:
        """Notify about one new (`reopened=False`) or re-opened error."""


class SilentNotifier:
    """The default until a delivery channel is configured: notifies nobody."""

    async def error_opened(self, site_id: str, error: dict[str, Any], *, reopened: bool) -> None:
        """Do nothing."""
