"""Deleting a site and everything of it: the walk erasure takes for one visitor, taken for the
whole site, then the site's own collections, GridFS files with their chunks included.

The site's keys die first: its API key digest and public key are replaced by values no key
hashes to, and every process is told at once (the keyring's announcement), so nothing sent
with them is stored while the data goes. Then each collection of `VISITOR_DATA` (the table
export and erasure share) and of `SITE_OWN` loses the site's documents, and the site itself
goes last, so a deletion cut short leaves the site, keyless, to be deleted again. Only
`KEPT` collections may keep anything naming the site, each with its reason; a test fails when a
collection is in none of the three.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from derived import daily_figures, derivation
from documents import (
    alerts,
    audit,
    digests,
    funnels,
    heatmaps,
    ingest_drops,
    notifications,
    requests,
    retention,
    segments,
    sites,
    statement_nonces,
    surveys,
)
from documents.accounts import AuthenticatedUser
from documents.sites import SiteKeyring
from documents.store import Store
from errors import Forbidden, InvalidInput
from privacy.subject_data import VISITOR_DATA


@dataclass(frozen=True)
class SiteOwnData:
    """One collection of a site's own (settings, figures, bookkeeping), and the field that
    names the site in it."""

    collection: str
    field: str


SITE_OWN: tuple[SiteOwnData, ...] = (
    # The figures folded from the raw data (derived/daily_figures.py), and the fold's lease.
    *(SiteOwnData(name, "siteId") for name in (
        daily_figures.SITE_DAYS, daily_figures.PAGE_DAYS, daily_figures.SESSION_DAYS,
        daily_figures.ERROR_DAYS)),
    SiteOwnData(derivation.LEASES, "_id"),
    SiteOwnData(heatmaps.COUNTS, "siteId"),
    SiteOwnData(heatmaps.RENDERS, "siteId"),
    SiteOwnData(ingest_drops.COLLECTION, "siteId"),
    SiteOwnData(surveys.COLLECTION, "siteId"),
    SiteOwnData(surveys.COUNTERS, "siteId"),
    SiteOwnData(funnels.COLLECTION, "siteId"),
    SiteOwnData(segments.COLLECTION, "siteId"),
    SiteOwnData(alerts.RULES, "siteId"),
    SiteOwnData(alerts.EPISODES, "siteId"),
    SiteOwnData(alerts.MEMBERS, "siteId"),
    SiteOwnData(digests.DELIVERIES, "siteId"),
    SiteOwnData(notifications.CHANNELS, "_id"),
    SiteOwnData(notifications.DELIVERIES, "siteId"),
    SiteOwnData(retention.STATUS, "siteId"),
    SiteOwnData(statement_nonces.COLLECTION, "siteId"),
    # Subject requests about the site's visitors: their digests point at nobody any more.
    SiteOwnData(requests.COLLECTION, "siteId"),
)

#: Collections that keep what names a deleted site, and why.
KEPT: dict[str, str] = {
    audit.COLLECTION: "the organization's trail: who created, changed and deleted the site",
    retention.RUNS: "each purge run's bookkeeping (counts per kind), no site's data",
    sites.COLLECTION: "the site itself, deleted last, after its data",
}


def _visitor_data_query(collection: str, site_id: str) -> dict[str, Any]:
    field = "metadata.siteId" if collection.endswith(".files") else "siteId"
    return {field: site_id}


async def delete_site(store: Store, keyring: SiteKeyring, user: AuthenticatedUser,
                      site: dict[str, Any], confirm_name: str) -> dict[str, int]:
    """Delete the site and all its data, owners only, when `confirm_name` is its name; the
    documents removed per collection, as the audit trail keeps them."""
    if user.role_in(site["organizationId"]) != "owner":
        raise Forbidden("only an owner deletes a site", code="owner_required")
    if confirm_name != site["name"]:
        raise InvalidInput("type the site's name exactly to delete it", field="confirmName",
                           code="name_mismatch")
    site_id = site["_id"]
    await sites.retire_keys(store, site_id)
    await keyring.site_changed(site_id)

    removed: dict[str, int] = {}
    for source in VISITOR_DATA:
        query = _visitor_data_query(source.collection, site_id)
        if source.action == "delete_files":
            bucket = store.bucket(source.collection.removesuffix(".files"))
            count = await bucket.delete_where(query)
        else:
            count = (await store.collection(source.collection).delete_many(query)).deleted_count
        removed[source.collection] = removed.get(source.collection, 0) + count
    for own in SITE_OWN:
        result = await store.collection(own.collection).delete_many({own.field: site_id})
        removed[own.collection] = result.deleted_count
    await sites.remove_site(store, site_id)
    await keyring.site_changed(site_id)
    await audit.record(store, action="site.deleted", actor_user_id=user.id,
                       account_id=user.account_id, organization_id=site["organizationId"],
                       site_id=site_id,
                       details={"name": site["name"],
                                "removed": {name: n for name, n in removed.items() if n}})
    return removed
