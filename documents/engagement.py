"""Survey responses, chat transcripts and consent decisions (spec §2 "Other records").

Surveys are linked by visitor or only by the browser session; chat transcripts by visitor id
and/or the e-mail addresses in them, which is how erasure still finds a transcript whose lead is
gone. A transcript embeds its messages: one request carries a bounded transcript, and one
document makes storing and erasing it atomic without a transaction.
Consent decisions record what was decided, by which signal, and when.
"""

from __future__ import annotations

from typing import Any

from documents.retention import Expiry
from documents.store import ASCENDING, DESCENDING, DuplicateKeyError, Index, Store

SURVEY_RESPONSES = "survey_responses"
CHAT_TRANSCRIPTS = "chat_transcripts"
CONSENT_DECISIONS = "consent_decisions"

INDEXES = [
    Index(SURVEY_RESPONSES, (("siteId", ASCENDING), ("visitorId", ASCENDING))),
    Index(SURVEY_RESPONSES, (("siteId", ASCENDING), ("sessionId", ASCENDING))),
    Index(CHAT_TRANSCRIPTS, (("siteId", ASCENDING), ("visitorId", ASCENDING))),
    Index(CHAT_TRANSCRIPTS, (("siteId", ASCENDING), ("emails", ASCENDING))),
    Index(CONSENT_DECISIONS, (("siteId", ASCENDING), ("visitorId", ASCENDING),
                              ("decidedAt", ASCENDING))),
    # Each site's oldest items, for retention (documents/retention.py).
    Index(SURVEY_RESPONSES, (("siteId", ASCENDING), ("answeredAt", ASCENDING))),
    Index(CHAT_TRANSCRIPTS, (("siteId", ASCENDING), ("startedAt", ASCENDING))),
    Index(CONSENT_DECISIONS, (("siteId", ASCENDING), ("decidedAt", ASCENDING))),
    # A survey's results (documents/surveys.py): its answers, newest first.
    Index(SURVEY_RESPONSES, (("siteId", ASCENDING), ("surveyId", ASCENDING),
                             ("answeredAt", DESCENDING))),
    # What a visitor said, newest first (the visitor profile's `said`).
    Index(SURVEY_RESPONSES, (("siteId", ASCENDING), ("visitorId", ASCENDING),
                             ("answeredAt", DESCENDING))),
    Index(CHAT_TRANSCRIPTS, (("siteId", ASCENDING), ("visitorId", ASCENDING),
                             ("startedAt", DESCENDING))),
]
SURVEY_EXPIRY = Expiry(SURVEY_RESPONSES, "answeredAt")
CHAT_EXPIRY = Expiry(CHAT_TRANSCRIPTS, "startedAt")
CONSENT_EXPIRY = Expiry(CONSENT_DECISIONS, "decidedAt")


async def insert_once(store: Store, collection: str, document: dict[str, Any]) -> bool:
    """Insert a document with a client-given id; False when it exists (a retried request)."""
    try:
        await store.collection(collection).insert_one(document)
    except DuplicateKeyError:
        return False
    return True


def survey_answers(store: Store, filter_: dict[str, Any]) -> Any:
    """A cursor over the survey answers `filter_` finds (one survey's), newest first."""
    return store.collection(SURVEY_RESPONSES).find(filter_).sort(
        [("answeredAt", DESCENDING), ("_id", DESCENDING)])


async def count_survey_answers(store: Store, filter_: dict[str, Any], *, up_to: int) -> int:
    """How many survey answers `filter_` finds, counting no further than `up_to`."""
    return await store.collection(SURVEY_RESPONSES).count_documents(filter_, limit=up_to)


async def latest_survey_responses_of_visitor(store: Store, site_id: str, visitor_id: str, *,
                                             limit: int) -> list[dict[str, Any]]:
    """The visitor's newest survey responses, newest first (those linked only by a session
    have no visitor to show them on)."""
    return await store.collection(SURVEY_RESPONSES).find(
        {"siteId": site_id, "visitorId": visitor_id},
        {"surveyId": 1, "url": 1, "answeredAt": 1, "answers": 1},
    ).sort([("answeredAt", DESCENDING), ("_id", DESCENDING)]).limit(limit).to_list(None)


async def latest_chat_messages_of_visitor(store: Store, site_id: str, visitor_id: str,
                                          emails: list[str], *, limit: int
                                          ) -> list[dict[str, Any]]:
    """Up to `limit` of the visitor's own chat messages, newest first, each with its transcript
    id: from the transcripts of the visitor and those that name none but carry one of the
    visitor's e-mail addresses (a transcript of another visitor is theirs, never merged).

    Transcripts are read newest started first with their last `limit` messages each, until
    `limit` messages are found, so a transcript of a thousand messages costs no more than one
    of `limit`.
    """
    owners: list[dict[str, Any]] = [{"visitorId": visitor_id}]
    if emails:
        owners.append({"visitorId": None, "emails": {"$in": emails}})
    transcripts = store.collection(CHAT_TRANSCRIPTS).find(
        {"siteId": site_id, "$or": owners}, {"messages": {"$slice": -limit}, "startedAt": 1},
    ).sort([("startedAt", DESCENDING), ("_id", DESCENDING)]).limit(limit)
    said: list[dict[str, Any]] = []
    async for transcript in transcripts:
        for message in reversed(transcript.get("messages") or []):
            if isinstance(message, dict) and message.get("from") == "visitor":
                said.append({**message, "transcriptId": transcript["_id"]})
        if len(said) >= limit:
            break
    return said[:limit]
