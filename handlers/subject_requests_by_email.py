"""Data-subject requests by e-mail address from the shop server (`/ingest/privacy/*`).

The plugin's WordPress personal-data exporter and eraser call these with the site API key
(`X-Service-Key`, the same check and per-site rate limit as the rest of /ingest). Each visitor
found for the address is exported or erased exactly as the dashboard does it: logged in the
request log (received, due in one month, completed) and in the audit trail, the erasure in one
transaction with a receipt. The actor is the site API key, recorded as `SITE_KEY_ACTOR`. The
address travels in the body only, so access logs never hold it, and nothing stores it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from documents import audit, visitors
from documents import requests as request_log
from errors import NotFound
from handlers.base import compact_json
from handlers.ingest_api import IngestHandler
from handlers.site_api import write_export
from privacy.erasure import erase_visitor
from privacy.export import VisitorExport
from privacy.subject_data import ANONYMISED_CATEGORIES, receipt_labels
from privacy.subjects_by_email import visitors_with_email

#: Who carried out a request made with the site API key, in the request log and audit trail.
SITE_KEY_ACTOR = "site-api-key"


class ByEmailHandler(IngestHandler):
    """POST {"email": ...} with the site API key; finds the address's visitors."""

    kind: ClassVar[str] = "privacy"
    max_body_bytes: ClassVar[int | None] = 4 * 1024
    #: The schema in docs/openapi.yaml the body is checked against.
    schema: ClassVar[str] = "PrivacyByEmail"

    async def subjects(self) -> tuple[dict[str, Any], list[str]]:
        """The validated body and the ids of the visitors held for its address."""
        body = self.validated_body(self.schema)
        return body, await visitors_with_email(self.deps.store, self.site["_id"], body["email"])

    async def open_request(self, kind: request_log.RequestType, visitor_id: str
                           ) -> dict[str, Any]:
        """Log the request for one visitor as received, made with the site API key."""
        return await request_log.open_request(
            self.deps.store, kind=kind, site=self.site,
            subject_digest=self.deps.subject_digester.digest(self.site["_id"], visitor_id),
            actor_user_id=SITE_KEY_ACTOR, details={"via": "email", "channel": "cms"})


class LookupByEmailHandler(ByEmailHandler):
    """POST /ingest/privacy/lookup: which visitors the service holds for the address."""

    async def post(self) -> None:
        _body, visitor_ids = await self.subjects()
        found = []
        for visitor_id in visitor_ids:
            profile = await visitors.find_profile(self.deps.store, self.site["_id"], visitor_id)
            found.append({"visitorId": visitor_id,
                          "profileHeld": profile is not None,
                          "firstSeen": (profile or {}).get("firstSeen"),
                          "lastSeen": (profile or {}).get("lastSeen")})
        self.write_json({"count": len(found), "visitors": found})


class ExportByEmailHandler(ByEmailHandler):
    """POST /ingest/privacy/export: one visitor's access export per page, as the dashboard's."""

    schema: ClassVar[str] = "PrivacyExportByEmail"

    async def post(self) -> None:
        body, visitor_ids = await self.subjects()
        page, pages = body.get("page", 1), len(visitor_ids)
        head = {"page": page, "pages": pages, "done": page >= pages}
        if page > pages:
            self.write_json({**head, "visitors": []})
            return
        visitor_id = visitor_ids[page - 1]
        request = await self.open_request("access", visitor_id)
        export = VisitorExport(self.deps.store, self.site, visitor_id, request["_id"])
        try:
            profile, keys = await export.open()
        except NotFound:
            # Erased between the lookup and now: nothing left to show for this page.
            await request_log.fail_request(self.deps.store, request["_id"], "no data held")
            self.write_json({**head, "visitors": []})
            return
        self.write(compact_json(head)[:-1] + ',"visitors":[')
        await write_export(self, export, profile, keys)
        self.write("]}")
        await request_log.complete_request(self.deps.store, request["_id"],
                                           outcome={"manifest": export.manifest})
        await audit.record(self.deps.store, action="visitor.exported",
                           actor_user_id=SITE_KEY_ACTOR, account_id=None,
                           organization_id=self.site["organizationId"], site_id=self.site["_id"],
                           details={"requestId": request["_id"], "manifest": export.manifest})
        self.finish()


class EraseByEmailHandler(ByEmailHandler):
    """POST /ingest/privacy/erase: every visitor of the address erased, one receipt each."""

    async def post(self) -> None:
        _body, visitor_ids = await self.subjects()
        receipts: list[dict[str, Any]] = []
        totals: dict[str, int] = {}
        for visitor_id in visitor_ids:
            request = await self.open_request("erasure", visitor_id)
            try:
                receipt = await erase_visitor(self.deps.store, self.site, visitor_id,
                                              request=request, actor_user_id=SITE_KEY_ACTOR,
                                              account_id=None)
            except NotFound:
                await request_log.fail_request(self.deps.store, request["_id"], "no data held")
                continue
            receipts.append({**receipt.as_dict(), "labels": receipt_labels(receipt.counts)})
            for category, count in receipt.counts.items():
                totals[category] = totals.get(category, 0) + count
        anonymised = sum(count for category, count in totals.items()
                         if category in ANONYMISED_CATEGORIES)
        self.write_json({"visitors": len(receipts), "counts": totals,
                         "labels": receipt_labels(totals),
                         "itemsRemoved": sum(totals.values()) - anonymised,
                         "itemsAnonymised": anonymised, "receipts": receipts})


default_handlers = [
    (r"/ingest/privacy/lookup", LookupByEmailHandler),
    (r"/ingest/privacy/export", ExportByEmailHandler),
    (r"/ingest/privacy/erase", EraseByEmailHandler),
]
