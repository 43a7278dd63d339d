"""The first-run checklist of a site (issue 43 point 4), read by any member of its organization;
the steps and the drop reasons are worked out in derived/views/setup.py."""

from __future__ import annotations

from derived.views.setup import setup_status
from documents import sites
from handlers.base import BaseHandler
from handlers.site_api import SITE_ID


class SetupStatusHandler(BaseHandler):
    """GET: which first-run steps the site has passed, and why items of it were dropped."""

    async def get(self, site_id: str) -> None:
        # Another organization's site is not found.
        site = await sites.site_for_user(self.deps.store, self.user, site_id)
        self.write_json(await setup_status(self.deps.store, site))


default_handlers = [
    (rf"/api/v1/sites/{SITE_ID}/setup-status", SetupStatusHandler),
]
