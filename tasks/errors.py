"""Error grouping: from one queued job to a counted aggregate, a session link and an announcement.

`error_job` turns an accepted `/ingest/errors` body into the job that goes on the queue (with
its own id, and with the client address already anonymised: the full address never reaches the
queue). `process_error` is what a worker runs for one job, on either queue back-end; it is
idempotent per job, which is what makes `acks_late` and retries safe. See docs/decisions.md,
"Error fingerprints", for the grouping rule.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from config.metrics import Metrics
from derived import daily_figures, derivation
from documents import error_records
from documents.accounts import new_id
from documents.store import Store
from errors import InvalidInput
from ingest.intake import parse_time
from instants import format_instant
from privacy.ipaddr import OwnHosts, address_spellings, anonymise_addresses_in
from privacy.url_secrets import DEFAULT_SECRET_PARAMETERS, strip_secrets_in_text
from realtime.bus import EventBus
from realtime.events import new_error_event_from_record
from tasks.notify_port import Notifier

log = logging.getLogger(__name__)

#: How many of the innermost stack frames take part in the fingerprint. Deeper frames differ
#: between callers of the same faulty function and would split one fault into many.
FINGERPRINT_FRAMES = 3

_NORMALISERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I), "<url>"),
    # The local part takes every character RFC 5322 allows unquoted ("o'brien@", "a+b@").
    (re.compile(r"[\w.!#$%&'*+/=?^`{|}~-]+@[\w-]+(?:\.[\w-]+)+"), "<email>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I),
     "<uuid>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b"), "<ip>"),
    (re.compile(r"(?<![\w:])[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){2,7}(?![\w:])", re.I), "<ip>"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.I), "<hex>"),
    # Hex runs with at least one digit and one letter: object ids, hashes, bundle hashes in file
    # names. A run of digits alone is a number: "Order 99999" and "Order 100000" are one fault.
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{6,}\b", re.I), "<hex>"),
    (re.compile(r"\d+"), "<n>"),
    (re.compile(r"\s+"), " "),
)

_FRAME_PATTERNS = (
    # V8: "    at fn (https://shop.example/app.js:10:5)" or "    at https://.../app.js:10:5"
    re.compile(r"^\s*at (?:(?P<function>.+?) \()?(?P<file>[^\s()]+?)(?::\d+){1,2}\)?\s*$"),
    # SpiderMonkey / JavaScriptCore: "fn@https://shop.example/app.js:10:5"
    re.compile(r"^\s*(?P<function>[^@\s]*)@(?P<file>\S+?)(?::\d+){1,2}\s*$"),
    # PHP: "#0 /var/www/wp-content/plugins/x/file.php(12): Class->method()"
    re.compile(r"^\s*#\d+ (?P<file>[^(]+)\(\d+\): (?P<function>[^(]+)\("),
)

#: The diagnostic context is copied onto the aggregate at every occurrence; a bound keeps one
#: noisy plugin from turning each error document into a quarter-megabyte write.
MAX_CONTEXT_BYTES = 64 * 1024

def normalise_message(message: str) -> str:
    """The message with what varies between occurrences of one fault replaced by placeholders."""
    for pattern, placeholder in _NORMALISERS:
        message = pattern.sub(placeholder, message)
    return message.strip()


def _basename(file: str) -> str:
    path = file.split("?", 1)[0].split("#", 1)[0].rstrip("/")
    return normalise_message(path.rsplit("/", 1)[-1].rsplit("\\", 1)[-1])


def top_frames(frames: Iterable[dict[str, Any]] | None, stack: str | None) -> list[str]:
    """`basename:function` of the innermost frames, from `frames` or else parsed from `stack`."""
    found: list[str] = []
    if frames:
        for frame in frames:
            found.append(f"{_basename(str(frame.get('file') or ''))}:{frame.get('function') or ''}")
    elif stack:
        for line in stack.splitlines():
            for pattern in _FRAME_PATTERNS:
                match = pattern.match(line)
                if match:
                    function = (match.group("function") or "").strip()
                    found.append(f"{_basename(match.group('file'))}:{function}")
                    break
    return found[:FINGERPRINT_FRAMES]


def stack_text(stack: str | None, frames: Iterable[dict[str, Any]] | None) -> str | None:
    """The stack as text: as sent, or else the parsed frames written as PHP writes a trace.

    The plugin sends a PHP error's backtrace as frames only; written out like this, its stack
    reads like any other wherever a stack is shown (the error detail, the export).
    """
    if stack or not frames:
        return stack
    lines = []
    for index, frame in enumerate(frames):
        where = str(frame.get("file") or "[internal function]")
        if frame.get("line") is not None:
            column = f":{frame['column']}" if frame.get("column") is not None else ""
            where += f"({frame['line']}{column})"
        function = f": {frame['function']}()" if frame.get("function") else ""
        lines.append(f"#{index} {where}{function}")
    return "\n".join(lines)


def fingerprint(error_type: str, message: str, frames: Iterable[dict[str, Any]] | None,
                stack: str | None) -> str:
    """sha256 over type, normalised message and the top frames (no line numbers)."""
    parts = [error_type.strip(), normalise_message(message),
             *top_frames(frames, stack)]
    # JSON, not a newline join: a type or function name may itself hold a newline, and a join
    # would let ("A", "B", frame) and ("A\nB", frame) hash alike.
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()


def _scrubbed(value: Any, replace: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return replace(value)
    if isinstance(value, dict):
        return {key: _scrubbed(item, replace) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrubbed(item, replace) for item in value]
    return value


def _address_scrubber(address: tuple[tuple[str, ...], str] | None, own: OwnHosts,
                      secrets: frozenset[str]) -> Callable[[str], str]:
    """Replace the visitor's own address (`address_spellings`, however written) and every IPv4
    and IPv6 address in the text with its anonymised form, but for the site's `own` hosts in
    its URLs; strip the `secrets` parameters from every URL in it."""

    def replace(text: str) -> str:
        text = strip_secrets_in_text(text, secrets)
        # Every address written out holds a dot or a colon; most strings of an error (its type,
        # source, ids) hold neither and need no search.
        if "." not in text and ":" not in text:
            return text
        return anonymise_addresses_in(text, address, own)

    return replace


def error_job(site_id: str, body: dict[str, Any], *, now: datetime | None = None,
              device: dict[str, str | None] | None = None, own: OwnHosts = frozenset(),
              secrets: frozenset[str] = DEFAULT_SECRET_PARAMETERS) -> dict[str, Any]:
    """The queue job for an accepted error: its own id, no full IP address anywhere, and no
    secret parameter (`secrets`, privacy/url_secrets.py) in any URL its texts hold: the page,
    the context's request URL, a message or a stack."""
    context = body.get("context")
    if context:
        context_size = len(json.dumps(context, separators=(",", ":")))
        if context_size > MAX_CONTEXT_BYTES:
            raise InvalidInput(f"context: larger than {MAX_CONTEXT_BYTES} bytes",
                               field="context")
    # Refused here (InvalidInput) rather than by the worker, which could only fail the job.
    parse_time(body.get("occurredAt"))
    payload = dict(body)
    address = address_spellings(payload.pop("ip", None))
    return {
        "jobId": new_id(),
        "siteId": site_id,
        "receivedAt": format_instant(now or datetime.now(UTC)),
        "ipAddress": address[1] if address is not None else None,
        "error": _scrubbed(payload, _address_scrubber(address, own, secrets)),
        "device": device or {},
    }


