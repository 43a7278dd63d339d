"""Recordings and their segments: the recordings collection and the GridFS bucket "segments".

A recording (spec §2 "Recording session") belongs to a visitor and has a start, an end and the
pages recorded. It also holds what the recordings list filters by: the visitor's country and
device as it started, and its `marks`, how many errors, rage and dead clicks and leads fell in
its window, counted by the derivation's fold of what ingest stored (`add_marks`,
derived/derivation.py);
recordings stored before they were kept get them once from `backfill_facts` (decision
"Recording facts" in docs/decisions.md).

Its segments are compressed rrweb event arrays stored as received in the bucket "segments", one
file per (recording, seq). A segment is served for replay only after the segment sweeper
(ingest/segment_sweeper.py) has checked it: console events removed unless the site captures
them, the text of the customer's own pages masked, and anything that does not inflate to a sane
rrweb array rejected (`metadata.consoleChecked` marks every check, not only the console's).

Idempotency comes from unique indexes, never from check-then-write:

* a segment's key is the recording id *the client named* plus its seq (`metadata.sentFor`,
  `metadata.seq`), so a retry collides even after the segment was filed under a successor;
* a successor recording has a deterministic id derived from its predecessor's, so any number of
  concurrent or retried rotations create one successor.

The lifecycle rules themselves live in ingest/recordings.py.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

from pymongo import ReturnDocument
from pymongo.errors import PyMongoError

from documents import error_records, interactions, leads, visitors
from documents.retention import Expiry, expired_ids
from documents.store import ASCENDING, DESCENDING, AlreadyStored, DuplicateKeyError, Index, Store
from errors import NotFound
from instants import format_instant

COLLECTION = "recordings"
SEGMENTS_BUCKET = "segments"
#: Marks the fold counted that are not on their recording yet (`add_marks`, `apply_marks`).
MARKS_PENDING = "recording_marks_pending"

#: Pages kept per recording; the first ones win because they say where the visit began.
MAX_PAGES = 500

#: Namespace of successor ids: uuid5(namespace, predecessor id) is the same on every retry.
_SUCCESSOR_NAMESPACE = uuid.UUID("7f1b4a52-3c8e-4f0e-9d7a-2b6c1e5d8a90")

#: What a recording counts of the events during it (its `marks`), as the recordings filter
#: names them.
MARKS = ("error", "rage_click", "dead_click", "lead")
#: Slack around a recording's start and end when events are matched to it: the client's clock
#: stamps errors, clicks and leads, the server's stamps the recording.
WINDOW_SLACK = timedelta(seconds=5)
#: How many of a visitor's latest recordings are looked at for those running at a moment: more
#: than a few recordings of one visitor overlapping is not a visit.
RUNNING_CANDIDATES = 3
#: Old recordings given their facts per transaction by the backfill.
BACKFILL_BATCH = 200

log = logging.getLogger(__name__)

INDEXES = [
    Index(COLLECTION, (("siteId", ASCENDING), ("visitorId", ASCENDING),
                         ("startedAt", ASCENDING))),
    Index(COLLECTION, (("siteId", ASCENDING), ("status", ASCENDING),
                         ("lastActivityAt", ASCENDING))),
    # The site-wide recordings list, newest first (the visitor's own list has its index).
    Index(COLLECTION, (("siteId", ASCENDING), ("startedAt", DESCENDING))),
    # The idle sweep looks across sites (ingest/segment_sweeper.py).
    Index(COLLECTION, (("status", ASCENDING), ("lastActivityAt", ASCENDING))),
    Index(f"{SEGMENTS_BUCKET}.files", (("metadata.sentFor", ASCENDING),
                                       ("metadata.seq", ASCENDING)),
          unique=True, name="segment_idempotency"),
    Index(f"{SEGMENTS_BUCKET}.files", (("metadata.recordingId", ASCENDING),
                                       ("metadata.seq", ASCENDING))),
    Index(f"{SEGMENTS_BUCKET}.files", (("metadata.consoleChecked", ASCENDING),
                                       ("uploadDate", ASCENDING))),
    Index(f"{SEGMENTS_BUCKET}.files", (("metadata.siteId", ASCENDING),
                                       ("metadata.visitorId", ASCENDING))),
    Index(f"{SEGMENTS_BUCKET}.files", (("filename", ASCENDING), ("uploadDate", ASCENDING))),
    Index(f"{SEGMENTS_BUCKET}.chunks", (("files_id", ASCENDING), ("n", ASCENDING)), unique=True),
    Index(MARKS_PENDING, (("siteId", ASCENDING), ("recordingId", ASCENDING))),
    # A visitor's pending marks go with their erasure.
    Index(MARKS_PENDING, (("siteId", ASCENDING), ("visitorId", ASCENDING))),
    # The site's oldest recordings, for retention (documents/retention.py).
    Index(COLLECTION, (("siteId", ASCENDING), ("lastActivityAt", ASCENDING))),
]
#: A recording expires by its last activity; its footage goes with it.
EXPIRY = Expiry(COLLECTION, "lastActivityAt")


def successor_id(recording_id: str) -> str:
    """The id of the recording that continues `recording_id`; the same on every call."""
    return str(uuid.uuid5(_SUCCESSOR_NAMESPACE, recording_id))


def new_recording(recording_id: str, site_id: str, visitor_id: str, session_id: str | None,
                  at: datetime, *, continues_from: str | None = None,
                  wp_user_id: str | None = None, country: str | None = None,
                  device: str | None = None) -> dict[str, Any]:
    """The document of a recording that starts now, with the visitor's country and device type
    as known at its start, and no marks yet."""
    return {
        "_id": recording_id,
        "siteId": site_id,
        "visitorId": visitor_id,
        "sessionId": session_id,
        "wpUserId": wp_user_id,
        "status": "active",
        "startedAt": at,
        "lastActivityAt": at,
        "endedAt": None,
        "endReason": None,
        "pages": [],
        "lastPageUrl": None,
        "continuesFrom": continues_from,
        "country": country.upper() if country else None,
        "device": device,
        "marks": dict.fromkeys(MARKS, 0),
    }


def window(recording: dict[str, Any]) -> tuple[datetime, datetime]:
    """When the recording ran, with WINDOW_SLACK at each end; one not ended yet runs until its
    last activity."""
    until = recording.get("endedAt") or recording.get("lastActivityAt") or recording["startedAt"]
    return recording["startedAt"] - WINDOW_SLACK, until + WINDOW_SLACK


def duration_seconds(recording: dict[str, Any]) -> float:
    """How long the recording's footage runs, by its segments' own timestamps: from the first
    segment's start to the last one's end. A lead, a PHP error or an end that arrives later is
    not footage. A recording with no `footage` (stored before it was kept and without segments,
    legacy footage) runs from its start to its end, as it always did."""
    footage = recording.get("footage") or {}
    since = footage.get("from") or recording["startedAt"]
    until = (footage.get("until") or recording.get("endedAt") or recording.get("lastActivityAt")
             or recording["startedAt"])
    return max(0.0, (until - since).total_seconds())


#: `duration_seconds` in milliseconds, as a query expression (the recordings list's filter).
DURATION_MS = {"$max": [0, {"$subtract": [
    {"$ifNull": ["$footage.until", "$endedAt", "$lastActivityAt", "$startedAt"]},
    {"$ifNull": ["$footage.from", "$startedAt"]}]}]}


def same_session(recording: dict[str, Any], session_id: str | None) -> bool:
    """False only when both the recording and the event name a session and the sessions differ."""
    ours = recording.get("sessionId")
    return not ours or not session_id or ours == session_id


async def recordings_at(store: Store, site_id: str, visitor_id: str | None,
                        session_id: str | None, at: datetime) -> list[dict[str, Any]]:
    """The visitor's recordings running at `at`, latest start first."""
    if not visitor_id:
        return []
    latest = await _latest_started(store, site_id, visitor_id, at, session=None)
    return [recording for recording in latest if _runs_at(recording, session_id, at)]


