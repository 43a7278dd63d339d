"""Deleting a site from the dashboard API: every document of it removed, its keys dead in
every process at once (privacy/site_deletion.py)."""

from __future__ import annotations

from documents import sites
from handlers.base import BaseHandler
from privacy.site_deletion import delete_site


class SiteDeletionHandler(BaseHandler):
    """POST deletes the site and all its data, owners only, its name typed to confirm."""

    async def post(self, site_id: str) -> None:
        site = await sites.site_for_user(self.deps.store, self.user, site_id)
        body = self.validated_body("SiteDeletion")
        removed = await delete_site(self.deps.store, self.deps.keyring, self.user, site,
                                    body["confirmName"])
        self.write_json({"id": site_id, "deleted": True,
                         "removed": {name: count for name, count in removed.items() if count}})


default_handlers = [
    (r"/api/v1/sites/([0-9a-f-]{36})/deletion", SiteDeletionHandler),
]
