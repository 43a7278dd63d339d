"""Where a visitor's data lives: the one table that export, erasure and their tests share.

Every collection that can hold a visitor's personal data is listed in `VISITOR_DATA` with how
to find the visitor's documents in it, what erasure does there and the export section that
shows it. The export has one section per entry and erasure walks the same entries, so the two
cannot drift apart; a test fails when the service writes visitor data to a collection the table
does not name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from derived import daily_figures, derivation, visits
from documents import (
    activity,
    commerce,
    engagement,
    error_outbox,
    error_records,
    heatmaps,
    interactions,
    leads,
    recordings,
    visitors,
)
from documents.store import Store

Action = Literal["delete", "anonymise", "delete_files"]


@dataclass(frozen=True)
class SubjectKeys:
    """Everything that identifies one visitor's data within a site, or that of several visitors
    whose expired profiles the retention purge removes together (privacy/retention.py)."""

    site_id: str
    visitor_ids: tuple[str, ...]
    session_ids: tuple[str, ...]
    emails: tuple[str, ...]
    recording_ids: tuple[str, ...]
    #: The shop's ids of the visitors' orders: every event of those orders is theirs, whatever
    #: visitor an event names.
    order_ids: tuple[str, ...] = ()

    @property
    def visitor_id(self) -> str:
        """The visitor, when the keys are one visitor's (an export, an erasure)."""
        (only,) = self.visitor_ids
        return only

    def visitor_match(self) -> Any:
        """The `visitorId` condition that finds the keys' visitors."""
        return _match(self.visitor_ids)


def _match(visitor_ids: tuple[str, ...]) -> Any:
    return visitor_ids[0] if len(visitor_ids) == 1 else {"$in": list(visitor_ids)}


@dataclass(frozen=True)
class VisitorDataSource:
    """One collection holding visitor data, how to find it, and what erasure does to it."""

    collection: str
    category: str
    action: Action
    find: Callable[[SubjectKeys], dict[str, Any]]
    #: The access export's section for this data ("visitor" for the profile).
    section: str
    #: The category in a shop owner's words, as an erasure receipt shows it.
    label: str


def _by_visitor(keys: SubjectKeys) -> dict[str, Any]:
    return {"siteId": keys.site_id, "visitorId": keys.visitor_match()}


def _by_visitor_or_session(keys: SubjectKeys) -> dict[str, Any]:
    return {"siteId": keys.site_id, "$or": [
        {"visitorId": keys.visitor_match()}, {"sessionId": {"$in": list(keys.session_ids)}}]}


def _commerce_events(keys: SubjectKeys) -> dict[str, Any]:
    return {"siteId": keys.site_id, "$or": [
        {"visitorId": keys.visitor_match()}, {"orderId": {"$in": list(keys.order_ids)}}]}


def _chats(keys: SubjectKeys) -> dict[str, Any]:
    return {"siteId": keys.site_id, "$or": [
        {"visitorId": keys.visitor_match()}, {"emails": {"$in": list(keys.emails)}}]}


def _segments(keys: SubjectKeys) -> dict[str, Any]:
    return {"metadata.siteId": keys.site_id, "$or": [
        {"metadata.visitorId": keys.visitor_match()},
        {"metadata.recordingId": {"$in": list(keys.recording_ids)}}]}


def _heatmaps(keys: SubjectKeys) -> dict[str, Any]:
    return {"metadata.siteId": keys.site_id,
            "metadata.sourceRecordingIds": {"$in": list(keys.recording_ids)}}


def _error_jobs(keys: SubjectKeys) -> dict[str, Any]:
    """Error jobs (waiting in the outbox or failed) by the visitor or its sessions."""
    return {"siteId": keys.site_id, "$or": [
        {"job.error.visitorId": keys.visitor_match()},
        {"job.visitorId": keys.visitor_match()},
        {"job.error.sessionId": {"$in": list(keys.session_ids)}}]}


def _profile(keys: SubjectKeys) -> dict[str, Any]:
    return {"siteId": keys.site_id, "visitorId": keys.visitor_match()}