async def add_marks(store: Store, site_id: str, visitor_id: str | None, session_id: str | None,
                    happened: list[tuple[str, datetime]], *, session: Any) -> None:
    """Count each (mark, at) on the visitor's recordings running at `at`.

    Runs inside the fold's transaction that deletes the events' unfolded fact: an event stored
    once is counted once, however often it is sent or folded, and one that fails is not.
    """
    if not visitor_id or not happened:
        return
    latest = await _latest_started(store, site_id, visitor_id, max(at for _, at in happened),
                                   session=session)
    added: dict[str, Counter[str]] = defaultdict(Counter)
    for mark, at in happened:
        for recording in latest:
            if _runs_at(recording, session_id, at, arriving=True):
                added[recording["_id"]][mark] += 1
    for recording_id, marks in added.items():
        # Not the recording itself: ingest writes it with every segment, and a fold holding it
        # for its whole batch would abort those requests (`apply_marks` adds them).
        await store.collection(MARKS_PENDING).insert_one({
            "_id": str(uuid.uuid4()), "siteId": site_id, "visitorId": visitor_id,
            "recordingId": recording_id, "marks": dict(marks)}, session=session)


class MarksRaced(RuntimeError):
    """Another folder applied some of a recording's pending marks first."""


async def apply_marks(store: Store, site_id: str, *, batch: int = 500) -> int:
    """Add the site's pending marks to their recordings; returns how many were applied.

    One short transaction per recording deletes its pending marks and adds them, so each is
    counted once across crashes and retries, and a segment of that recording meets it, if at
    all, for two writes rather than for a whole fold.
    """
    applied = 0
    while True:
        pending = await store.collection(MARKS_PENDING).find(
            {"siteId": site_id}, {"recordingId": 1}).limit(batch).to_list(None)
        done = 0
        for recording_id in sorted({p["recordingId"] for p in pending}):
            with contextlib.suppress(MarksRaced):
                done += await store.transaction(
                    lambda session, rid=recording_id: _apply_recording_marks(
                        store, site_id, rid, session=session))
        applied += done
        if len(pending) < batch or not done:
            return applied


