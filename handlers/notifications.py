"""Per-site notification channels in the dashboard API, and the delivery log.

Secrets are write-only: a PUT may set or clear them, no answer ever contains them.
"""

from __future__ import annotations

from documents import notifications, sites
from errors import InvalidInput
from handlers.base import BaseHandler
from tasks.notifications import check_webhook_url

DELIVERY_STATUSES = ("pending", "retrying", "delivered", "failed")


class NotificationChannelsHandler(BaseHandler):
    """GET shows the site's channels (secrets as `...Set` flags); PUT replaces them (admins)."""

    async def get(self, site_id: str) -> None:
        site = await sites.site_for_user(self.deps.store, self.user, site_id)
        stored = await notifications.channels_for_site(self.deps.store, site["_id"])
        self.write_json(notifications.public_view(stored))

    async def put(self, site_id: str) -> None:
        site = await sites.site_for_user(self.deps.store, self.user, site_id)
        sites.require_admin(self.user, site["organizationId"])
        body = self.validated_body("NotificationChannelsUpdate")
        if (body.get("webhook") or {}).get("url"):
            # Before the transaction: resolving a name must not hold one open.
            await check_webhook_url(
                body["webhook"]["url"],
                allow_private=self.deps.settings.webhook_allow_private_addresses)
        if (body.get("slack") or {}).get("url"):
            await check_webhook_url(
                body["slack"]["url"],
                allow_private=self.deps.settings.webhook_allow_private_addresses,
                field="slack.url")

        saved, _ = await self.audited(
            site, "site.notifications_changed",
            lambda session: notifications.save_channels(self.deps.store, self.deps.sealer, site,
                                                        body, session=session),
            lambda result: {"fields": result[1]})
        self.write_json(notifications.public_view(saved))


class NotificationDeliveriesHandler(BaseHandler):
    """GET lists the newest deliveries, `?status=failed` for the ones that gave up."""

    async def get(self, site_id: str) -> None:
        site = await sites.site_for_user(self.deps.store, self.user, site_id)
        status = self.get_query_argument("status", None)
        if status is not None and status not in DELIVERY_STATUSES:
            raise InvalidInput(f"status must be one of {', '.join(DELIVERY_STATUSES)}",
                               field="status")
        limit_text = self.get_query_argument("limit", "50")
        if not limit_text.isdigit() or not 1 <= int(limit_text) <= 200:
            raise InvalidInput("limit must be between 1 and 200", field="limit")
        found = await notifications.recent_deliveries(self.deps.store, site["_id"], status,
                                                      int(limit_text))
        self.write_json({"deliveries": found})


default_handlers = [
    (r"/api/v1/sites/([0-9a-f-]{36})/notifications", NotificationChannelsHandler),
    (r"/api/v1/sites/([0-9a-f-]{36})/notifications/deliveries", NotificationDeliveriesHandler),
]
