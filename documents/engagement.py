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
from documents.store import ASCENDING, DuplicateKeyError, Index, Store

INDEXES = [
    Index("survey_responses", (("siteId", ASCENDING), ("visitorId", ASCENDING))),
    Index("survey_responses", (("siteId", ASCENDING), ("sessionId", ASCENDING))),
    Index("chat_transcripts", (("siteId", ASCENDING), ("visitorId", ASCENDING))),
    Index("chat_transcripts", (("siteId", ASCENDING), ("emails", ASCENDING))),
    Index("consent_decisions", (("siteId", ASCENDING), ("visitorId", ASCENDING),
                                ("decidedAt", ASCENDING))),
    # Each site's oldest items, for retention (documents/retention.py).
    Index("survey_responses", (("siteId", ASCENDING), ("answeredAt", ASCENDING))),
    Index("chat_transcripts", (("siteId", ASCENDING), ("startedAt", ASCENDING))),
    Index("consent_decisions", (("siteId", ASCENDING), ("decidedAt", ASCENDING))),
]
SURVEY_EXPIRY = Expiry("survey_responses", "answeredAt")
CHAT_EXPIRY = Expiry("chat_transcripts", "startedAt")
CONSENT_EXPIRY = Expiry("consent_decisions", "decidedAt")


async def insert_once(store: Store, collection: str, document: dict[str, Any]) -> bool:
    """Insert a document with a client-given id; False when it exists (a retried request)."""
    try:
        await store.collection(collection).insert_one(document)
    except DuplicateKeyError:
        return False
    return True