async def _apply_recording_marks(store: Store, site_id: str, recording_id: str, *,
                                 session: Any) -> int:
    pending = await store.collection(MARKS_PENDING).find(
        {"siteId": site_id, "recordingId": recording_id}, session=session).to_list(None)
    if not pending:
        return 0  # applied by another folder meanwhile
    deleted = await store.collection(MARKS_PENDING).delete_many(
        {"_id": {"$in": [p["_id"] for p in pending]}}, session=session)
    if deleted.deleted_count != len(pending):
        # Another folder took some of them first (the embedded store's form of a write
        # conflict): undo this transaction; that folder's adds them.
        raise MarksRaced(recording_id)
    total: Counter[str] = Counter()
    for entry in pending:
        total.update(entry["marks"])
    # A recording erased or expired meanwhile takes nothing; its pending marks go all the same.
    await store.collection(COLLECTION).update_one(
        {"_id": recording_id, "siteId": site_id},
        {"$inc": {f"marks.{mark}": count for mark, count in total.items()}}, session=session)
    return len(pending)


async def sites_with_pending_marks(store: Store) -> list[str]:
    """The sites whose recordings have marks still to be added."""
    return sorted(await store.collection(MARKS_PENDING).distinct("siteId"))


async def _latest_started(store: Store, site_id: str, visitor_id: str, at: datetime, *,
                          session: Any) -> list[dict[str, Any]]:
    """The visitor's recordings that started last by `at`, on the index of the visitor's
    recordings by start; only the fields that place an event are read."""
    return await store.collection(COLLECTION).find(
        {"siteId": site_id, "visitorId": visitor_id, "startedAt": {"$lte": at + WINDOW_SLACK}},
        {"status": 1, "startedAt": 1, "endedAt": 1, "lastActivityAt": 1, "sessionId": 1,
         "legacyFootage": 1},
        session=session,
    ).sort("startedAt", DESCENDING).limit(RUNNING_CANDIDATES).to_list(None)


def _runs_at(recording: dict[str, Any], session_id: str | None, at: datetime, *,
             arriving: bool = False) -> bool:
    """Whether the event at `at` belongs to the recording. An event `arriving` now may come in
    before the segment that extends a recording still active over it, so such a recording
    takes it however long after its last activity (the sweeper ends idle ones)."""
    try:
        low, high = window(recording)
        if arriving and recording.get("status") == "active":
            high = max(high, at)
        return low <= at <= high and same_session(recording, session_id)
    except (KeyError, TypeError):
        return False  # a recording that cannot be read (a hand edit, say) takes nothing


