"""The orders list (issue 41 point 1): GET /api/v1/sites/{siteId}/orders, filtered, sorted and
paged by cursor (derived/views/orders.py). Members of the site's organization may read; a site
of another organization answers 404. Restricted visitors' orders are left out."""

from __future__ import annotations

from derived.views import orders as order_views
from handlers.site_api import SITE_ID, SiteDataHandler


class OrdersHandler(SiteDataHandler):
    """GET .../orders?status=&currency=&minNet=&maxNet=&source=&from=&to=&sort=&cursor=&limit=:
    the site's orders, newest placing first by default, each with its visitor, journey and
    replay."""

    async def get(self, site_id: str) -> None:
        site = await self.readable_site(site_id)
        cursor, limit = self.page_arguments()
        first, last = self.day_range(site)
        argument = self.get_query_argument
        filters = order_views.OrderFilters(
            first=first, last=last, status=argument("status", None) or None,
            currency=argument("currency", None) or None,
            min_net=argument("minNet", None) or None, max_net=argument("maxNet", None) or None,
            source=argument("source", None) or None, sort=argument("sort", None) or "placed")
        page = await order_views.list_orders(self.deps.store, site["_id"], filters,
                                             cursor=cursor, limit=limit)
        self.write_json(page.as_dict())


default_handlers = [
    (rf"/api/v1/sites/{SITE_ID}/orders", OrdersHandler),
]
