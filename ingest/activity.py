"""The direct ingest kinds: pageviews, visitors, leads, surveys, chats and consent decisions.

Each function admits the item through the privacy gate, writes it, updates the visitor profile
and counts the outcome. Only errors are asynchronous (tasks/); these are written during the
request (spec §1, data flow 5).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from derived import daily_figures, derivation, visits
from documents import activity, engagement, leads, visitors
from documents.accounts import new_id
from ingest.intake import Outcome, VisitorIntake, parse_time
from ingest.recordings import RecordingLifecycle
from instants import format_instant
from privacy.gate import ItemKind
from realtime.bus import EventBus


async def record_pageview(intake: VisitorIntake, site: dict[str, Any], payload: dict[str, Any],
                          *, attribution: dict[str, Any] | None = None) -> Outcome:
    """Store a pageview in the visitor's bucket and update the profile."""
    decision = await intake.admit(site, "pageview", payload, held_refused_by_write=True)
    if not decision.allowed:
        return Outcome.dropped(decision.reason or "unknown")
    at = parse_time(payload.get("occurredAt"))
    pageview_id = payload.get("pageviewId") or new_id()
    event: dict[str, Any] = {
        "id": pageview_id,
        "at": at,
        "url": payload["url"],
        "title": payload.get("title"),
        "referrer": payload.get("referrer"),
        "sessionId": payload.get("sessionId"),
        "duration": payload.get("duration"),
    }
    if attribution is None and payload.get("productId"):
        attribution = {"productId": str(payload["productId"]), "via": "server"}
    if attribution:
        event["product"] = attribution
    if payload.get("wpUserId"):
        event["wpUserId"] = str(payload["wpUserId"])
    # Where the visit came from, as the landing pageview's raw facts (derived/visits.py);
    # after the gate, so addresses in the URL and referrer are already anonymised.
    source = visits.landing_source(payload["url"], payload.get("referrer"),
                                   visits.own_hostnames(site.get("allowedOrigins", ())))
    if source:
        event["source"] = source
    facts = intake.describe_visitor(payload)

    async def write(session: Any) -> None:
        # The profile's counter gives the pageview its ordinal, so both writes go together:
        # a failure or a retry leaves neither a counted pageview nor a stored one behind alone.
        counts = await visitors.touch(
            intake.store, site["_id"], payload["visitorId"], seen_at=at, facts=facts,
            activity={"kind": "pageview", "at": at, "url": payload["url"],
                      "title": payload.get("title")},
            counts={"pageviews": 1}, refuse_held=True, session=session,
        )
        await activity.append_pageview(intake.store, site["_id"], payload["visitorId"], event,
                                       ordinal=int(counts.get("pageviews", 1)),
                                       may_repeat="pageviewId" in payload, session=session)
        # What the pageview adds to the figures is folded in later (derived/derivation.py):
        # an insert of its own, which no other visitor's request can conflict with.
        await derivation.add_fact(
            intake.store, site["_id"], payload["visitorId"], daily_figures.PAGEVIEW,
            [{"at": at, "url": payload["url"], "sessionId": event["sessionId"],
              "source": source, "product": bool(attribution)}], country=facts.country,
            device=facts.device_type if facts.device_type != "unknown" else None,
            session=session)

    try:
        stored = await intake.store.write_once(write)
    except visitors.VisitorHeld as held:
        return intake.refused_held("pageview", held)
    intake.count("pageview", "stored" if stored else "duplicate")
    return Outcome(True, None, pageview_id)


async def register_visitor(intake: VisitorIntake, site: dict[str, Any], payload: dict[str, Any]
                           ) -> Outcome:
    """Create or update the visitor profile from what the shop knows."""
    decision = await intake.admit(site, "visitor", payload)
    if not decision.allowed:
        return Outcome.dropped(decision.reason or "unknown")
    await visitors.touch(
        intake.store, site["_id"], payload["visitorId"],
        seen_at=parse_time(payload.get("occurredAt")), facts=intake.describe_visitor(payload),
    )
    intake.count("visitor", "stored")
    return Outcome(True, None, payload["visitorId"])