async def create_recording(store: Store, document: dict[str, Any], *,
                           session: Any = None) -> bool:
    """Insert the recording unless its id exists; True when this call created it.

    An id taken by another site's recording is not touched (the filter names the site, so the
    upsert collides on `_id` and reports False, or raises `AlreadyStored` in a transaction).
    """
    try:
        # The filter's equality fields are written on insert; repeating them would conflict.
        on_insert = {k: v for k, v in document.items() if k not in ("_id", "siteId")}
        result = await store.collection(COLLECTION).update_one(
            {"_id": document["_id"], "siteId": document["siteId"]}, {"$setOnInsert": on_insert},
            upsert=True, session=session,
        )
    except DuplicateKeyError as exc:
        if session is not None:
            raise AlreadyStored(document["_id"]) from exc
        # A concurrent upsert of the same id won; the recording exists, which is all we need.
        return False
    return result.upserted_id is not None


async def find_recording(store: Store, site_id: str, recording_id: str, *,
                         session: Any = None) -> dict[str, Any] | None:
    """The recording, or None."""
    return await store.collection(COLLECTION).find_one({"_id": recording_id, "siteId": site_id},
                                                         session=session)


async def touch_if_live(store: Store, site_id: str, recording_id: str, *, now: datetime,
                        idle_since: datetime, started_since: datetime,
                        session: Any = None) -> dict[str, Any] | None:
    """Mark activity on a recording that is active, not idle and not over the cap, atomically.

    Returns the recording, or None when it is unknown, ended, idle for too long (last activity
    before `idle_since`) or started before `started_since`.
    """
    return await store.collection(COLLECTION).find_one_and_update(
        {
            "_id": recording_id,
            "siteId": site_id,
            "status": "active",
            "lastActivityAt": {"$gte": idle_since},
            "startedAt": {"$gte": started_since},
        },
        {"$max": {"lastActivityAt": now}},
        return_document=ReturnDocument.AFTER, session=session,
    )


async def end_recording(store: Store, site_id: str, recording_id: str, *, at: datetime,
                        reason: str, session: Any = None) -> bool:
    """End the recording if it is still active; True when this call ended it."""
    result = await store.collection(COLLECTION).update_one(
        {"_id": recording_id, "siteId": site_id, "status": "active"},
        {"$set": {"status": "ended", "endedAt": at, "endReason": reason}}, session=session,
    )
    return result.modified_count == 1


async def end_idle_recordings(store: Store, *, idle_since: datetime, reason: str) -> int:
    """End every active recording last active before `idle_since`; returns how many.

    One conditional update: a recording touched by new activity in the meantime no longer
    matches, and the end time is the recording's own last activity, read in the same write.
    """
    result = await store.collection(COLLECTION).update_many(
        {"status": "active", "lastActivityAt": {"$lt": idle_since}},
        [{"$set": {"status": "ended", "endedAt": "$lastActivityAt", "endReason": reason}}],
    )
    return result.modified_count


async def end_active_recordings(store: Store, site_id: str, visitor_id: str, *, at: datetime,
                                reason: str, session: Any = None) -> int:
    """End every active recording of the visitor; returns how many."""
    result = await store.collection(COLLECTION).update_many(
        {"siteId": site_id, "visitorId": visitor_id, "status": "active"},
        {"$set": {"status": "ended", "endedAt": at, "endReason": reason}},
        session=session,
    )
    return result.modified_count


async def add_footage(store: Store, site_id: str, recording_id: str, since: datetime,
                      until: datetime, *, session: Any = None) -> None:
    """Widen the recording's footage to take in a segment that runs from `since` to `until`."""
    await store.collection(COLLECTION).update_one(
        {"_id": recording_id, "siteId": site_id},
        {"$min": {"footage.from": since}, "$max": {"footage.until": until}}, session=session)


async def link_successor(store: Store, recording_id: str, successor: str, *,
                         session: Any = None) -> None:
    """Point a recording at the one that continues it (for reading; routing never needs it)."""
    await store.collection(COLLECTION).update_one(
        {"_id": recording_id}, {"$set": {"continuedBy": successor}}, session=session
    )


