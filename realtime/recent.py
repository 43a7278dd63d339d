"""What the live feed shows before anything new arrives: the site's recent events.

Live events are not replayed (docs/events.md), so a reload used to empty the feed. On load and on
every reconnect the dashboard asks for the events of the past hour, at most 20, rebuilt from
what is stored in the same shape as the live ones: errors that were new or re-opened in that
hour and leads created in it. Restricted visitors' leads are left out, as everywhere in the
dashboard.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from documents import error_records, leads, visitors
from documents.store import Store
from realtime.events import new_error_event_from_record, new_lead_event

RECENT_WINDOW = timedelta(hours=1)
RECENT_LIMIT = 20


def _aware(moment: datetime) -> datetime:
    # The embedded store hands datetimes back without their zone; they are UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


async def recent_events(store: Store, site_id: str,
                        now: datetime | None = None) -> list[dict[str, Any]]:
    """The site's new and re-opened errors and new leads of the past hour, newest first."""
    since = (now or datetime.now(UTC)) - RECENT_WINDOW
    events: list[dict[str, Any]] = []
    for error in await error_records.recently_announced(store, site_id, since, RECENT_LIMIT):
        reopened_at = error.get("reopenedAt")
        reopened = reopened_at is not None and _aware(reopened_at) >= since
        when = _aware(reopened_at if reopened else error["firstSeen"])
        event = new_error_event_from_record(site_id, error, reopened, when=when)
        # As the error pipeline sends it (tasks/errors.py), so the feed labels it alike.
        event["error"].update(type=error.get("type") or "", new=not reopened)
        events.append(event)
    left_out = await visitors.restricted_visitor_ids(store, site_id)
    for lead in await leads.recent_leads(store, site_id, since, RECENT_LIMIT, left_out=left_out):
        name = (lead.get("name") or "").strip() or lead.get("email")
        events.append(new_lead_event(site_id, lead_id=str(lead["_id"]), display_name=name,
                                     visitor_id=lead.get("visitorId"),
                                     when=_aware(lead["createdAt"])))
    events.sort(key=lambda event: event["time"], reverse=True)
    return events[:RECENT_LIMIT]
