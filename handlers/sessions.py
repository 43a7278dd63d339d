"""Sessions by outcome and saved segments (issue 41 point 5): GET /api/v1/sites/{siteId}/sessions,
filtered in the query string and paged by cursor (derived/views/sessions.py), and a site's saved
segments under /api/v1/sites/{siteId}/saved-segments (documents/segments.py). Members of the
site's organization read; owners and admins create, change and delete segments, audited. A site
of another organization answers 404.

Saved segments are not under .../segments: that path serves a recording's replay segments."""

from __future__ import annotations

from derived.views import sessions as session_views
from documents import segments
from handlers.site_api import SITE_ID, UUID, SiteDataHandler


class SessionsHandler(SiteDataHandler):
    """GET .../sessions?from=&to=&converted=&minValue=&maxValue=&utmCampaign=&utmSource=&
    source=&entry=&exit=&page=&error=&frustration=&device=&country=&segment=&cursor=&limit=:
    the site's sessions, newest start first, with their outcome."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        cursor, limit = self.page_arguments()
        first, last = self.day_range(site)
        filters = segments.parse_filters({name: self.get_query_argument(name, None)
                                          for name in segments.FILTER_NAMES})
        page = await session_views.list_sessions(
            self.deps.store, site, first, last, filters,
            segment_id=self.get_query_argument("segment", None) or None, cursor=cursor,
            limit=limit)
        self.write_json(page.as_dict())


class SavedSegmentsHandler(SiteDataHandler):
    """GET lists the site's segments by name; POST saves one (owner or admin)."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        listed = await segments.list_segments(self.deps.store, site["_id"])
        self.write_json([segments.view(segment) for segment in listed])

    async def post(self, site_id: str) -> None:
        site = await self.admin_site(site_id)
        body = self.validated_body("SegmentCreate")
        segment = await self.audited(
            site, "segment.created",
            lambda session: segments.create_segment(self.deps.store, site["_id"], body,
                                                    session=session),
            lambda created: {"segmentId": created["_id"]})
        self.write_json(segments.view(segment), status=201)


class SavedSegmentHandler(SiteDataHandler):
    """GET reads one segment; PATCH renames it or changes its filters, DELETE removes it
    (owner or admin)."""

    async def get(self, site_id: str, segment_id: str) -> None:
        site = await self.readable_site(site_id)
        segment = await segments.find_segment(self.deps.store, site["_id"], segment_id)
        self.write_json(segments.view(segment))

    async def patch(self, site_id: str, segment_id: str) -> None:
        site = await self.admin_site(site_id)
        body = self.validated_body("SegmentUpdate")
        segment, _ = await self.audited(
            site, "segment.changed",
            lambda session: segments.update_segment(self.deps.store, site["_id"], segment_id,
                                                     body, session=session),
            lambda updated: ({"segmentId": segment_id, "fields": updated[1]}
                             if updated[1] else None))
        self.write_json(segments.view(segment))

    async def delete(self, site_id: str, segment_id: str) -> None:
        site = await self.admin_site(site_id)
        await self.audited(
            site, "segment.deleted",
            lambda session: segments.delete_segment(self.deps.store, site["_id"], segment_id,
                                                    session=session),
            lambda _: {"segmentId": segment_id})
        self.set_status(204)
        self.finish()


default_handlers = [
    (rf"/api/v1/sites/{SITE_ID}/sessions", SessionsHandler),
    (rf"/api/v1/sites/{SITE_ID}/saved-segments", SavedSegmentsHandler),
    (rf"/api/v1/sites/{SITE_ID}/saved-segments/{UUID}", SavedSegmentHandler),
]