async def add_page(store: Store, site_id: str, recording_id: str, url: str,
                   at: datetime, *, session: Any = None) -> None:
    """Record that the recording moved to `url`; a repeat of the current page adds nothing."""
    await store.collection(COLLECTION).update_one(
        {"_id": recording_id, "siteId": site_id, "lastPageUrl": {"$ne": url}},
        {"$push": {"pages": {"$each": [{"url": url, "at": at}], "$slice": MAX_PAGES}},
         "$set": {"lastPageUrl": url}},
        session=session,
    )


async def list_recordings(store: Store, site_id: str, visitor_id: str) -> list[dict[str, Any]]:
    """The visitor's recordings, oldest first."""
    cursor = store.collection(COLLECTION).find(
        {"siteId": site_id, "visitorId": visitor_id}
    ).sort([("startedAt", ASCENDING), ("_id", ASCENDING)])
    return [doc async for doc in cursor]


async def session_timeline(store: Store, site_id: str, visitor_id: str) -> list[dict[str, Any]]:
    """The session list of spec §4.3: id, startedAt, duration in seconds, pageUrl; oldest first.

    """
    timeline = []
    for recording in await list_recordings(store, site_id, visitor_id):
        pages = recording.get("pages") or []
        timeline.append({
            "id": recording["_id"],
            "startedAt": format_instant(recording["startedAt"]),
            "duration": duration_seconds(recording),
            "pageUrl": pages[0]["url"] if pages else None,
        })
    return timeline


# Segments ------------------------------------------------------------------------------------


async def find_segment_file(store: Store, site_id: str, file_id: str) -> dict[str, Any] | None:
    """The files document of one of the site's segments, by its file id, or None."""
    return await store.bucket(SEGMENTS_BUCKET).find_file(
        {"_id": file_id, "metadata.siteId": site_id})


async def find_segment(store: Store, site_id: str, sent_for: str,
                       seq: int) -> dict[str, Any] | None:
    """The files document of the segment the client numbered `seq` in `sent_for`, or None."""
    return await store.bucket(SEGMENTS_BUCKET).find_file(
        {"metadata.sentFor": sent_for, "metadata.seq": seq, "metadata.siteId": site_id}
    )


async def save_segment(store: Store, file_id: str, data: bytes,
                       metadata: dict[str, Any], *, session: Any = None) -> bool:
    """Store the compressed segment as received; False when (sentFor, seq) is already stored.

    Inside a transaction (`session`) a stored (sentFor, seq) raises `AlreadyStored` instead, and
    the transaction's abort removes whatever this attempt wrote.
    """
    filename = f"{metadata['recordingId']}/{metadata['seq']}.json.gz"
    bucket = store.bucket(SEGMENTS_BUCKET)
    try:
        await bucket.upload(file_id, filename, data, metadata, session=session)
    except DuplicateKeyError as exc:
        if session is not None:
            raise AlreadyStored(file_id) from exc
        return False
    except PyMongoError:
        if session is not None:
            raise
        # The files document did not land, so nobody can reach these chunks; the caller's retry
        # uses a fresh file id. If the store is down this cleanup fails too, and the orphans are
        # only dead weight, never a second copy of the segment.
        with contextlib.suppress(PyMongoError):
            await bucket.chunks.delete_many({"files_id": file_id})
        raise
    return True


async def list_segments(store: Store, site_id: str, recording_id: str) -> list[dict[str, Any]]:
    """The files documents of a recording's servable segments, in replay order."""
    cursor = store.bucket(SEGMENTS_BUCKET).files.find({
        "metadata.siteId": site_id,
        "metadata.recordingId": recording_id,
        "metadata.consoleChecked": True,
        "metadata.rejected": None,
    }).sort([("metadata.startedAt", ASCENDING), ("metadata.seq", ASCENDING)])
    return [doc async for doc in cursor]


