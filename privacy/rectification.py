"""Rectification of a lead (GDPR Art. 16): the corrected values, the request's completion and
its audit entry in one transaction, logged as a data-subject request like erasure and export.

The audit entry and the request log name the changed fields only, never their values.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from documents import audit, leads
from documents import requests as request_log
from documents.store import Store
from errors import NotFound


@dataclass(frozen=True)
class LeadRectification:
    """The lead as it is now, the names of the fields that changed, and the request's id."""

    lead: dict[str, Any]
    fields: list[str]
    request_id: str


async def rectify_lead(store: Store, site: dict[str, Any], lead_id: str,
                       changes: dict[str, Any], *, digester: request_log.SubjectDigester,
                       actor_user_id: str, account_id: str | None) -> LeadRectification:
    """Correct the lead with `changes`; NotFound when the site has no such lead."""
    lead = await leads.find_lead(store, site["_id"], lead_id)
    if lead is None:
        raise NotFound("lead not found")
    request = await request_log.open_request(
        store, kind="rectification", site=site,
        subject_digest=digester.digest(site["_id"], lead["visitorId"]),
        actor_user_id=actor_user_id, details={"leadId": lead_id}, visitor_id=lead["visitorId"])
    values = leads.rectified_values(lead, changes)
    fields = leads.changed_field_names(lead, values)

    async def rectify(session: Any) -> dict[str, Any]:
        # The lead, the profile, the request's completion and the audit entry together.
        updated = lead
        if values:
            updated = await leads.rectify_lead(store, lead, values, now=datetime.now(UTC),
                                               session=session)
        await request_log.complete_request(store, request["_id"], outcome={"fields": fields},
                                           session=session)
        await audit.record(store, action="lead.rectified", actor_user_id=actor_user_id,
                           account_id=account_id, organization_id=site["organizationId"],
                           site_id=site["_id"], details={
                               "leadId": lead_id, "requestId": request["_id"], "fields": fields},
                           session=session)
        return updated

    async with request_log.failed_if_the_store_fails(store, request["_id"]):
        updated = await store.transaction(rectify)
    return LeadRectification(updated, fields, request["_id"])
