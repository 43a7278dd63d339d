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