@dataclass(frozen=True)
class Processed:
    """What one job did: the aggregate, and whether it was new, re-opened or counted."""

    error: dict[str, Any]
    created: bool
    reopened: bool
    counted: bool


def occurrence_from_job(job: dict[str, Any]) -> error_records.Occurrence:
    """The occurrence a job describes, fingerprinted."""
    error = job["error"]
    received = parse_time(job.get("receivedAt"))
    wp_user_id = error.get("wpUserId")
    return error_records.Occurrence(
        job_id=job["jobId"],
        site_id=job["siteId"],
        fingerprint=fingerprint(error["type"], error["message"], error.get("frames"),
                                error.get("stack")),
        type=error["type"],
        # The fingerprint above reads the message as sent, so a fault keeps its group whatever
        # the title shows; the title drops a type the browser repeated ("Uncaught TypeError:").
        message=error_records.title_message(error["type"], error["message"]),
        source=error["source"],
        occurred_at=parse_time(error.get("occurredAt"), now=received),
        visitor_id=error.get("visitorId"),
        session_id=error.get("sessionId"),
        wp_user_id=str(wp_user_id) if wp_user_id not in (None, "", 0) else None,
        ip_address=job.get("ipAddress"),
        context=error.get("context") or {},
        stack=stack_text(error.get("stack"), error.get("frames")),
        url=error.get("url"),
        device=job.get("device") or {},
    )


