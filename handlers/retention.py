"""Retention in the dashboard API: what is kept how long, proof that the purge enforces it, and
what a shorter retention would delete (issue 32). Retentions are changed with the site's
settings (handlers/sites.py, `settings.retentionDays`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from documents import retention, sites
from errors import InvalidInput
from handlers.base import BaseHandler
from instants import format_instant
from privacy.retention import oldest_held, preview


class RetentionHandler(BaseHandler):
    """GET: per kind, the retention, the oldest item held, the last purge and what it removed;
    and whether the purge is overdue (no run finished for too long)."""

    async def get(self, site_id: str) -> None:
        store = self.deps.store
        site = await sites.site_for_user(store, self.user, site_id)
        days = retention.site_days(site)
        status = await retention.site_status(store, site_id)
        overdue_after = retention.overdue_after(
            self.deps.settings.retention_purge_interval_seconds)
        clock = await retention.purge_clock(store, now=datetime.now(UTC), after=overdue_after)
        running = await retention.open_runs(store)
        kinds = []
        for kind in retention.KINDS:
            state = status.get(kind.key, {})
            kinds.append({
                "kind": kind.key, "label": kind.label, "retentionDays": days[kind.key],
                "defaultDays": kind.default_days, "minDays": kind.min_days,
                "maxDays": kind.max_days, "settable": kind.settable,
                "oldestHeldAt": format_instant(await oldest_held(store, site_id, kind.key)),
                "lastPurgeAt": format_instant(state.get("lastPurgeAt")),
                "removedLastRun": state.get("removedLastRun", 0),
                "removedTotal": state.get("removedTotal", 0),
            })
        self.write_json({
            "siteId": site_id, "kinds": kinds,
            "intervalSeconds": self.deps.settings.retention_purge_interval_seconds,
            "lastRunCompletedAt": format_instant(clock.last_completed_at),
            "overdueSince": format_instant(clock.overdue_since),
            "overdueAfterSeconds": overdue_after.total_seconds(),
            "runInProgress": bool(running),
            "lastError": running[0].get("lastError") if running else None,
        })


class RetentionPreviewHandler(BaseHandler):
    """POST: how many items of each kind the given retentions would delete at the next run."""

    async def post(self, site_id: str) -> None:
        # Another organization's site is not found, whatever the body says.
        site = await sites.site_for_user(self.deps.store, self.user, site_id)
        body = self.validated_body("RetentionPreviewRequest")
        try:
            days = retention.checked_days(body["retentionDays"])
        except retention.RetentionOutOfRange as refused:
            raise InvalidInput(str(refused), field=f"retentionDays.{refused.kind}") from None
        counts = await preview(self.deps.store, site, days, datetime.now(UTC))
        chosen: dict[str, Any] = {**retention.site_days(site), **days}
        self.write_json({"siteId": site_id, "retentionDays": chosen, "wouldRemove": counts})


default_handlers = [
    (r"/api/v1/sites/([0-9a-f-]{36})/retention", RetentionHandler),
    (r"/api/v1/sites/([0-9a-f-]{36})/retention/preview", RetentionPreviewHandler),
]
