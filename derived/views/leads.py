"""The leads page: a lead as the dashboard shows it, and the site's leads newest first."""

from __future__ import annotations

from typing import Any

from derived.views.paging import Page, keyset_page, not_restricted, readable
from documents import leads, visitors
from documents.store import Store


def lead_view(lead: dict[str, Any]) -> dict[str, Any]:
    """A lead as the dashboard shows it."""
    return {
        "id": lead["_id"],
        "visitorId": lead.get("visitorId"),
        "createdAt": lead.get("createdAt"),
        "kind": lead.get("kind"),
        "formId": lead.get("formId"),
        "url": lead.get("url"),
        "name": lead.get("name"),
        "email": lead.get("email"),
        "phone": lead.get("phone"),
        "fields": lead.get("fields") or {},
        "orderCompleted": bool(lead.get("orderCompleted")),
        "rectifiedAt": lead.get("rectifiedAt"),
    }


async def list_leads(store: Store, site_id: str, *, cursor: str | None, limit: int) -> Page:
    """The site's leads, newest first, without those of restricted visitors; each with its
    visitor's readable label."""
    filter_ = {"siteId": site_id, **await not_restricted(store, site_id)}
    found, next_cursor = await keyset_page(store, leads.COLLECTION, filter_, "createdAt",
                                           cursor, limit)
    rows = readable(found, lead_view, "lead")
    names = await visitors.display_names(
        store, [(site_id, row["visitorId"]) for row in rows if row.get("visitorId")])
    return Page([{**row, "visitorLabel": visitors.listed_label(site_id, row.get("visitorId"),
                                                              names)} for row in rows],
                next_cursor)
