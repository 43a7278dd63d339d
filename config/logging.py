"""Logging as JSON lines, with secrets redacted before any record is written.

Tornado's access log prints full URIs and libraries sometimes log headers, so redaction sits in
a filter on the handler (it sees every record, whoever logged it) rather than at call sites.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TextIO

from tornado.web import RequestHandler

from instants import format_instant

REDACTED = "[redacted]"

#: Headers whose values are credentials; matched case-insensitively in "Name: value" text.
SENSITIVE_HEADERS = (
    "authorization", "cookie", "set-cookie", "x-service-key", "proxy-authorization",
)

#: Query/form parameter names whose values are credentials.
SENSITIVE_PARAMS = (
    "key", "token", "apikey", "api_key", "access_token", "refresh_token", "ticket",
    "password", "secret", "signature",
)

_HEADER_RE = re.compile(
    r"(?i)\b(" + "|".join(re.escape(h) for h in SENSITIVE_HEADERS) + r")(\"?\s*[:=]\s*\"?)"
    r"([^\r\n\"',}]+)"
)
_PARAM_RE = re.compile(
    r"(?i)([?&;]|\b)(" + "|".join(re.escape(p) for p in SENSITIVE_PARAMS) + r")=([^&\s\"']+)"
)
_BEARER_RE = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]+")
_SERVICE_KEY_RE = re.compile(r"\bsk_[A-Za-z0-9_-]{8,}")


def redact(text: str) -> str:
    """Replace every credential-looking value in `text` with a marker."""
    text = _HEADER_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _PARAM_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}={REDACTED}", text)
    text = _BEARER_RE.sub(f"Bearer {REDACTED}", text)
    return _SERVICE_KEY_RE.sub(REDACTED, text)


#: Path segments that follow one of these name a visitor: a visitor's identifier is visitor data.
_VISITOR_SEGMENT_RE = re.compile(r"(/visitors/)[^/?#]+")


def loggable_uri(uri: str) -> str:
    """The URI as logs may keep it: visitor ids in the path and every query value replaced.

    Logs outlive erasure, so they hold only our own record ids: a search (`?q=` with an e-mail
    address), a visitor id or any other value a visitor's data may be in never reaches them.
    """
    path, _, query = uri.partition("?")
    path = _VISITOR_SEGMENT_RE.sub(rf"\1{REDACTED}", path)
    if not query:
        return path
    names = [part.partition("=")[0] for part in query.split("&") if part]
    return path + "?" + "&".join(f"{name}={REDACTED}" for name in names)


class JsonLinesFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and any `extra` context."""

    _STANDARD = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": format_instant(datetime.fromtimestamp(record.created, UTC)),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in self._STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return redact(json.dumps(entry, default=str, ensure_ascii=False))


def configure_logging(level: str, stream: TextIO | None = None) -> logging.Handler:
    """Send every logger's records through one redacting JSON-lines handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLinesFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    return handler


access_log = logging.getLogger("visitor_service.access")


def log_request(handler: RequestHandler) -> None:
    """Tornado `log_function`: the access log line, with the URI redacted and no headers."""
    request = handler.request
    log_access(request.method or "", request.uri or "", handler.get_status(),
               request.request_time)


def log_access(method: str, uri: str, status: int, seconds: Callable[[], float]) -> None:
    """The access log line of one answered request; `seconds` gives its duration when logged."""
    level = logging.INFO if status < 400 else logging.WARNING if status < 500 else logging.ERROR
    if not access_log.isEnabledFor(level):
        return  # spares the redaction on every request when access lines are not wanted
    access_log.log(
        level,
        "%s %s %d",
        method,
        redact(loggable_uri(uri)),
        status,
        extra={"duration_ms": round(1000.0 * seconds(), 2)},
    )
