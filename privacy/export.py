"""The access and portability export of one visitor (spec §2 "Access export file", GDPR Art. 15
and 20), streamed as one JSON document.

The document is produced as text fragments, one item at a time from database cursors, so memory
does not grow with the visitor's history. Recording footage is described, not embedded; faults
are reduced to what and when (never the aggregate error record); profiles of the same person on
other browsers (same `wpUserId`) are listed separately, never merged. There is one section per
entry of `privacy.subject_data.VISITOR_DATA`, the table erasure walks too, so everything erasure
deletes or anonymises is shown here; the manifest at the end counts each. A visitor with no
profile but other data held (a consent decision, a recording) is exported as well.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

from derived import daily_figures, derivation, visits
from documents import (
    activity,
    audit,
    commerce,
    engagement,
    error_outbox,
    error_records,
    heatmaps,
    interactions,
    leads,
    recordings,
    retention,
    visitors,
)
from documents import requests as request_log
from documents.store import ASCENDING, Store
from errors import NotFound
from instants import format_instant
from privacy.subject_data import VISITOR_DATA, SubjectKeys, subject_keys

FORMAT = "visitor-service/access-export/v1"

#: Art. 15(1) information, used where the site has not configured its own.
DEFAULT_TRANSPARENCY: dict[str, Any] = {
    "purposes": [
        "Finding and fixing errors on the shop",
        "Understanding how the shop is used (pageviews, clicks, scroll depth, time on page)",
        "Session replay to reproduce problems, where the visitor consented",
        "Answering enquiries and completing orders (leads and checkout data)",
    ],
    "recipients": [
        "The shop operator (controller)",
        "Visitor Service, as processor, on servers in the European Union",
    ],
    "retention": "Each category is kept for the days listed in retentionPeriods, then deleted "
                 "automatically (error records are kept anonymised), or until erased on request.",
    "source": "Collected from the visitor's browser and the shop's server.",
    "automatedDecisionMaking": "None.",
    "rights": [
        "Access (Art. 15)", "Rectification (Art. 16)", "Erasure (Art. 17)",
        "Restriction of processing (Art. 18)", "Data portability (Art. 20)",
        "Objection (Art. 21)", "Complaint to a supervisory authority (Art. 77)",
    ],
}

CATEGORIES = [
    "identifiers (random visitor id, linked CMS user id)", "device and browser",
    "approximate location (country, anonymised IP address)", "pageviews and time on page",
    "interactions (clicks, rage clicks, dead clicks, scroll depth)", "session recordings",
    "errors encountered", "leads and checkout data",
    "carts and orders reported by the shop (value, currency, status)", "survey answers",
    "chat transcripts",
    "consent decisions",
]


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_instant(value)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return str(value)


def _json(value: Any) -> str:
    return json.dumps(value, default=_default, ensure_ascii=False, separators=(",", ":"))


def _profile_view(profile: dict[str, Any]) -> dict[str, Any]:
    location, device = profile.get("location", {}), profile.get("device", {})
    return {
        "visitorId": profile["visitorId"],
        "displayName": profile.get("displayName"),
        "firstSeen": profile.get("firstSeen"),
        "lastSeen": profile.get("lastSeen"),
        "linkedUserId": profile.get("wpUserId"),
        "country": location.get("country"),
        "timeZone": location.get("timeZone"),
        "ipAddressAnonymised": location.get("ipAddress"),
        "browser": device.get("browser"),
        "os": device.get("os"),
        "deviceType": device.get("type"),
        "screen": device.get("screen"),
        "language": device.get("language"),
        "restricted": bool(profile.get("restricted")),
        "objected": bool(profile.get("objected")),
    }


class VisitorExport:
    """Streams one visitor's export; counts what it writes for the manifest."""

    def __init__(self, store: Store, site: dict[str, Any], visitor_id: str, request_id: str
                 ) -> None:
        self._store = store
        self._site = site
        self._visitor_id = visitor_id
        self._request_id = request_id
        self.manifest: dict[str, int] = {}

    async def open(self) -> tuple[dict[str, Any] | None, SubjectKeys]:
        """The profile (None when only other data is held) and keys; NotFound before anything
        is written when nothing at all is held."""
        profile = await visitors.find_profile(self._store, self._site["_id"], self._visitor_id)
        keys = await subject_keys(self._store, self._site["_id"], self._visitor_id)
        if profile is None and not await self._holds_anything(keys):
            raise NotFound("no data is held for this visitor")
        return profile, keys

    async def complete(self, *, actor_user_id: str, account_id: str | None) -> None:
        """After the last byte: the request completed with the manifest, and audited, together."""

        async def complete(session: Any) -> None:
            await request_log.complete_request(self._store, self._request_id,
                                               outcome={"manifest": self.manifest},
                                               session=session)
            await audit.record(self._store, action="visitor.exported",
                               actor_user_id=actor_user_id, account_id=account_id,
                               organization_id=self._site["organizationId"],
                               site_id=self._site["_id"],
                               details={"requestId": self._request_id,
                                        "manifest": self.manifest}, session=session)

        async with request_log.failed_if_the_store_fails(self._store, self._request_id):
            await self._store.transaction(complete)

    async def _holds_anything(self, keys: SubjectKeys) -> bool:
        for source in VISITOR_DATA:
            if await self._store.collection(source.collection).find_one(
                    source.find(keys), {"_id": 1}) is not None:
                return True
        return False

    async def fragments(self, profile: dict[str, Any] | None, keys: SubjectKeys
                        ) -> AsyncIterator[str]:
        """The document, as JSON text fragments: one section per entry of VISITOR_DATA."""
        transparency = {**DEFAULT_TRANSPARENCY,
                        **self._site.get("settings", {}).get("transparency", {})}
        yield "{" + _json("format") + ":" + _json(FORMAT)
        yield "," + _json("requestId") + ":" + _json(self._request_id)
        yield "," + _json("generatedAt") + ":" + _json(datetime.now(UTC))
        yield "," + _json("site") + ":" + _json({"id": self._site["_id"],
                                                 "name": self._site["name"]})
        yield "," + _json("information") + ":" + _json({
            **transparency, "categories": CATEGORIES,
            "retentionPeriods": retention.periods(self._site)})
        sections = self._sections(keys)
        for source in VISITOR_DATA:
            if source.section == "visitor":
                yield "," + _json("visitor") + ":" + _json(
                    _profile_view(profile) if profile is not None
                    else {"visitorId": self._visitor_id, "profileHeld": False})
                self.manifest[source.collection] = int(profile is not None)
                continue
            yield "," + _json(source.section) + ":["
            count = 0
            async for item in sections[source.category](source.find(keys)):
                yield ("," if count else "") + _json(item)
                count += 1
            yield "]"
            self.manifest[source.collection] = count
        yield "," + _json("linkedProfiles") + ":["
        linked = 0
        if profile is not None:
            async for other in self._linked_profiles(profile):
                yield ("," if linked else "") + _json(other)
                linked += 1
        yield "]"
        yield "," + _json("manifest") + ":" + _json({
            "collections": dict(sorted(self.manifest.items())), "linkedProfiles": linked})
        yield "}"

    def _sections(self, keys: SubjectKeys
                  ) -> dict[str, Callable[[dict[str, Any]], AsyncIterator[dict[str, Any]]]]:
        """How each category of VISITOR_DATA is shown, given the query that finds it."""
        return {
            "pageviews": lambda _query: self._pageviews(),
            "interactions": self._interactions,
            "recordingSegments": self._segments,
            "recordings": self._recordings,
            "heatmapImages": lambda query: self._heatmaps(query, keys),
            "leads": self._leads,
            "commerceEvents": self._commerce_events,
            "orders": self._orders,
            "chatTranscripts": self._chats,
            "surveyResponses": self._surveys,
            "consentDecisions": self._consents,
            "errorOccurrences": self._faults,
            "errorSessionLinks": self._error_sessions,
            "pendingErrorJobs": lambda query: self._error_reports(error_outbox.OUTBOX, query,
                                                                  "receivedAt"),
            "failedErrorJobs": lambda query: self._error_reports(error_records.FAILED_JOBS, query,
                                                                 "failedAt"),
            "errorRecordsAnonymised": lambda query: self._error_records(query, keys),
            "activeDays": self._active_days,
            "errorDays": self._error_days,
            "visits": self._visits,
            "pendingFigureFacts": self._pending_facts,
            "pendingRecordingMarks": self._pending_marks,
        }

    def _find(self, collection: str, query: dict[str, Any], sort: str,
              projection: dict[str, Any] | None = None) -> Any:
        return self._store.collection(collection).find(query, projection).sort(sort, ASCENDING)

    async def _pageviews(self) -> AsyncIterator[dict[str, Any]]:
        async for event in activity.pageviews_of(self._store, self._site["_id"],
                                                 self._visitor_id):
            yield {key: event.get(key) for key in ("id", "at", "url", "title", "referrer",
                                                  "duration", "sessionId", "product",
                                                  "source")}

    async def _leads(self, query: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        async for lead in self._find(leads.COLLECTION, query, "createdAt"):
            yield {"id": lead["_id"], **{key: lead.get(key) for key in (
                "createdAt", "kind", "formId", "url", "email", "name", "phone", "fields", "cart",
                "ecommerceSessionId", "orderCompleted")}}

    async def _commerce_events(self, query: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        async for event in self._find(commerce.EVENTS, query, "occurredAt"):
            currency = event.get("currency")
            yield {"id": event.get("eventId"), **{key: event.get(key) for key in (
                "type", "occurredAt", "sessionId", "orderId", "productId", "quantity",
                "currency")}, **{key: commerce.decimal_text(event[key], currency)
                                 for key in ("price", "total", "amount") if key in event}}

    async def _orders(self, query: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        async for order in self._find(commerce.ORDERS, query, "placedAt"):
            view = commerce.order_view(order)
            yield {"orderId": view["orderId"], "status": view["status"],
                   "placedAt": view["placedAt"], "paidAt": view["paidAt"],
                   "currency": view["currency"], "total": view["totalText"],
                   "refunded": commerce.decimal_text(view["refunded"], view["currency"])
                   if view["currency"] else None, "sessionId": view["sessionId"]}

    async def _recordings(self, query: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        async for recording in self._find(recordings.COLLECTION, query, "startedAt"):
            yield {"id": recording["_id"], **{key: recording.get(key) for key in (
                "sessionId", "startedAt", "endedAt", "endReason", "pages", "country", "device",
                "marks")},
                "legacyFootage": recording.get("legacyFootage")}

    async def _segments(self, query: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        async for segment in self._find(f"{recordings.SEGMENTS_BUCKET}.files", query, "uploadDate",
                                        {"filename": 1, "length": 1, "metadata": 1}):
            metadata = segment.get("metadata", {})
            yield {"name": segment.get("filename"), "recordingId": metadata.get("recordingId"),
                   "seq": metadata.get("seq"), "startedAt": metadata.get("startedAt"),
                   "endedAt": metadata.get("endedAt"), "pageUrl": metadata.get("pageUrl"),
                   "bytes": segment.get("length")}

    async def _interactions(self, query: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        async for bucket in self._find(interactions.COLLECTION, query, "firstAt"):
            for event in bucket.get("events", []):
                yield {key: value for key, value in event.items() if key != "_id"}

    async def _surveys(self, query: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        async for response in self._find(engagement.SURVEY_RESPONSES, query, "answeredAt"):
            yield {"id": response["_id"], "surveyId": response.get("surveyId"),
                   "answeredAt": response.get("answeredAt"), "answers": response.get("answers"),
                   "linkedBy": "visitor" if response.get("visitorId") else "session"}

    async def _consents(self, query: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        async for decision in self._find(engagement.CONSENT_DECISIONS, query, "decidedAt"):
            yield {key: decision.get(key) for key in ("decision", "signal", "categories",
                                                     "url", "decidedAt")}

    async def _faults(self, query: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        async for occurrence in self._find(error_records.OCCURRENCES, query, "occurredAt"):
            yield {"what": f"{occurrence.get('type')}: {occurrence.get('message')}",
                   "type": occurrence.get("type"), "message": occurrence.get("message"),
                   "when": occurrence.get("occurredAt"), "sessionId": occurrence.get("sessionId")}

    async def _error_sessions(self, query: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        async for link in self._find(error_records.SESSION_LINKS, query, "sessionId"):
            yield {"sessionId": link.get("sessionId"), "errorId": link.get("errorId")}

    async def _active_days(self, query: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        async for day in self._find(daily_figures.VISITOR_DAYS, query, "day"):
            yield {key: day.get(key) for key in ("day", "pageviews", "country", "device")}

    async def _error_days(self, query: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        async for day in self._find(daily_figures.ERROR_VISITOR_DAYS, query, "day"):
            yield {key: day.get(key) for key in ("errorId", "day", "occurrences")}

    async def _visits(self, query: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        async for visit in self._find(visits.COLLECTION, query, "startedAt"):
            yield {key: visit.get(key) for key in ("sessionId", "startedAt", "endedAt",
                                                  "entry", "exit", "source", "pageviews",
                                                  "pages")}

    async def _pending_facts(self, query: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        async for fact in self._find(derivation.COLLECTION, query, "recordedAt",
                                     {"_id": 0, "kind": 1, "recordedAt": 1, "records": 1}):
            yield {"kind": fact.get("kind"), "recordedAt": fact.get("recordedAt"),
                   "records": [{key: record.get(key) for key in ("at", "url", "kind")
                                if key in record} for record in fact.get("records") or []]}

    async def _pending_marks(self, query: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        async for pending in self._find(recordings.MARKS_PENDING, query, "recordingId",
                                        {"_id": 0, "recordingId": 1, "marks": 1}):
            yield {"recordingId": pending.get("recordingId"), "marks": pending.get("marks")}

    async def _chats(self, query: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        async for transcript in self._find(engagement.CHAT_TRANSCRIPTS, query, "startedAt"):
            yield {"id": transcript["_id"], "startedAt": transcript.get("startedAt"),
                   "messages": transcript.get("messages", [])}

    async def _heatmaps(self, query: dict[str, Any], keys: SubjectKeys
                        ) -> AsyncIterator[dict[str, Any]]:
        """Images rendered from the visitor's recordings: described, never embedded."""
        async for image in self._find(f"{heatmaps.BUCKET}.files", query, "uploadDate",
                                      {"uploadDate": 1, "length": 1, "metadata": 1}):
            metadata = image.get("metadata", {})
            yield {"id": image["_id"], "pageUrl": metadata.get("pageUrl"),
                   "renderedAt": image.get("uploadDate"), "bytes": image.get("length"),
                   "fromYourRecordings": sorted(set(metadata.get("sourceRecordingIds", []))
                                                & set(keys.recording_ids))}

    async def _error_reports(self, collection: str, query: dict[str, Any], sort: str
                             ) -> AsyncIterator[dict[str, Any]]:
        """Error reports about the visitor not (yet) processed, reduced to what and when."""
        async for entry in self._find(collection, query, sort, {"job": 1, sort: 1}):
            error = entry.get("job", {}).get("error", {})
            yield {"what": f"{error.get('type')}: {error.get('message')}",
                   "when": error.get("occurredAt") or entry.get(sort),
                   "sessionId": error.get("sessionId")}

    async def _error_records(self, query: dict[str, Any], keys: SubjectKeys
                             ) -> AsyncIterator[dict[str, Any]]:
        """Aggregates that point at the visitor: the fault and which identifiers of the
        visitor it holds (what erasure clears); never the aggregate itself."""
        projection = {"type": 1, "message": 1, "lastOccurredAt": 1, "visitorId": 1,
                      "sessionId": 1, "wpUserId": 1, "ipAddress": 1, "context": 1}
        async for record in self._find(error_records.ERRORS, query, "lastOccurredAt", projection):
            held = [name for name in ("visitorId", "sessionId") if record.get(name) in
                    (keys.visitor_id, *keys.session_ids)]
            held += [name for name in ("wpUserId", "ipAddress", "context") if record.get(name)]
            yield {"what": f"{record.get('type')}: {record.get('message')}",
                   "when": record.get("lastOccurredAt"), "holdsAboutYou": held}

    async def _linked_profiles(self, profile: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        if not profile.get("wpUserId"):
            return
        cursor = self._find(visitors.COLLECTION, {"siteId": self._site["_id"],
                                         "wpUserId": profile["wpUserId"],
                                         "visitorId": {"$ne": self._visitor_id}}, "firstSeen")
        async for other in cursor:
            yield _profile_view(other)