async def stream_segment(store: Store, site_id: str, file_id: str) -> AsyncIterator[bytes]:
    """Yield a checked segment's compressed bytes chunk by chunk; NotFound otherwise.

    A segment the sweeper has not checked yet may still hold console events the site does not
    capture, and a rejected one may be a decompression bomb, so neither is ever served.
    """
    bucket = store.bucket(SEGMENTS_BUCKET)
    found = await bucket.find_file({"_id": file_id, "metadata.siteId": site_id})
    if found is None or not found["metadata"].get("consoleChecked") \
            or found["metadata"].get("rejected"):
        raise NotFound("no such segment")
    async for chunk in bucket.read_chunks(file_id):
        yield chunk


# The sweeper's side ----------------------------------------------------------------------------


async def claim_unchecked_segment(store: Store, *, now: datetime,
                                  lease_until: datetime) -> dict[str, Any] | None:
    """Lease the oldest unchecked segment to one sweeper; None when there is none."""
    return await store.bucket(SEGMENTS_BUCKET).files.find_one_and_update(
        {"metadata.consoleChecked": False,
         "$or": [{"metadata.leaseUntil": None}, {"metadata.leaseUntil": {"$lt": now}}]},
        {"$set": {"metadata.leaseUntil": lease_until, "metadata.held": False}},
        sort=[("uploadDate", ASCENDING)],
        return_document=ReturnDocument.AFTER,
    )


async def previous_segments(store: Store, file: dict[str, Any]) -> list[dict[str, Any]]:
    """The metadata of the segment the client sent just before this one (one seq less): sent
    for the same recording id, or filed under the id this one was sent for, since a client told
    its recording goes on under a successor keeps numbering its segments on. One, as a rule."""
    metadata = file["metadata"]
    cursor = store.bucket(SEGMENTS_BUCKET).files.find(
        {"metadata.siteId": metadata["siteId"], "metadata.seq": metadata["seq"] - 1,
         "$or": [{"metadata.sentFor": metadata["sentFor"]},
                 {"metadata.recordingId": metadata["sentFor"]}]},
        {"metadata.consoleChecked": 1, "metadata.personalPage": 1, "metadata.rejected": 1})
    return [doc["metadata"] async for doc in cursor]


async def postpone_check(store: Store, file_id: str, *, until: datetime) -> None:
    """Leave the segment unchecked, out of every sweeper's reach until `until` or until the
    segment before it is checked (`release_next_segment`)."""
    await store.bucket(SEGMENTS_BUCKET).files.update_one(
        {"_id": file_id}, {"$set": {"metadata.leaseUntil": until, "metadata.held": True}})


async def release_next_segment(store: Store, file: dict[str, Any]) -> None:
    """Put the segment sent just after this one within every sweeper's reach now, if it is
    held waiting for this one (never one a sweeper is checking: claiming clears `held`)."""
    metadata = file["metadata"]
    await store.bucket(SEGMENTS_BUCKET).files.update_many(
        {"metadata.siteId": metadata["siteId"], "metadata.seq": metadata["seq"] + 1,
         "metadata.sentFor": {"$in": [metadata["sentFor"], metadata["recordingId"]]},
         "metadata.consoleChecked": False, "metadata.held": True},
        {"$set": {"metadata.leaseUntil": None, "metadata.held": False}})


async def mark_segment_checked(store: Store, file_id: str, *, console_events: int,
                               personal_page: bool = False) -> None:
    """The segment may be served as it is; `personal_page` tells its page's later segments."""
    await store.bucket(SEGMENTS_BUCKET).files.update_one(
        {"_id": file_id},
        {"$set": {"metadata.consoleChecked": True, "metadata.consoleEvents": console_events,
                  "metadata.personalPage": personal_page, "metadata.leaseUntil": None}},
    )


async def replace_segment(store: Store, old: dict[str, Any], new_file_id: str, data: bytes, *,
                          console_removed: int, texts_masked: int = 0,
                          personal_page: bool = False) -> None:
    """Swap a segment for its stripped or masked form in one transaction: never both, never
    neither."""
    bucket = store.bucket(SEGMENTS_BUCKET)
    metadata = {**old["metadata"], "consoleChecked": True, "consoleRemoved": console_removed,
                "textsMasked": texts_masked, "personalPage": personal_page,
                "leaseUntil": None, "replaces": old["_id"]}

    async def swap(session: Any) -> None:
        # The old file goes first: the new one carries the same idempotency key.
        await bucket.delete_where({"_id": old["_id"]}, session=session)
        await bucket.upload(new_file_id, old["filename"], data, metadata, session=session)

    await store.transaction(swap)


