"""Data-subject requests in the dashboard API: export, erasure, restriction, objection (and the
list of visitors under either), the session timeline, and the request log.

Every data-subject operation is logged as a request (received, due in one month, completed) and
in the audit trail. Only owners and admins may carry them out or list who is under a hold; a
user of another organization gets 404.
"""

from __future__ import annotations

import re
from typing import Any

from documents import recordings, visitors
from documents import requests as request_log
from errors import NotFound
from handlers.base import BaseHandler
from handlers.site_api import CLIENT_ID, SITE_ID, SiteDataHandler, write_export
from privacy.erasure import erase_visitor
from privacy.export import VisitorExport
from privacy.holds import FLAG, Hold, switch_hold
from privacy.subject_data import receipt_labels

VISITOR_ID = CLIENT_ID
#: `:id` of the /dashboard/visitors routes: the profile id, `<siteId>:<visitorId>`.
PROFILE_ID = SITE_ID + ":" + VISITOR_ID
_PROFILE_ID = re.compile(r"^" + PROFILE_ID + r"$")


class SubjectHandler(SiteDataHandler):
    """Subject operations: the site for owners and admins (`admin_site`), the request log."""

    async def open_request(self, kind: request_log.RequestType, site: dict[str, Any],
                           visitor_id: str, details: dict[str, Any] | None = None
                           ) -> dict[str, Any]:
        """Log the request as received (its completion is audited with the change)."""
        return await request_log.open_request(
            self.deps.store, kind=kind, site=site,
            subject_digest=self.deps.subject_digester.digest(site["_id"], visitor_id),
            actor_user_id=self.user.id, details=details, visitor_id=visitor_id)


class VisitorExportHandler(SubjectHandler):
    """GET /api/v1/sites/{siteId}/visitors/{visitorId}/export.json: the access export."""

    async def get(self, site_id: str, visitor_id: str) -> None:
        site = await self.admin_site(site_id)
        request = await self.open_request("access", site, visitor_id)
        export = VisitorExport(self.deps.store, site, visitor_id, request["_id"])
        try:
            profile, keys = await export.open()
        except NotFound:
            await request_log.fail_request(self.deps.store, request["_id"], "no data held")
            raise
        self.set_header("Content-Disposition",
                        f'attachment; filename="visitor-export-{request["_id"]}.json"')
        await write_export(self, export, profile, keys)
        await export.complete(actor_user_id=self.user.id, account_id=self.user.account_id)
        self.finish()


async def _erase(handler: SubjectHandler, site_id: str, visitor_id: str) -> None:
    site = await handler.admin_site(site_id)
    request = await handler.open_request("erasure", site, visitor_id)
    try:
        async with request_log.failed_if_the_store_fails(handler.deps.store, request["_id"]):
            receipt = await erase_visitor(handler.deps.store, site, visitor_id, request=request,
                                          actor_user_id=handler.user.id,
                                          account_id=handler.user.account_id)
    except NotFound:
        await request_log.fail_request(handler.deps.store, request["_id"], "no data held")
        raise
    handler.write_json({**receipt.as_dict(), "labels": receipt_labels(receipt.counts)})


class VisitorErasureHandler(SubjectHandler):
    """DELETE /api/v1/sites/{siteId}/visitors/{visitorId}/data: erase, answer a receipt."""

    async def delete(self, site_id: str, visitor_id: str) -> None:
        await _erase(self, site_id, visitor_id)


class DashboardErasureHandler(SubjectHandler):
    """DELETE /dashboard/visitors/{siteId}:{visitorId}/data: the 'Erase Data' button."""

    async def delete(self, site_id: str, visitor_id: str) -> None:
        await _erase(self, site_id, visitor_id)


class DashboardSessionsHandler(SubjectHandler):
    """GET /dashboard/visitors/{siteId}:{visitorId}/sessions: recordings, oldest first."""

    async def get(self, site_id: str, visitor_id: str) -> None:
        site = await self.readable_site(site_id)
        profile = await visitors.find_profile(self.deps.store, site["_id"], visitor_id)
        if profile is None or profile.get("restricted"):
            raise NotFound("visitor not found")
        timeline = await recordings.session_timeline(self.deps.store, site["_id"], visitor_id)
        self.write_json(timeline)


class PrivacySwitchHandler(SubjectHandler):
    """PUT .../restriction or .../objection: flag the visitor (GDPR Art. 18 / Art. 21)."""

    async def put(self, site_id: str, visitor_id: str, switch: str) -> None:
        # The site check comes first, so a stranger learns nothing from validation errors.
        site = await self.admin_site(site_id)
        body = self.validated_body("PrivacySwitch")
        kind: Hold = "restriction" if switch == "restriction" else "objection"
        request = await self.open_request(kind, site, visitor_id, {"on": body["on"]})
        await switch_hold(self.deps.store, site, visitor_id, kind, body["on"],
                          request_id=request["_id"], actor_user_id=self.user.id,
                          account_id=self.user.account_id)
        self.write_json({"visitorId": visitor_id, FLAG[kind]: body["on"],
                         "requestId": request["_id"]})


class PrivacyHoldsHandler(SubjectHandler):
    """GET /api/v1/sites/{siteId}/privacy-holds: restricted or objecting visitors, to lift.

    A restricted visitor is hidden from every other dashboard read, so this is the only way
    back to the switch once the profile is closed. It answers ids, flags and times only.
    """

    async def get(self, site_id: str) -> None:
        site = await self.admin_site(site_id)
        holds = await visitors.privacy_holds(self.deps.store, site["_id"])
        self.write_json({"items": [hold.as_dict() for hold in holds]})


class RequestLogHandler(BaseHandler):
    """GET /api/v1/requests: data-subject requests with received, due and completed times."""

    async def get(self) -> None:
        administered = [org for org in self.user.roles if self.user.can_administer(org)]
        entries = await request_log.requests_for_organizations(self.deps.store, administered)
        names = await visitors.display_names(self.deps.store, [
            (entry["siteId"], entry["visitorId"]) for entry in entries if entry.get("visitorId")])
        self.write_json([{
            "id": entry["_id"], "type": entry["type"], "siteId": entry["siteId"],
            "status": entry["status"], "receivedAt": entry["receivedAt"],
            "dueAt": entry["dueAt"], "completedAt": entry.get("completedAt"),
            "actorUserId": entry.get("actorUserId"),
            "failureReason": entry.get("failureReason"),
            "visitorId": entry.get("visitorId"),
            "visitorName": names.get((entry["siteId"], entry.get("visitorId"))),
        } for entry in entries])


default_handlers = [
    (rf"/api/v1/sites/{SITE_ID}/visitors/{VISITOR_ID}/export\.json", VisitorExportHandler),
    (rf"/api/v1/sites/{SITE_ID}/visitors/{VISITOR_ID}/data", VisitorErasureHandler),
    (rf"/api/v1/sites/{SITE_ID}/visitors/{VISITOR_ID}/(restriction|objection)",
     PrivacySwitchHandler),
    (rf"/api/v1/sites/{SITE_ID}/privacy-holds", PrivacyHoldsHandler),
    (rf"/dashboard/visitors/{PROFILE_ID}/data", DashboardErasureHandler),
    (rf"/dashboard/visitors/{PROFILE_ID}/sessions", DashboardSessionsHandler),
    (r"/api/v1/requests", RequestLogHandler),
]
