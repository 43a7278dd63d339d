"""Funnels and revenue at risk in the dashboard API: funnel definitions (owners and admins
change them, members read), a funnel's report over a date range, and the pages with rage and
dead clicks ranked by the revenue they put at risk (derived/funnel_reports.py and
derived/conversion_impact.py say how each is worked out)."""

from __future__ import annotations

from derived import conversion_impact, funnel_reports
from derived.views import sessions as session_views
from documents import funnels
from handlers.site_api import SITE_ID, UUID, SiteDataHandler
from privacy.exclusion import page_matcher, validate_pattern

#: A funnel's id in a path: a definition's UUID, or "shop" for the built-in one.
FUNNEL_ID = rf"({funnels.SHOP_FUNNEL_ID}|{UUID[1:-1]})"


class FunnelsHandler(SiteDataHandler):
    """GET lists the shop funnel and the site's own; POST creates one (owner or admin)."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        listed = await funnels.list_funnels(self.deps.store, site["_id"])
        self.write_json([funnels.view(funnel) for funnel in listed])

    async def post(self, site_id: str) -> None:
        site = await self.admin_site(site_id)
        body = self.validated_body("FunnelCreate")

        funnel = await self.audited(
            site, "funnel.created",
            lambda session: funnels.create_funnel(self.deps.store, site["_id"], body,
                                                  validate_pattern, session=session),
            lambda created: {"funnelId": created["_id"]})
        self.write_json(funnels.view(funnel), status=201)


class FunnelHandler(SiteDataHandler):
    """GET reads one funnel; PATCH changes it, DELETE removes it (owner or admin)."""

    async def get(self, site_id: str, funnel_id: str) -> None:
        site = await self.readable_site(site_id)
        funnel = await funnels.find_funnel(self.deps.store, site["_id"], funnel_id)
        self.write_json(funnels.view(funnel))

    async def patch(self, site_id: str, funnel_id: str) -> None:
        site = await self.admin_site(site_id)
        body = self.validated_body("FunnelUpdate")

        funnel, _ = await self.audited(
            site, "funnel.changed",
            lambda session: funnels.update_funnel(self.deps.store, site["_id"], funnel_id, body,
                                                  validate_pattern, session=session),
            lambda updated: {"funnelId": funnel_id, "fields": updated[1]} if updated[1] else None)
        self.write_json(funnels.view(funnel))

    async def delete(self, site_id: str, funnel_id: str) -> None:
        site = await self.admin_site(site_id)

        await self.audited(
            site, "funnel.deleted",
            lambda session: funnels.delete_funnel(self.deps.store, site["_id"], funnel_id,
                                                  session=session),
            lambda _: {"funnelId": funnel_id})
        self.set_status(204)
        self.finish()


class FunnelReportHandler(SiteDataHandler):
    """GET .../funnels/{funnelId}/report?from=&to=&source=&segment=: the range's sessions (of
    a saved segment's, when named) through it, worked out on a report thread within the time
    limit (503 past it)."""

    async def get(self, site_id: str, funnel_id: str) -> None:
        offload = self.deps.reports.limited()
        site = await self.readable_site(site_id)
        funnel = await funnels.find_funnel(self.deps.store, site["_id"], funnel_id)
        first, last = self.day_range(site)
        source = self.get_query_argument("source", None) or None
        within = await session_views.segment_condition(
            self.deps.store, site, self.get_query_argument("segment", None) or None)
        self.write_json(await funnel_reports.funnel_report(
            self.deps.store, site["_id"], funnel, first, last, source=source,
            page_matches=page_matcher(), offload=offload, within=within))


class PagesAtRiskHandler(SiteDataHandler):
    """GET .../revenue-at-risk/pages?from=&to=: pages with rage or dead clicks, by the revenue
    their sessions put at risk."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        first, last = self.day_range(site)
        pages = await conversion_impact.page_impacts(
            self.deps.store, site, first, last, self.deps.reports.limited())
        self.write_json({"from": first.isoformat(), "to": last.isoformat(),
                                    "rule": conversion_impact.RULE, "items": pages})


default_handlers = [
    (rf"/api/v1/sites/{SITE_ID}/funnels", FunnelsHandler),
    (rf"/api/v1/sites/{SITE_ID}/funnels/{FUNNEL_ID}", FunnelHandler),
    (rf"/api/v1/sites/{SITE_ID}/funnels/{FUNNEL_ID}/report", FunnelReportHandler),
    (rf"/api/v1/sites/{SITE_ID}/revenue-at-risk/pages", PagesAtRiskHandler),
]