async def reject_segment(store: Store, file_id: str, reason: str) -> None:
    """Drop a segment's content but keep its key, so a retry is still seen as stored."""
    bucket = store.bucket(SEGMENTS_BUCKET)

    async def drop_content(session: Any) -> None:
        await bucket.chunks.delete_many({"files_id": file_id}, session=session)
        await bucket.files.update_one(
            {"_id": file_id},
            {"$set": {"length": 0, "metadata.consoleChecked": True, "metadata.rejected": reason,
                      "metadata.leaseUntil": None}},
            session=session,
        )

    await store.transaction(drop_content)


# Recordings stored before they kept their facts ----------------------------------------------

#: A recording stored before recordings kept their country, device and marks has no `device`
#: field at all (one whose device is unknown has it, null). `marks` is no test: an event may
#: have been counted on an old recording still running when the new version started.
_WITHOUT_FACTS = {"device": {"$exists": False}}


async def backfill_facts(store: Store) -> None:
    """Give every recording stored before recordings kept them its country, device and marks,
    looked up as the recordings list used to: the profile's country and device, and the
    errors, rage and dead clicks and leads in its window (migration "recording-facts-v1")."""
    changed = 0
    for site_id in sorted(await store.collection(COLLECTION).distinct("siteId",
                                                                       _WITHOUT_FACTS)):
        after = ""
        while True:
            batch = await store.collection(COLLECTION).find(
                {**_WITHOUT_FACTS, "siteId": site_id, "_id": {"$gt": after}},
                {"visitorId": 1, "sessionId": 1, "startedAt": 1, "endedAt": 1,
                 "lastActivityAt": 1},
            ).sort("_id", ASCENDING).limit(BACKFILL_BATCH).to_list(None)
            if not batch:
                break
            after = batch[-1]["_id"]
            changed += await _give_facts(store, site_id, batch)
    log.info("recording facts backfilled", extra={"recordings": changed})


async def backfill_footage(store: Store) -> None:
    """Give every recording stored before recordings kept their footage the span of its
    segments' own timestamps, so that an order or a visit's end that came later no longer
    stretches its duration; one without segments keeps its start-to-end reckoning
    (migration "recording-footage-v1")."""
    spans = store.bucket(SEGMENTS_BUCKET).files.aggregate([
        {"$group": {"_id": "$metadata.recordingId", "since": {"$min": "$metadata.startedAt"},
                    "until": {"$max": "$metadata.endedAt"}}}])
    changed = 0
    async for span in spans:
        if span["since"] is None or span["until"] is None:
            continue  # unreadable metadata (a hand edit, say): left as it is
        # As a segment adds its footage: a segment stored meanwhile widens it the same way.
        result = await store.collection(COLLECTION).update_one(
            {"_id": span["_id"]}, {"$min": {"footage.from": span["since"]},
                                   "$max": {"footage.until": max(span["since"], span["until"])}})
        changed += result.modified_count
    log.info("recording footage backfilled", extra={"recordings": changed})


async def _give_facts(store: Store, site_id: str, batch: list[dict[str, Any]]) -> int:
    """Set the facts of the batch's recordings in one transaction; returns how many."""

    async def give(session: Any) -> int:
        # An event counted on one of these recordings by ingest meanwhile makes the transaction
        # conflict and run again, so the `$set` never overwrites a count it did not see.
        facts = await _facts(store, site_id, batch, session=session)
        for recording_id, fields in facts.items():
            await store.collection(COLLECTION).update_one(
                {"_id": recording_id, **_WITHOUT_FACTS}, {"$set": fields}, session=session)
        return len(facts)

    return await store.transaction(give)