#: Every collection that can hold a visitor's personal data, in erasure order (the profile last,
#: so an interrupted erasure on a store without transactions can always be found and redone).
VISITOR_DATA: tuple[VisitorDataSource, ...] = (
    VisitorDataSource(activity.COLLECTION, "pageviews", "delete", _by_visitor, "pageviews",
                      "Pageview records"),
    VisitorDataSource(interactions.COLLECTION, "interactions", "delete", _by_visitor,
                      "interactions",
                      "Click and scroll records"),
    VisitorDataSource(f"{recordings.SEGMENTS_BUCKET}.files",
                      "recordingSegments", "delete_files", _segments,
                      "recordingSegments",
                      "Recording footage files"),
    VisitorDataSource(recordings.COLLECTION, "recordings", "delete", _by_visitor, "recordings",
                      "Session recordings"),
    VisitorDataSource(f"{heatmaps.BUCKET}.files", "heatmapImages", "delete_files", _heatmaps,
                      "heatmapImages",
                      "Heatmap images drawn from their recordings"),
    VisitorDataSource(leads.COLLECTION, "leads", "delete", _by_visitor, "leads",
                      "Leads"),
    # Carts, checkouts and orders the shop's server reported (documents/commerce.py); an
    # order's figure comes out of the daily figures with it, as a pageview's does.
    VisitorDataSource(commerce.EVENTS, "commerceEvents", "delete", _commerce_events,
                      "commerceEvents", "Cart, checkout and order events from the shop"),
    VisitorDataSource(commerce.ORDERS, "orders", "delete", _by_visitor, "orders",
                      "Orders: value, currency and status"),
    VisitorDataSource(engagement.CHAT_TRANSCRIPTS, "chatTranscripts", "delete", _chats,
                      "chatTranscripts",
                      "Chat transcripts"),
    VisitorDataSource(engagement.SURVEY_RESPONSES,
                      "surveyResponses", "delete", _by_visitor_or_session,
                      "surveyResponses",
                      "Survey answers"),
    VisitorDataSource(engagement.CONSENT_DECISIONS, "consentDecisions", "delete", _by_visitor,
                      "consentDecisions",
                      "Consent decisions"),
    # What the visitor hit stays as an occurrence of the fault at its time, without the
    # visitor, session, page or device: the Errors list and the error counts keep it, the
    # visitors affected do not (decision "An erased visitor's errors stay counted").
    VisitorDataSource(error_records.OCCURRENCES, "errorOccurrences", "anonymise",
                      _by_visitor_or_session, "faults",
                      "Error occurrences kept without the visitor (anonymised)"),
    VisitorDataSource(error_records.SESSION_LINKS,
                      "errorSessionLinks", "delete", _by_visitor_or_session,
                      "errorSessions",
                      "Links between errors and the visitor's sessions"),
    # A job still waiting in the outbox holds the error as sent; erasing it also makes the
    # worker skip the job (tasks/outbox.py), so it cannot write the visitor back afterwards.
    VisitorDataSource(error_outbox.OUTBOX, "pendingErrorJobs", "delete", _error_jobs,
                      "pendingErrorReports",
                      "Error reports waiting to be processed"),
    VisitorDataSource(error_records.FAILED_JOBS, "failedErrorJobs", "delete", _error_jobs,
                      "unprocessedErrorReports",
                      "Error reports that could not be processed"),
    # The aggregate is anonymised, not deleted; the export shows it reduced to the fault and
    # what of it points at the visitor (spec §2 rule 2).
    VisitorDataSource(error_records.ERRORS,
                      "errorRecordsAnonymised", "anonymise", _by_visitor_or_session,
                      "errorRecords",
                      "Error records kept without the visitor (anonymised)"),
    # The days the visitor was active, with country and device: the chain the overview's
    # distinct-visitor figures are kept on (derived/daily_figures.py).
    VisitorDataSource(daily_figures.VISITOR_DAYS, "activeDays", "delete", _by_visitor, "activeDays",
                      "Days the visitor was active, as the overview counts visitors"),
    # The days an error hit the visitor: the chain the errors list counts the visitors each
    # error hit on (derived/daily_figures.py).
    VisitorDataSource(daily_figures.ERROR_VISITOR_DAYS, "errorDays", "delete", _by_visitor,
                      "errorDays", "Days an error hit the visitor, as the errors list counts "
                      "visitors"),
    # The visitor's visits (entry and exit pages, where they came from, the pages seen), as
    # the overview's session figures and funnels read them (derived/visits.py).
    VisitorDataSource(visits.COLLECTION, "visits", "delete", _by_visitor, "visits",
                      "Visits: where each session came from and the pages it saw"),
    # What the visitor's latest records add to the figures, not folded in yet
    # (derived/derivation.py); erasure deletes them and takes out only the folded share.
    VisitorDataSource(derivation.COLLECTION, "pendingFigureFacts", "delete", _by_visitor,
                      "pendingFigureFacts",
                      "Activity not yet counted in the figures"),
    # Marks the fold counted on the visitor's recordings, not added to them yet
    # (documents/recordings.py `apply_marks`, usually within the second).
    VisitorDataSource(recordings.MARKS_PENDING, "pendingRecordingMarks", "delete", _by_visitor,
                      "pendingRecordingMarks",
                      "Errors, clicks and leads not yet counted on the recordings"),
    VisitorDataSource(visitors.COLLECTION, "visitorProfile", "delete", _profile, "visitor",
                      "Visitor profile"),
)

