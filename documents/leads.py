"""Leads and checkout data: personal fields a visitor submitted; editable for rectification."""

from __future__ import annotations

from typing import Any

from documents.store import ASCENDING, DESCENDING, DuplicateKeyError, Index, Store

INDEXES = [
    Index("leads", (("siteId", ASCENDING), ("createdAt", DESCENDING))),
    Index("leads", (("siteId", ASCENDING), ("visitorId", ASCENDING))),
    Index("leads", (("siteId", ASCENDING), ("email", ASCENDING))),
]


async def insert_lead(store: Store, lead: dict[str, Any]) -> bool:
    """Store a lead; False when a lead with that id exists already (a retried request)."""
    try:
        await store.collection("leads").insert_one(lead)
    except DuplicateKeyError:
        return False
    return True


async def lead_emails(store: Store, site_id: str, visitor_id: str, *, session: Any = None
                      ) -> list[str]:
    """Every e-mail address the visitor's leads carry."""
    emails = await store.collection("leads").distinct(
        "email", {"siteId": site_id, "visitorId": visitor_id}, session=session
    )
    return sorted(e for e in emails if e)
