"""The live event contract (docs/events.md): the only two event types and their payloads.

Producers build events with `new_error_event` and `new_lead_event`; both buses call
`validate_event` before publishing, so a malformed or unknown event fails loudly at the one
place it is produced instead of reaching dashboards. Dispatch is by table (`REQUIRED`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from instants import format_instant

#: Longest error message carried in an event; the dashboard shows a one-line summary and the
#: full record is one API call away, so a huge message must not inflate every frame.
MAX_MESSAGE_CHARS = 500

#: Field -> accepted types, per event type; the summary object is checked one level down.
REQUIRED: dict[str, dict[str, tuple[type, ...]]] = {
    "new_error": {"siteId": (str,), "id": (str,), "time": (str,), "error": (dict,)},
    "new_lead": {"siteId": (str,), "id": (str,), "time": (str,), "lead": (dict,)},
}

SUMMARY_FIELDS: dict[str, tuple[str, dict[str, tuple[type, ...]]]] = {
    "new_error": ("error", {
        "fingerprint": (str,), "message": (str,), "occurrenceCount": (int,), "status": (str,),
        "reopened": (bool,),
    }),
    "new_lead": ("lead", {
        "id": (str,), "displayName": (str, type(None)), "visitorId": (str, type(None)),
    }),
}

EVENT_TYPES = frozenset(REQUIRED)


class InvalidEvent(ValueError):
    """An event outside the contract; a programming error in the producer."""


def validate_event(site_id: str, event: dict[str, Any]) -> None:
    """Raise InvalidEvent unless `event` is a contract event for `site_id`."""
    kind = event.get("type")
    if kind not in REQUIRED:
        raise InvalidEvent(f"unknown event type {kind!r}")
    _check_fields(kind, event, REQUIRED[kind])
    if event["siteId"] != site_id:
        raise InvalidEvent(f"{kind}: siteId {event['siteId']!r} is not the channel {site_id!r}")
    summary_key, fields = SUMMARY_FIELDS[kind]
    _check_fields(f"{kind}.{summary_key}", event[summary_key], fields)


def _check_fields(where: str, payload: dict[str, Any],
                  fields: dict[str, tuple[type, ...]]) -> None:
    for name, types in fields.items():
        value = payload.get(name, _MISSING)
        if value is _MISSING:
            raise InvalidEvent(f"{where}: {name} is required")
        # bool is an int subclass; a count must not be True.
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            raise InvalidEvent(f"{where}: {name} has the wrong type")


_MISSING = object()


def event_time(when: datetime | None = None) -> str:
    """ISO-8601 UTC with milliseconds, the `time` of every event."""
    return format_instant(when or datetime.now(UTC))


def new_error_event(site_id: str, *, error_id: str, fingerprint: str, message: str,
                    occurrence_count: int, status: str, reopened: bool,
                    when: datetime | None = None) -> dict[str, Any]:
    """A `new_error` event for an error record that is new or was re-opened."""
    return {
        "type": "new_error", "siteId": site_id, "id": error_id, "time": event_time(when),
        "error": {
            "fingerprint": fingerprint, "message": message[:MAX_MESSAGE_CHARS],
            "occurrenceCount": occurrence_count, "status": status, "reopened": reopened,
        },
    }


def new_error_event_from_record(site_id: str, error_doc: dict[str, Any], reopened: bool,
                                when: datetime | None = None) -> dict[str, Any]:
    """A `new_error` event from a stored error record (`_id`, fingerprint, message, ...)."""
    return new_error_event(
        site_id, error_id=str(error_doc["_id"]), fingerprint=str(error_doc.get("fingerprint", "")),
        message=str(error_doc.get("message", "")),
        occurrence_count=int(error_doc.get("occurrenceCount", 1)),
        status=str(error_doc.get("status", "open")), reopened=reopened, when=when,
    )


def new_lead_event(site_id: str, *, lead_id: str, display_name: str | None,
                   visitor_id: str | None, when: datetime | None = None) -> dict[str, Any]:
    """A `new_lead` event for a stored lead."""
    return {
        "type": "new_lead", "siteId": site_id, "id": lead_id, "time": event_time(when),
        "lead": {"id": lead_id, "displayName": display_name, "visitorId": visitor_id},
    }