async def record_lead(intake: VisitorIntake, bus: EventBus, recordings: RecordingLifecycle,
                      site: dict[str, Any], payload: dict[str, Any]) -> Outcome:
    """Store a lead, name the visitor after it, and announce it live (`new_lead`).

    A lead that completes an order also ends the visitor's recording (spec §3).
    """
    decision = await intake.admit(site, "lead", payload, held_refused_by_write=True)
    if not decision.allowed:
        return Outcome.dropped(decision.reason or "unknown")
    at = parse_time(payload.get("occurredAt"))
    lead_id = payload.get("leadId") or new_id()
    email = payload["email"].strip().lower()
    display_name = (payload.get("name") or "").strip() or email
    facts = intake.describe_visitor(payload)
    lead = {
        "_id": lead_id,
        "siteId": site["_id"],
        "visitorId": payload["visitorId"],
        "sessionId": payload.get("sessionId"),
        "createdAt": at,
        "kind": payload.get("kind", "form"),
        "formId": payload.get("formId"),
        "url": payload.get("url"),
        "email": email,
        "name": payload.get("name"),
        "phone": payload.get("phone"),
        "fields": payload.get("fields", {}),
        "cart": payload.get("cart"),
        "ecommerceSessionId": payload.get("ecommerceSessionId"),
        "wpUserId": facts.wp_user_id,
        "orderCompleted": bool(payload.get("orderCompleted")),
    }

    async def write(session: Any) -> None:
        await leads.insert_lead(intake.store, lead, session=session)
        await visitors.touch(
            intake.store, site["_id"], payload["visitorId"], seen_at=at, facts=facts,
            activity={"kind": "lead", "at": at, "leadId": lead_id},
            counts={"leads": 1}, display_name=display_name, email=email, refuse_held=True,
            session=session,
        )
        # Its day's count and its recording's mark are folded in later (derived/derivation.py).
        await derivation.add_fact(intake.store, site["_id"], payload["visitorId"],
                                  daily_figures.LEAD, [{"at": at}],
                                  sessionId=payload.get("sessionId"), session=session)

    try:
        stored = await intake.store.write_once(write)
    except visitors.VisitorHeld as held:
        return intake.refused_held("lead", held)
    intake.count("lead", "stored" if stored else "duplicate")
    if lead["orderCompleted"]:
        # After the lead, and again on a retry: ending is idempotent, and a first attempt that
        # failed here still ends the recording when the caller sends the lead again.
        await recordings.end_for_order(site["_id"], payload["visitorId"])
    if not stored:
        return Outcome(True, None, lead_id)
    await bus.publish(site["_id"], {
        "type": "new_lead",
        "siteId": site["_id"],
        "id": lead_id,
        "time": format_instant(at),
        "lead": {"id": lead_id, "displayName": display_name, "visitorId": payload["visitorId"]},
    })
    return Outcome(True, None, lead_id)


async def _store_once(intake: VisitorIntake, site: dict[str, Any], payload: dict[str, Any], *,
                      kind: ItemKind, collection: str, id_field: str,
                      document: Callable[[], dict[str, Any]]) -> Outcome:
    """Admit the item, then insert it under its client-given id (or a new one) at most once."""
    decision = await intake.admit(site, kind, payload)
    if not decision.allowed:
        return Outcome.dropped(decision.reason or "unknown")
    item_id = payload.get(id_field) or new_id()
    stored = await engagement.insert_once(intake.store, collection,
                                          {"_id": item_id, "siteId": site["_id"], **document()})
    intake.count(kind, "stored" if stored else "duplicate")
    return Outcome(True, None, item_id)


async def record_survey(intake: VisitorIntake, site: dict[str, Any], payload: dict[str, Any]
                        ) -> Outcome:
    """Store a survey response, linked by visitor or only by session."""
    return await _store_once(intake, site, payload, kind="survey",
                             collection=engagement.SURVEY_RESPONSES, id_field="responseId",
                             document=lambda: {
        "visitorId": payload.get("visitorId"),
        "sessionId": payload.get("sessionId"),
        "surveyId": payload["surveyId"],
        "url": payload.get("url"),
        "answeredAt": parse_time(payload.get("occurredAt")),
        "answers": payload["answers"],
    })


def _transcript(payload: dict[str, Any]) -> dict[str, Any]:
    messages = [
        {"from": m["from"], "text": m["text"],
         "at": parse_time(m.get("at"), field=f"messages.{index}.at")}
        for index, m in enumerate(payload["messages"])
    ]
    return {
        "visitorId": payload.get("visitorId"),
        "emails": sorted({e.strip().lower() for e in payload.get("emails", []) if e.strip()}),
        "startedAt": messages[0]["at"] if messages else datetime.now(UTC),
        "messages": messages,
    }


async def record_chat(intake: VisitorIntake, site: dict[str, Any], payload: dict[str, Any]
                      ) -> Outcome:
    """Store a chat transcript with its messages, found later by visitor id or e-mail."""
    return await _store_once(intake, site, payload, kind="chat",
                             collection=engagement.CHAT_TRANSCRIPTS,
                             id_field="transcriptId", document=lambda: _transcript(payload))


async def record_consent(intake: VisitorIntake, site: dict[str, Any], payload: dict[str, Any]
                         ) -> Outcome:
    """Store a consent decision: what, by which signal, when."""
    return await _store_once(intake, site, payload, kind="consent",
                             collection=engagement.CONSENT_DECISIONS, id_field="decisionId",
                             document=lambda: {
        "visitorId": payload["visitorId"],
        "decision": payload["decision"],
        "signal": payload["signal"],
        "categories": payload.get("categories", []),
        "url": payload.get("url"),
        "decidedAt": parse_time(payload.get("occurredAt")),
    })
