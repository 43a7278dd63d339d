"""Recording test helpers: rrweb segments, a controllable clock, the visitor context."""

from __future__ import annotations

import gzip
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

VISITOR = "visitor-1"
PAGE = "https://shop.example/products/blue-mug"


def rrweb_events(*, console: bool = True) -> list[dict[str, Any]]:
    """A small rrweb event array: meta, a full snapshot, an input, and maybe a console event."""
    events: list[dict[str, Any]] = [
        {"type": 4, "data": {"href": PAGE, "width": 1280, "height": 800}, "timestamp": 1},
        {"type": 2, "data": {"node": {"type": 0, "childNodes": []}}, "timestamp": 2},
        {"type": 3, "data": {"source": 5, "text": "***", "isChecked": False, "id": 42},
         "timestamp": 3},
    ]
    if console:
        events.append({"type": 6, "data": {"plugin": "rrweb/console@1", "payload": {
            "level": "log", "payload": ['"card 4111 1111 1111 1111"'], "trace": []}},
            "timestamp": 4})
    return events


def gzip_json(value: Any) -> bytes:
    """`value` as gzip-compressed JSON, like the loader sends a segment."""
    return gzip.compress(json.dumps(value).encode("utf-8"))


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self.now += timedelta(seconds=seconds)


def new_recording_id() -> str:
    """A client-made recording id."""
    return str(uuid.uuid4())


def context(**fields: Any) -> dict[str, Any]:
    """The visitor context every ingest body carries, plus `fields`."""
    return {"visitorId": VISITOR, "sessionId": "browser-session-1", "url": PAGE,
            "ip": "203.0.113.9", "userAgent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0",
            **fields}