async def keep_occurrence(store: Store, occurrence: error_records.Occurrence) -> bool:
    """Store what the visitor hit, with the fact that counts it on its day and on the
    recording it happened in (folded in later, derived/derivation.py), together and once
    per job."""

    async def keep(session: Any) -> bool:
        if not await error_records.record_occurrence(store, occurrence, session=session):
            return False
        # Five worker threads keep occurrences at once: a day's or a recording's shared
        # document updated here would make them conflict; an insert of its own cannot.
        await derivation.add_fact(store, occurrence.site_id, occurrence.visitor_id,
                                  daily_figures.ERROR, [{"at": occurrence.occurred_at,
                                                         "errorId": occurrence.error_id}],
                                  sessionId=occurrence.session_id, session=session)
        return True

    return bool(await store.transaction(keep))


async def process_error(store: Store, job: dict[str, Any], *, notifier: Notifier, bus: EventBus,
                        metrics: Metrics, now: datetime | None = None) -> Processed:
    """Count one job's error once, link it, and announce it when it is new or re-opened."""
    now = now or datetime.now(UTC)
    occurrence = occurrence_from_job(job)
    # The aggregate's upsert goes last: once it has counted this job, nothing left can fail
    # and make a retry skip the announcement.
    await keep_occurrence(store, occurrence)
    await error_records.link_session(store, occurrence)
    counted = await error_records.count_occurrence(store, occurrence, now)
    error = counted.error
    reopened_doc = await error_records.reopen_if_resolved(store, error, occurrence.job_id, now)
    if reopened_doc is not None:
        error = reopened_doc
    result = Processed(error, created=counted.created, reopened=reopened_doc is not None,
                       counted=counted.applied)
    metrics.count("error_jobs_processed_total", "Error jobs processed, by effect.",
                  effect=_effect(result))
    if result.created or result.reopened:
        await announce(occurrence.site_id, result, notifier=notifier, bus=bus, now=now)
    return result


def _effect(result: Processed) -> str:
    if not result.counted:
        return "already_counted"
    if result.created:
        return "created"
    return "reopened" if result.reopened else "incremented"


async def announce(site_id: str, result: Processed, *, notifier: Notifier, bus: EventBus,
                   now: datetime) -> None:
    """Notify and publish `new_error`; failures are logged, never retried, never raised."""
    error = result.error
    try:
        await notifier.error_opened(site_id, error, reopened=result.reopened)
    except Exception:  # noqa: BLE001 - a notification channel must not fail the counted job
        log.exception("error notification failed", extra={"siteId": site_id,
                                                           "errorId": error["_id"]})
    event = new_error_event_from_record(site_id, error, result.reopened, when=now)
    # Two fields beyond the contract's minimum, so the dashboard can label the row.
    event["error"].update(type=error["type"], new=result.created)
    try:
        await bus.publish(site_id, event)
    except Exception:  # noqa: BLE001 - the write is done; a lost live event is only logged
        log.exception("publishing new_error failed", extra={"siteId": site_id,
                                                            "errorId": error["_id"]})