#: The categories erasure keeps anonymised rather than removes.
ANONYMISED_CATEGORIES = frozenset(
    source.category for source in VISITOR_DATA if source.action == "anonymise")

#: Each category's label, for a receipt's `labels`.
CATEGORY_LABELS: dict[str, str] = {source.category: source.label for source in VISITOR_DATA}


def receipt_labels(counts: dict[str, int]) -> dict[str, str]:
    """The label of every category in an erasure receipt's `counts`."""
    return {category: CATEGORY_LABELS.get(category, category) for category in counts}


async def _distinct(store: Store, collection: str, key: str, query: dict[str, Any],
                    session: Any) -> set[str]:
    values = await store.collection(collection).distinct(key, query, session=session)
    return {v for v in values if isinstance(v, str) and v}


async def subject_keys(store: Store, site_id: str, visitor_id: str, *, session: Any = None
                       ) -> SubjectKeys:
    """Collect the visitor's session ids, e-mail addresses (leads and profile), recording ids
    and order ids."""
    return await keys_of_visitors(store, site_id, (visitor_id,), session=session)


async def keys_of_visitors(store: Store, site_id: str, visitor_ids: tuple[str, ...], *,
                           session: Any = None) -> SubjectKeys:
    """The keys of several visitors at once: one query per collection, whatever their number."""
    visitor = {"siteId": site_id, "visitorId": _match(visitor_ids)}
    sessions: set[str] = set()
    for collection, key in ((recordings.COLLECTION, "sessionId"), (leads.COLLECTION, "sessionId"),
                            (error_records.OCCURRENCES, "sessionId"),
                            (error_records.SESSION_LINKS, "sessionId"),
                            (engagement.SURVEY_RESPONSES, "sessionId"),
                            (activity.COLLECTION, "events.sessionId"),
                            (interactions.COLLECTION, "events.sessionId")):
        sessions |= await _distinct(store, collection, key, visitor, session)
    emails = await _distinct(store, leads.COLLECTION, "email", visitor, session)
    emails |= await _distinct(store, visitors.COLLECTION, "emails", visitor, session)
    recording_ids = await _distinct(store, recordings.COLLECTION, "_id", visitor, session)
    order_ids = await _distinct(store, commerce.ORDERS, "orderId", visitor, session)
    return SubjectKeys(site_id, visitor_ids, tuple(sorted(sessions)), tuple(sorted(emails)),
                       tuple(sorted(recording_ids)), tuple(sorted(order_ids)))
