"""The heatmaps of the dashboard API (issue 22): the pages list, one page's heatmap, its image.

Read like the rest of the data API (handlers/data_api.py): a dashboard token, and a site of the
caller's organization (404 otherwise). Query parameters are checked against docs/openapi.yaml.
"""

from __future__ import annotations

from documents import heatmaps
from errors import InvalidInput, NotFound
from handlers.site_api import SITE_ID, UUID, SiteDataHandler
from tasks.heatmaps import heatmap_view, pages_view


class HeatmapPagesHandler(SiteDataHandler):
    """GET .../heatmaps: the site's pages with their views and interaction counts."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        first, last = self.day_range(site)
        self.write_json(await pages_view(self.deps.store, site, first, last))


class HeatmapHandler(SiteDataHandler):
    """GET .../heatmaps/page?page=&kind=&width=: one page's heatmap."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        first, last = self.day_range(site)
        page = self.get_query_argument("page", None)
        if not page:
            raise InvalidInput("page is required", field="page")
        kind = self.get_query_argument("kind", "click")
        width = self.get_query_argument("width", "desktop")
        view = await heatmap_view(self.deps.store, site, page, width, kind, first, last)
        self.write_json(view)


class HeatmapImageHandler(SiteDataHandler):
    """GET .../heatmaps/images/{fileId}: a rendered background image (PNG)."""

    async def get(self, site_id: str, file_id: str) -> None:
        site = await self.readable_site(site_id)
        image = await heatmaps.read_image(self.deps.store, site["_id"], file_id)
        if image is None:
            raise NotFound("no such image")
        self.set_header("Content-Type", "image/png")
        self.set_header("Cache-Control", "private, no-cache")
        self.finish(image)


default_handlers = [
    (rf"/api/v1/sites/{SITE_ID}/heatmaps", HeatmapPagesHandler),
    (rf"/api/v1/sites/{SITE_ID}/heatmaps/page", HeatmapHandler),
    (rf"/api/v1/sites/{SITE_ID}/heatmaps/images/{UUID}", HeatmapImageHandler),
]