async def _facts(store: Store, site_id: str, batch: list[dict[str, Any]], *, session: Any
                 ) -> dict[str, dict[str, Any]]:
    """The country, device and marks of each recording of the batch that can be read, with one
    indexed query per collection for the whole batch."""
    placed = []
    for recording in batch:
        try:
            placed.append((recording, window(recording)))
        except (KeyError, TypeError):
            continue  # unreadable (a hand edit, say): left as it is, as the list leaves it out
    if not placed:
        return {}
    visitor_ids = sorted({r["visitorId"] for r, _ in placed if isinstance(r.get("visitorId"), str)})
    low = min(low for _, (low, _) in placed)
    high = max(high for _, (_, high) in placed)
    profiles = await visitors.countries_and_devices(store, site_id, visitor_ids, session=session)
    # What happened to each visitor in the batch's span, then placed in each recording's window.
    happened: dict[str, list[tuple[str, datetime, str | None]]] = defaultdict(list)
    if visitor_ids:
        async for o in error_records.occurrences_between(
                store, site_id, visitor_ids, low, high,
                {"visitorId": 1, "occurredAt": 1, "sessionId": 1}, session=session):
            happened[o["visitorId"]].append(("error", o["occurredAt"], o.get("sessionId")))
        async for bucket in interactions.buckets_overlapping(store, site_id, visitor_ids, low,
                                                             high, session=session):
            for event in bucket["events"]:
                if event.get("kind") in MARKS:
                    happened[bucket["visitorId"]].append(
                        (event["kind"], event["at"], event.get("sessionId")))
        async for lead in leads.leads_between(
                store, site_id, visitor_ids, low, high,
                {"visitorId": 1, "createdAt": 1, "sessionId": 1}, session=session):
            happened[lead["visitorId"]].append(("lead", lead["createdAt"], lead.get("sessionId")))
    facts = {}
    for recording, (start, end) in placed:
        visitor_id = recording.get("visitorId") or ""
        marks = dict.fromkeys(MARKS, 0)
        for kind, at, session_id in happened.get(visitor_id, []):
            if start <= at <= end and same_session(recording, session_id):
                marks[kind] += 1
        country, device = profiles.get(visitor_id, (None, None))
        facts[recording["_id"]] = {"country": country, "device": device, "marks": marks}
    return facts


async def purge_expired(store: Store, site_id: str, before: datetime, *, limit: int,
                        session: Any) -> tuple[int, int]:
    """Delete up to `limit` recordings whose last activity is before `before`, with their
    footage files and chunks, in the caller's transaction; returns (found, recordings
    deleted)."""
    ids = await expired_ids(store, EXPIRY, site_id, before, limit=limit, session=session)
    if not ids:
        return 0, 0
    await store.bucket(SEGMENTS_BUCKET).delete_where(
        {"metadata.siteId": site_id, "metadata.recordingId": {"$in": ids}}, session=session)
    deleted = await store.collection(COLLECTION).delete_many(
        {"siteId": site_id, "_id": {"$in": ids}}, session=session)
    return len(ids), deleted.deleted_count


async def latest_recordings_of_visitor(store: Store, site_id: str, visitor_id: str, *,
                                       limit: int) -> list[dict[str, Any]]:
    """The visitor's latest recordings, newest first."""
    return await store.collection(COLLECTION).find(
        {"siteId": site_id, "visitorId": visitor_id}).sort("startedAt", DESCENDING).limit(
        limit).to_list(None)


async def last_started_by(store: Store, site_id: str, visitor_id: str, at: datetime
                          ) -> dict[str, Any] | None:
    """The visitor's recording that started last at or before `at`, or None."""
    return await store.collection(COLLECTION).find_one(
        {"siteId": site_id, "visitorId": visitor_id, "startedAt": {"$lte": at}},
        sort=[("startedAt", DESCENDING)])


def latest_of_status(store: Store, site_id: str, status: str, *, limit: int) -> Any:
    """A cursor over the site's `limit` recordings of this status last active most recently."""
    return store.collection(COLLECTION).find({"siteId": site_id, "status": status}).sort(
        "lastActivityAt", -1).limit(limit)


async def legacy_footage_locations(store: Store, site_id: str, visitor_id: str, *,
                                   session: Any = None) -> list[Any]:
    """Where the visitor's recordings from before the segments kept their footage."""
    return [
        recording["legacyFootage"]["location"]
        async for recording in store.collection(COLLECTION).find(
            {"siteId": site_id, "visitorId": visitor_id,
             "legacyFootage.location": {"$exists": True}},
            {"legacyFootage": 1}, session=session)
    ]
