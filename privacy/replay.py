"""Replaying the erasure log after a restore, so that erased visitors stay erased.

A backup taken before an erasure brings the erased visitor back when it is restored. The request
log (`dsr_requests`) keeps, for every completed erasure, a keyed digest of (site, visitor id) and
never the id itself; `replay_erasures` digests every visitor id held for each site with such
erasures and erases again each one whose digest matches an erasure completed after `since`.
The restored log itself must be newer than the backup for this to work: operators keep the
log's own copy (docs/operations.md, "Backup and restore").

The digest is keyed with SECRET_KEY, so the replay must run with the key the erasures were
logged under.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from documents import (
    activity,
    engagement,
    error_records,
    interactions,
    leads,
    recordings,
    sites,
    visitors,
)
from documents import requests as request_log
from documents.requests import SubjectDigester
from documents.store import Store
from errors import NotFound
from privacy.erasure import erase_visitor

log = logging.getLogger(__name__)

#: Collections whose documents carry (siteId, visitorId): where a restored visitor can be found.
VISITOR_ID_SOURCES = (visitors.COLLECTION, activity.COLLECTION, leads.COLLECTION,
                      recordings.COLLECTION, error_records.OCCURRENCES, interactions.COLLECTION,
                      engagement.SURVEY_RESPONSES)

#: Who the replayed erasures are logged and audited as.
REPLAY_ACTOR = "system:replay-erasures"


@dataclass
class ReplayReport:
    """What a replay found and did; counts only, no identifiers."""

    erasures_in_log: int = 0
    sites: int = 0
    visitors_checked: int = 0
    visitors_erased_again: int = 0
    deleted: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The report as the command prints it."""
        return {"erasuresInLog": self.erasures_in_log, "sites": self.sites,
                "visitorsChecked": self.visitors_checked,
                "visitorsErasedAgain": self.visitors_erased_again, "deleted": self.deleted}


async def replay_erasures(store: Store, digester: SubjectDigester, since: datetime
                          ) -> ReplayReport:
    """Erase again every visitor whose digest matches an erasure completed at or after `since`."""
    report = ReplayReport()
    digests_by_site: dict[str, dict[str, str]] = {}
    async for request in request_log.erasures_completed_since(store, since):
        report.erasures_in_log += 1
        digests_by_site.setdefault(request["siteId"], {})[request["subjectDigest"]] = \
            request["_id"]
    for site_id, digests in digests_by_site.items():
        site = await sites.find_site(store, site_id)
        if site is None:
            continue  # the site itself is gone (deleted after the erasure): nothing to restore
        report.sites += 1
        for visitor_id in await _visitor_ids(store, site_id):
            report.visitors_checked += 1
            original = digests.get(digester.digest(site_id, visitor_id))
            if original is None:
                continue
            await _erase_again(store, site, visitor_id, digester, original, report)
    return report


async def _visitor_ids(store: Store, site_id: str) -> list[str]:
    found: set[str] = set()
    for name in VISITOR_ID_SOURCES:
        found.update(v for v in await store.collection(name).distinct(
            "visitorId", {"siteId": site_id}) if isinstance(v, str))
    return sorted(found)


async def _erase_again(store: Store, site: dict[str, Any], visitor_id: str,
                       digester: SubjectDigester, original_request_id: str,
                       report: ReplayReport) -> None:
    request = await request_log.open_request(
        store, kind="erasure", site=site, subject_digest=digester.digest(site["_id"], visitor_id),
        actor_user_id=REPLAY_ACTOR, details={"replayOf": original_request_id})
    try:
        receipt = await erase_visitor(store, site, visitor_id, request=request,
                                      actor_user_id=REPLAY_ACTOR, account_id=None)
    except NotFound:
        # Only the profile's id was found, nothing to delete: the log says so and moves on.
        await request_log.complete_request(store, request["_id"], outcome={"counts": {}})
        return
    report.visitors_erased_again += 1
    for category, count in receipt.counts.items():
        report.deleted[category] = report.deleted.get(category, 0) + count
    log.info("erasure replayed", extra={"siteId": site["_id"], "requestId": request["_id"],
                                        "replayOf": original_request_id})
