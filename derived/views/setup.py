"""The first-run checklist of a site: what has arrived from it yet, and why items were dropped.

Each step is read from the raw families as it is now (no fold to wait for), so a step ticks on
the next look after its first item is stored: something arrived (the snippet or the plugin is
installed), a pageview, a recording, an order. The order step counts for a shop only; a site is
taken for a shop once an order of it is stored, and until then the step is shown as optional.
The drops are the per-site counts ingest keeps for the reasons an owner can act on
(documents/ingest_drops.py), over the last `DROP_DAYS` of the site's days.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from documents import commerce, ingest_drops, recordings, sites, visitors
from documents.store import Store

#: The site's days whose drops the checklist tells.
DROP_DAYS = 7


async def setup_status(store: Store, site: dict[str, Any], *,
                       now: datetime | None = None) -> dict[str, Any]:
    """The site's checklist: its steps in order, whether it is set up, and its recent drops."""
    now = now or datetime.now(UTC)
    site_id = site["_id"]
    first_day = sites.day_clock(site).day_of(now - timedelta(days=DROP_DAYS - 1))
    drops = await ingest_drops.drops_since(store, site_id, first_day)
    pageview_at = await visitors.last_pageview_seen(store, site_id)
    recording_at = await _latest_recording(store, site_id)
    ordered = bool(site.get(sites.FIRST_CURRENCY)
                   or await commerce.first_currency(store, site_id))
    recording_on = bool({**sites.DEFAULT_SETTINGS, **(site.get("settings") or {})}["recordings"])
    arrived = [at for at in (pageview_at, recording_at) if at is not None]
    arrived += [drop["lastAt"] for drop in drops]
    steps = [
        {"step": "installed", "done": bool(arrived) or ordered, "required": True,
         "lastAt": max(arrived) if arrived else None},
        {"step": "pageview", "done": pageview_at is not None, "required": True,
         "lastAt": pageview_at},
        {"step": "recording", "done": recording_at is not None, "required": recording_on,
         "lastAt": recording_at},
        {"step": "order", "done": ordered, "required": ordered, "lastAt": None},
    ]
    return {
        "siteId": site_id,
        "setUp": all(step["done"] for step in steps if step["required"]),
        "steps": steps,
        "drops": drops,
        "dropDays": DROP_DAYS,
    }


async def _latest_recording(store: Store, site_id: str) -> datetime | None:
    """When the site's most recently active recording was last active; None before the first."""
    latest: list[datetime] = []
    for status in ("active", "ended"):
        async for recording in recordings.latest_of_status(store, site_id, status, limit=1):
            latest.append(recording["lastActivityAt"])
    return max(latest) if latest else None
