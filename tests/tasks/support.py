"""Helpers for the error-pipeline tests: payload factory, recorders and polling."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.support.app import Fetch, Tenant

FULL_IP = "198.51.100.123"
#: When the error happened: yesterday 10:00 UTC (a client time over 30 days old is taken as the
#: time of receipt).
OCCURRED_AT = f"{(datetime.now(UTC) - timedelta(days=1)).date().isoformat()}T10:00:00Z"
ANONYMISED_IP = "198.51.100.0"


def js_error(**extra: Any) -> dict[str, Any]:
    """A JavaScript error as the shop server forwards it."""
    return {
        "visitorId": "v-1",
        "sessionId": "s-1",
        "url": "https://shop.example/checkout",
        "ip": FULL_IP,
        "userAgent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0",
        "wpUserId": 7,
        "gpc": False,
        "consent": "granted",
        "source": "javascript",
        "type": "TypeError",
        "message": "Cannot read properties of undefined (reading 'price') at item 42",
        "stack": ("TypeError: Cannot read properties of undefined\n"
                  "    at renderCart (https://shop.example/assets/cart.js:120:15)\n"
                  "    at Array.forEach (<anonymous>)\n"
                  "    at refresh (https://shop.example/assets/cart.js:88:3)\n"
                  "    at https://shop.example/assets/app.js:10:1"),
        "occurredAt": OCCURRED_AT,
        "context": {"email": "ann@example.com", "request": {"remoteAddr": FULL_IP}},
        **extra,
    }


async def post_error(fetch: Fetch, tenant: Tenant, body: Any = None, **kwargs: Any) -> Any:
    """POST /ingest/errors with the tenant's key."""
    headers = {"X-Service-Key": tenant.api_key, **kwargs.pop("headers", {})}
    return await fetch("/ingest/errors", "POST", json_body=js_error() if body is None else body,
                       headers=headers, **kwargs)


class RecordingNotifier:
    """Remembers every notification instead of sending it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], bool]] = []

    async def error_opened(self, site_id: str, error: dict[str, Any], *, reopened: bool) -> None:
        """Record the call."""
        self.calls.append((site_id, error, reopened))


class FailingNotifier:
    """A notification channel that is down."""

    async def error_opened(self, site_id: str, error: dict[str, Any], *, reopened: bool) -> None:
        """Fail like an unreachable mail server."""
        raise ConnectionRefusedError("smtp down")


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 20.0) -> None:
    """Wait until `check()` is true, failing after `within` seconds."""
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within} s")
        await asyncio.sleep(0.02)
