"""The recording lifecycle of spec §3: start, segments, end, and the rules that end recordings.

A recording ends after RECORDING_INACTIVITY_SECONDS without activity, on a completed order, or
by rotation after RECORDING_CAP_SECONDS of continuous activity, and the next activity starts a
new recording that `continuesFrom` the old one. The segment sweeper (ingest/segment_sweeper.py)
ends idle recordings (`end_idle`), so an abandoned one does not wait for a segment that may
never come; whichever notices first, the end reason and time are the same.

Segments are routed with conditional updates: a segment sent for a recording that is no longer
live walks the chain of successors (each with a deterministic id, see
documents.recordings.successor_id), ending and creating as it goes. The walk, the segment's bytes
and its page are one transaction, as a start's recording, page and profile count are: a request
stores all of that or nothing, a caller that retries after any failure converges on the same
state, and two concurrent segments create one successor.

Segments are stored exactly as received (never decompressed here); the sweeper checks them off
the request path before they can be replayed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from config import Settings
from documents import recordings, visitors
from documents.accounts import new_id
from documents.sites import DEFAULT_SETTINGS
from documents.store import Store
from errors import Conflict, InvalidInput
from ingest.intake import Outcome, VisitorIntake, parse_time
from privacy.personal_pages import personal_page_patterns

#: Longest chain of successors one segment may walk. Each link stands for at least one cap's
#: worth of activity (about 25 minutes), so this covers days of a tab left open.
MAX_HOPS = 500

#: gzip's magic number: the only look at a segment's content the request path takes.
GZIP_MAGIC = b"\x1f\x8b"

#: The end reason of a recording that saw no activity for the inactivity threshold, whether a
#: late segment or the background sweep notices first.
INACTIVITY = "inactivity"


@dataclass(frozen=True)
class SegmentUpload:
    """One segment as the handler received it: the metadata and the compressed bytes."""

    recording_id: str
    seq: int
    visitor_id: str
    page_url: str
    data: bytes
    session_id: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    gpc: bool = False
    consent: str | None = None
    order_completed: bool = False
    #: The browser's User-Agent header, for segments a browser sends itself (never stored).
    user_agent: str | None = None

    def gate_payload(self) -> dict[str, Any]:
        """The fields the privacy gate looks at."""
        return {"visitorId": self.visitor_id, "url": self.page_url, "gpc": self.gpc,
                "consent": self.consent, "userAgent": self.user_agent}


@dataclass(frozen=True)
class SegmentOutcome:
    """What became of a segment, and the recording it now belongs to."""

    outcome: Outcome
    recording_id: str | None = None
    duplicate: bool = False


class RecordingLifecycle:
    """Starts, feeds, rotates and ends recordings; owned by the app."""

    def __init__(self, store: Store, settings: Settings, intake: VisitorIntake,
                 clock: Callable[[], datetime] | None = None) -> None:
        self.store = store
        self.intake = intake
        self.inactivity = timedelta(seconds=settings.recording_inactivity_seconds)
        self.cap = timedelta(seconds=settings.recording_cap_seconds)
        self.clock = clock or (lambda: datetime.now(UTC))

    # Start and end ----------------------------------------------------------------------------

    async def start(self, site: dict[str, Any], body: dict[str, Any]) -> Outcome:
        """Create the recording (idempotent on a client-given id) and touch the visitor."""
        decision = await self.intake.admit(site, "recording", body)
        if not decision.allowed:
            return Outcome.dropped(decision.reason or "refused")
        now = self.clock()
        recording_id = body.get("recordingId") or new_id()
        facts = self.intake.describe_visitor(body)

        async def write(session: Any) -> None:
            country, device = await self._known_facts(
                site["_id"], body["visitorId"], facts.country, facts.device_type,
                session=session)
            document = recordings.new_recording(
                recording_id, site["_id"], body["visitorId"], body.get("sessionId"), now,
                wp_user_id=facts.wp_user_id, country=country, device=device)
            created = await recordings.create_recording(self.store, document, session=session)
            if body.get("url"):
                await recordings.add_page(self.store, site["_id"], recording_id, body["url"],
                                          now, session=session)
            await visitors.touch(
                self.store, site["_id"], body["visitorId"], seen_at=now, facts=facts,
                activity={"kind": "recording", "at": now, "recordingId": recording_id}
                if created else None,
                counts={"recordings": 1} if created else None, session=session,
            )

        if not await self.store.write_once(write) and await recordings.find_recording(
                self.store, site["_id"], recording_id) is None:
            raise Conflict("this recording id is taken", code="recording_id_taken")
        self.intake.count("recording", "stored")
        return Outcome(True, item_id=recording_id)

    async def end(self, site: dict[str, Any], body: dict[str, Any]) -> Outcome:
        """Close the recording; a completed order ends all the visitor's active recordings."""
        now = self.clock()
        if body.get("orderCompleted"):
            await self.end_for_order(site["_id"], body["visitorId"])
        else:
            await recordings.end_recording(self.store, site["_id"], body["recordingId"], at=now,
                                           reason="explicit")
        return Outcome(True, item_id=body["recordingId"])

    async def end_idle(self) -> int:
        """End every recording idle past the inactivity threshold (the sweeper calls this)."""
        return await recordings.end_idle_recordings(
            self.store, idle_since=self.clock() - self.inactivity, reason=INACTIVITY)

    async def end_for_order(self, site_id: str, visitor_id: str, *, session: Any = None) -> int:
        """End the visitor's active recordings because an order completed (spec §3)."""
        return await recordings.end_active_recordings(self.store, site_id, visitor_id,
                                                      at=self.clock(), reason="order",
                                                      session=session)

    # Segments ---------------------------------------------------------------------------------

    async def add_segment(self, site: dict[str, Any], upload: SegmentUpload) -> SegmentOutcome:
        """Store one compressed segment in the live recording it belongs to."""
        if not upload.data.startswith(GZIP_MAGIC):
            raise InvalidInput("the segment must be gzip-compressed (magic bytes 1f 8b)",
                               field="body", code="not_gzip")
        gated = upload.gate_payload()
        decision = await self.intake.admit(site, "recording", gated)
        if not decision.allowed:
            return SegmentOutcome(Outcome.dropped(decision.reason or "refused"))
        # The page as admitted: its addresses anonymised and its secret parameters stripped.
        upload = replace(upload, page_url=gated["url"])
        now = self.clock()
        # A fast path for retries; the unique index below is what actually guarantees it. A
        # stored segment was stored with all its steps, in one transaction.
        stored_before = await recordings.find_segment(self.store, site["_id"],
                                                      upload.recording_id, upload.seq)
        if stored_before is not None:
            return self._duplicate(stored_before["metadata"]["recordingId"])
        settings = {**DEFAULT_SETTINGS, **site.get("settings", {})}
        # The segment's own timestamps: the footage it adds, whenever it reached the service.
        started_at = parse_time(upload.started_at, now)
        ended_at = max(started_at, parse_time(upload.ended_at, now))
        file_id = new_id()
        filed_under = ""

        async def write(session: Any) -> None:
            # Routing, the bytes and the page they add land together: a failure anywhere leaves
            # no trace of this attempt, and the retry walks the same way.
            nonlocal filed_under
            recording = await self.live_recording(site["_id"], upload.recording_id,
                                                  upload.visitor_id, upload.session_id, now,
                                                  session=session)
            filed_under = recording["_id"]
            await recordings.save_segment(self.store, file_id, upload.data, {
                "siteId": site["_id"],
                "visitorId": recording["visitorId"],
                "recordingId": recording["_id"],
                "sentFor": upload.recording_id,
                "seq": upload.seq,
                "startedAt": started_at,
                "endedAt": ended_at,
                "receivedAt": now,
                "pageUrl": upload.page_url,
                # Decided at capture time: turning capture on later does not revive stripped
                # output.
                "keepConsole": bool(settings["consoleCapture"]),
                # Likewise: the pages whose text the sweeper masks, as the site named them then.
                "personalPages": personal_page_patterns(site),
                "consoleChecked": False,
                "rejected": None,
                "leaseUntil": None,
            }, session=session)
            await recordings.add_footage(self.store, site["_id"], recording["_id"], started_at,
                                         ended_at, session=session)
            await self._after_segment(site["_id"], recording["_id"], recording["visitorId"],
                                      upload, now, session=session)

        if not await self.store.write_once(write):
            # A key was taken: this segment by a concurrent attempt, or the recording id by
            # another site's recording.
            stored = await recordings.find_segment(self.store, site["_id"], upload.recording_id,
                                                   upload.seq)
            if stored is None:
                raise Conflict("this recording id is taken", code="recording_id_taken")
            return self._duplicate(stored["metadata"]["recordingId"])
        self.intake.count("recording_segment", "stored")
        return SegmentOutcome(Outcome(True, item_id=file_id), filed_under)

    async def _after_segment(self, site_id: str, recording_id: str, visitor_id: str,
                             upload: SegmentUpload, at: datetime, *, session: Any) -> None:
        """The steps after a segment is stored, in its transaction."""
        await recordings.add_page(self.store, site_id, recording_id, upload.page_url, at,
                                  session=session)
        if upload.order_completed:
            await self.end_for_order(site_id, visitor_id, session=session)

    def _duplicate(self, recording_id: str) -> SegmentOutcome:
        self.intake.count("recording_segment", "duplicate")
        return SegmentOutcome(Outcome(True), recording_id, duplicate=True)

    async def live_recording(self, site_id: str, recording_id: str, visitor_id: str,
                             session_id: str | None, now: datetime, *, session: Any
                             ) -> dict[str, Any]:
        """The live recording that activity sent for `recording_id` belongs to, now.

        Runs inside the segment's transaction (`session`): every step is a conditional write,
        so concurrent segments conflict and are retried by the driver rather than forking the
        chain, and a failure anywhere undoes the walk with the segment.
        """
        current = recording_id
        for _ in range(MAX_HOPS):
            live = await recordings.touch_if_live(self.store, site_id, current, now=now,
                                                  idle_since=now - self.inactivity,
                                                  started_since=now - self.cap, session=session)
            if live is not None:
                return live
            found = await recordings.find_recording(self.store, site_id, current,
                                                    session=session)
            if found is None:
                # A segment whose start was never stored (the start page was excluded from
                # replay, say): the segment starts the recording under the client's id. An id
                # another site holds raises AlreadyStored, which ends the transaction.
                country, device = await self._known_facts(site_id, visitor_id, None, None,
                                                          session=session)
                await self._create(site_id, recordings.new_recording(
                    current, site_id, visitor_id, session_id, now, country=country,
                    device=device), session=session)
                continue
            if found["status"] == "active":
                reason, ended_at = self._why_over(found, now)
                await recordings.end_recording(self.store, site_id, current, at=ended_at,
                                               reason=reason, session=session)
            successor = recordings.successor_id(current)
            # The successor goes on with its predecessor's visit: same visitor, same facts.
            country, device = await self._known_facts(
                site_id, found["visitorId"], found.get("country"), found.get("device"),
                session=session)
            await self._create(site_id, recordings.new_recording(
                successor, site_id, found["visitorId"], found.get("sessionId"), now,
                continues_from=current, wp_user_id=found.get("wpUserId"), country=country,
                device=device), session=session)
            await recordings.link_successor(self.store, current, successor, session=session)
            current = successor
        raise RuntimeError(f"recording {recording_id} has more than {MAX_HOPS} successors")

    def _why_over(self, recording: dict[str, Any], now: datetime) -> tuple[str, datetime]:
        """Why an active recording no longer takes activity, and when it really ended."""
        last = _aware(recording["lastActivityAt"])
        if last < now - self.inactivity:
            return INACTIVITY, last
        return "cap", now

    async def _known_facts(self, site_id: str, visitor_id: str, country: str | None,
                           device: str | None, *, session: Any) -> tuple[str | None, str | None]:
        """The country and device type a new recording keeps: those given, and where one is
        not known, the visitor's profile's (one read by `_id`, only then)."""
        if device == "unknown":
            device = None
        if country and device:
            return country, device
        stored = await visitors.countries_and_devices(self.store, site_id, [visitor_id],
                                                      session=session)
        known_country, known_device = stored.get(visitor_id, (None, None))
        return country or known_country, device or known_device

    async def _create(self, site_id: str, document: dict[str, Any], *, session: Any) -> None:
        """Create the recording and count it on the profile, inside the caller's transaction."""
        if await recordings.create_recording(self.store, document, session=session):
            await visitors.touch(self.store, site_id, document["visitorId"],
                                 seen_at=document["startedAt"], facts=visitors.VisitorFacts(),
                                 counts={"recordings": 1}, session=session)


def _aware(value: datetime) -> datetime:
    """Stored times come back naive from some back-ends; they are always UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
