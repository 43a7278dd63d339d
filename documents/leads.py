"""Leads and checkout data: personal fields a visitor submitted; editable for rectification."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from documents import visitors
from documents.retention import Expiry
from documents.store import ASCENDING, DESCENDING, AlreadyStored, DuplicateKeyError, Index, Store

COLLECTION = "leads"

INDEXES = [
    Index(COLLECTION, (("siteId", ASCENDING), ("createdAt", DESCENDING))),
    Index(COLLECTION, (("siteId", ASCENDING), ("visitorId", ASCENDING))),
    Index(COLLECTION, (("siteId", ASCENDING), ("email", ASCENDING))),
    # A visitor's leads in a time window (a recording's timeline, and the backfill of old
    # recordings' marks).
    Index(COLLECTION, (("siteId", ASCENDING), ("visitorId", ASCENDING),
                       ("createdAt", ASCENDING))),
]
EXPIRY = Expiry(COLLECTION, "createdAt")


async def insert_lead(store: Store, lead: dict[str, Any], *, session: Any = None) -> bool:
    """Store a lead; False when a lead with that id exists already (a retried request).

    Inside a transaction (`session`) an existing id raises `AlreadyStored` instead.
    """
    try:
        await store.collection(COLLECTION).insert_one(lead, session=session)
    except DuplicateKeyError as exc:
        if session is not None:
            raise AlreadyStored(lead["_id"]) from exc
        return False
    return True


async def lead_emails(store: Store, site_id: str, visitor_id: str, *, session: Any = None
                      ) -> list[str]:
    """Every e-mail address the visitor's leads carry."""
    emails = await store.collection(COLLECTION).distinct(
        "email", {"siteId": site_id, "visitorId": visitor_id}, session=session
    )
    # Only text is an address; anything else stored there (by a hand edit, say) is not one.
    return sorted(e for e in emails if isinstance(e, str) and e)


#: Lead fields a rectification may change.
RECTIFIABLE = ("name", "email", "phone", "fields")


def rectified_values(lead: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """The lead fields that really change; `fields` merges, a null entry removes that key."""
    values: dict[str, Any] = {}
    for key in ("name", "phone"):
        if key in changes and changes[key] != lead.get(key):
            values[key] = changes[key]
    if "email" in changes:
        email = changes["email"].strip().lower()  # stored as ingest stores it
        if email != lead.get("email"):
            values["email"] = email
    if "fields" in changes:
        merged = dict(lead.get("fields") or {})
        for key, value in changes["fields"].items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        if merged != (lead.get("fields") or {}):
            values["fields"] = merged
    return values


def changed_field_names(lead: dict[str, Any], values: dict[str, Any]) -> list[str]:
    """Names of what changed (`fields.<key>` per form field), never the values."""
    names = sorted(key for key in values if key != "fields")
    if "fields" in values:
        old, new = lead.get("fields") or {}, values["fields"]
        names.extend(f"fields.{key}" for key in sorted(set(old) | set(new))
                     if old.get(key) != new.get(key))
    return names


async def rectify_lead(store: Store, lead: dict[str, Any], values: dict[str, Any], *,
                       now: datetime, session: Any = None) -> dict[str, Any]:
    """Write the corrected values; keep the visitor's e-mails and, for the latest lead, name."""
    updated = {**lead, **values, "rectifiedAt": now}
    await store.collection(COLLECTION).update_one(
        {"_id": lead["_id"], "siteId": lead["siteId"]},
        {"$set": {**values, "rectifiedAt": now}}, session=session)
    profile_update: dict[str, Any] = {}
    if "email" in values:
        profile_update["emails"] = await lead_emails(store, lead["siteId"], lead["visitorId"],
                                                     session=session)
    latest = await store.collection(COLLECTION).find_one(
        {"siteId": lead["siteId"], "visitorId": lead["visitorId"]},
        sort=[("createdAt", DESCENDING), ("_id", DESCENDING)], session=session)
    if latest is not None and latest["_id"] == lead["_id"] and ({"name", "email"} & set(values)):
        # The profile is named after the latest lead, the same way ingest names it.
        profile_update["displayName"] = (updated.get("name") or "").strip() or updated["email"]
        profile_update["displayNameSource"] = "lead"
    if profile_update:
        await visitors.name_profile(store, lead["siteId"], lead["visitorId"], profile_update,
                                    session=session)
    return updated


async def find_lead(store: Store, site_id: str, lead_id: str) -> dict[str, Any] | None:
    """One of the site's leads, or None."""
    return await store.collection(COLLECTION).find_one({"_id": lead_id, "siteId": site_id})


async def recent_leads(store: Store, site_id: str, since: datetime, limit: int, *,
                       left_out: list[str]) -> list[dict[str, Any]]:
    """The site's leads created since `since`, the newest first, without `left_out` visitors."""
    query: dict[str, Any] = {"siteId": site_id, "createdAt": {"$gte": since}}
    if left_out:
        query["visitorId"] = {"$nin": left_out}
    cursor = store.collection(COLLECTION).find(
        query, {"visitorId": 1, "name": 1, "email": 1, "createdAt": 1}).sort(
        [("createdAt", DESCENDING), ("_id", DESCENDING)]).limit(limit)
    return await cursor.to_list(limit)


async def latest_leads_of_visitor(store: Store, site_id: str, visitor_id: str, *, limit: int
                                  ) -> list[dict[str, Any]]:
    """The visitor's latest leads, newest first."""
    return await store.collection(COLLECTION).find(
        {"siteId": site_id, "visitorId": visitor_id}).sort("createdAt", DESCENDING).limit(
        limit).to_list(None)


def leads_between(store: Store, site_id: str, visitor_ids: list[str], low: datetime,
                  high: datetime, projection: dict[str, Any], *, session: Any = None) -> Any:
    """A cursor over these visitors' leads created from `low` to `high` (both included)."""
    return store.collection(COLLECTION).find(
        {"siteId": site_id, "visitorId": {"$in": visitor_ids},
         "createdAt": {"$gte": low, "$lte": high}}, projection, session=session)


def visitor_leads_between(store: Store, site_id: str, visitor_id: str, low: datetime,
                          high: datetime, projection: dict[str, Any], *, limit: int) -> Any:
    """A cursor over the visitor's first `limit` leads created from `low` to `high`."""
    return store.collection(COLLECTION).find(
        {"siteId": site_id, "visitorId": visitor_id, "createdAt": {"$gte": low, "$lte": high}},
        projection,
    ).sort("createdAt", ASCENDING).limit(limit)


async def visitors_with_email(store: Store, site_id: str, address: str) -> list[Any]:
    """The visitor ids of the site's leads carrying this (normalised) address."""
    return await store.collection(COLLECTION).distinct(
        "visitorId", {"siteId": site_id, "email": address})
