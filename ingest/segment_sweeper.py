"""The segment sweeper: checks stored recording segments off the request path.

Segments are stored exactly as the client sent them, gzip-compressed, with
`metadata.consoleChecked: false`, and are not served for replay until this sweeper has looked
inside (privacy rule 5, decision "Console capture is enforced off the request path" in
docs/decisions.md). For each unchecked segment it:

1. leases the file, so several server processes and workers can sweep side by side;
2. inflates it in a thread with a hard cap on the inflated size (a gzip bomb stops at the cap
   instead of exhausting memory) and parses the rrweb event array;
3. removes rrweb console-plugin events unless the site captured console output at upload time,
   masks the text of the customer's own pages (privacy/personal_pages.py: the site's
   `personalPages` at upload time, and anything inside `rr-mask`), strips secret parameters
   from the URLs inside the events (the site's `secretUrlParameters` as they are now),
   recompresses, and swaps the file for the rewritten one in one transaction (fresh file id);
4. or marks it checked as it is, or rejects it (content dropped, key kept) when it is too large
   inflated, not gzip, or not an rrweb event array.

A segment that does not begin a page (no meta event, no full snapshot) names nodes only by id:
whether its page is personal is the verdict on the segment the client sent just before it
(`metadata.personalPage`). Until that one is checked, arrived or not, the segment is held
unchecked, so never served (decision "Personal pages masked whatever the order" in
docs/decisions.md); checking the segment before releases it at once, and a held segment is
looked at again every HOLD_SECONDS. When the one before can no longer come (the segment is the
first of its tab, the one before was rejected, or the recording has ended and LATE_SECONDS
have passed since the segment arrived), its page is taken as personal and masked whole.

Each pass also ends the recordings idle past RECORDING_INACTIVITY_SECONDS
(`RecordingLifecycle.end_idle`, one conditional update), so an abandoned recording does not
stay active until a next segment that may never come.

The server starts one sweeper per process (`SegmentSweeper.start`); a worker may run more.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from config.background import PeriodicTask
from config.metrics import Metrics
from documents import recordings, sites
from documents.accounts import new_id
from documents.store import Store
from privacy.personal_pages import DEFAULT_PERSONAL_PAGES, mask_personal_text
from privacy.url_secrets import DEFAULT_SECRET_PARAMETERS, secret_parameters

if TYPE_CHECKING:
    from ingest.recordings import RecordingLifecycle

log = logging.getLogger(__name__)

#: rrweb marks plugin events with type 6; the console plugin names itself like this.
RRWEB_PLUGIN_EVENT = 6
CONSOLE_PLUGIN = "rrweb/console@1"

CHECKED_METRIC = "recording_segments_checked_total"
CHECKED_HELP = "Recording segments checked by the sweeper, by result."
IDLE_ENDED_METRIC = "recordings_ended_idle_total"
IDLE_ENDED_HELP = "Recordings the sweeper ended for inactivity."
#: How often a held segment is looked at again (the segment before it releases it sooner).
HOLD_SECONDS = 60.0
#: How long after a held segment arrived, once its recording has ended, the segment before it
#: is given up for lost: the loader sends a segment only after the one before it was stored or
#: its retries (1, 2 and 4 s) failed; only a page being left sends several side by side.
LATE_SECONDS = 60.0


class SegmentRejected(ValueError):
    """The segment cannot be replayed safely; `reason` is stored on it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SegmentDeferred(Exception):
    """The segment's page is known only from the segment before it, not checked yet."""


@dataclass(frozen=True)
class SegmentCheck:
    """The verdict on one segment: `data` is set only when the segment must be replaced."""

    console_events: int
    data: bytes | None = None
    texts_masked: int = 0
    personal_page: bool = False
    custom_events_dropped: int = 0


def inflate(data: bytes, limit: int) -> bytes:
    """The gzip stream's content (all members), or SegmentRejected past `limit` bytes."""
    out = bytearray()
    pending = data
    while pending:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        while True:
            try:
                # Asking for one byte more than the room left is how the cap is detected
                # without ever holding more than limit + 1 bytes.
                out += inflater.decompress(pending, limit - len(out) + 1)
            except zlib.error:
                raise SegmentRejected("not_gzip") from None
            if len(out) > limit:
                raise SegmentRejected("too_large_inflated")
            if inflater.eof:
                pending = inflater.unused_data
                break
            if not inflater.unconsumed_tail:
                raise SegmentRejected("truncated")
            pending = inflater.unconsumed_tail
    return bytes(out)


def _is_console_event(event: Any) -> bool:
    return (isinstance(event, dict) and event.get("type") == RRWEB_PLUGIN_EVENT
            and isinstance(event.get("data"), dict)
            and event["data"].get("plugin") == CONSOLE_PLUGIN)


def check_segment(data: bytes, *, keep_console: bool, max_inflated_bytes: int,
                  page_url: str | None = None,
                  personal_pages: list[str] | tuple[str, ...] = DEFAULT_PERSONAL_PAGES,
                  personal_before: bool | None = False,
                  secret_names: frozenset[str] = DEFAULT_SECRET_PARAMETERS) -> SegmentCheck:
    """Inflate, parse, (unless console is kept) strip, mask personal text and strip URL
    secrets in one segment; CPU-bound, run in a thread. `personal_before` is None while the
    segment before this one is not checked: a segment that cannot decide by itself is then
    SegmentDeferred."""
    text = inflate(data, max_inflated_bytes)
    try:
        events = json.loads(text)
    except (ValueError, RecursionError):
        raise SegmentRejected("not_json") from None
    if not isinstance(events, list):
        raise SegmentRejected("not_rrweb_events")
    console = sum(1 for event in events if _is_console_event(event))
    if not keep_console and console:
        events = [event for event in events if not _is_console_event(event)]
    try:
        masking = mask_personal_text(events, page_url, list(personal_pages),
                                     personal_before=personal_before, secret_names=secret_names)
    except RecursionError:
        # A page nested deeper than the masker walks cannot be shown to be masked.
        raise SegmentRejected("too_deep") from None
    if masking.undecided:
        raise SegmentDeferred
    if (keep_console or console == 0) and not masking.changed:
        return SegmentCheck(console, personal_page=masking.personal_page)
    rewritten = gzip.compress(json.dumps(events, separators=(",", ":")).encode("utf-8"),
                              compresslevel=6, mtime=0)
    return SegmentCheck(console, rewritten, masking.texts, masking.personal_page,
                        masking.custom_events)


def _page_verdict(previous: list[dict[str, Any]]) -> bool | None:
    """What the segment sent before says of the page: personal (a rejected one cannot say it
    is not), not, or None while it is not here or not checked."""
    checked = [metadata for metadata in previous if metadata.get("consoleChecked")]
    if any(metadata.get("personalPage") or metadata.get("rejected") for metadata in checked):
        return True
    if previous and len(checked) == len(previous):
        return False
    return None


def _rewritten_result(verdict: SegmentCheck, console_removed: int) -> str:
    """The metric's name for a rewritten segment, by the most telling change."""
    if verdict.texts_masked or verdict.custom_events_dropped:
        return "text_masked"
    return "console_removed" if console_removed else "url_stripped"


class SegmentSweeper:
    """Checks unchecked segments and ends idle recordings, in the background or on demand."""

    def __init__(self, store: Store, metrics: Metrics, lifecycle: RecordingLifecycle, *,
                 max_inflated_bytes: int, interval_seconds: float,
                 lease_seconds: float = 120.0) -> None:
        self.store = store
        self.metrics = metrics
        self.lifecycle = lifecycle
        self.max_inflated_bytes = max_inflated_bytes
        self.interval = interval_seconds
        self.lease = timedelta(seconds=lease_seconds)
        # A bad pass is logged and the next one retries: leases expire.
        self._loop = PeriodicTask(
            "segment-sweeper",
            [("segment sweep", self.sweep), ("idle recording sweep", self.end_idle_recordings)],
            pause=lambda: self.interval, logger=log)

    async def sweep(self, limit: int = 100) -> int:
        """Check up to `limit` segments now; returns how many were checked (not deferred)."""
        checked = 0
        for _ in range(limit):
            now = datetime.now(UTC)
            claimed = await recordings.claim_unchecked_segment(self.store, now=now,
                                                               lease_until=now + self.lease)
            if claimed is None:
                break
            if await self.check(claimed) != "deferred":
                checked += 1
        return checked

    async def check(self, file: dict[str, Any]) -> str:
        """Check one leased segment and record the verdict; returns it."""
        data = await self.store.bucket(recordings.SEGMENTS_BUCKET).read(file["_id"])
        metadata = file["metadata"]
        site = await sites.find_site(self.store, metadata["siteId"],
                                     {"settings.secretUrlParameters": 1})
        try:
            verdict = await asyncio.to_thread(
                check_segment, data, keep_console=bool(metadata.get("keepConsole")),
                max_inflated_bytes=self.max_inflated_bytes, page_url=metadata.get("pageUrl"),
                # Segments stored before the setting existed get WooCommerce's defaults.
                personal_pages=metadata.get("personalPages", DEFAULT_PERSONAL_PAGES),
                personal_before=await self._personal_before(file),
                secret_names=secret_parameters(site or {}))
        except SegmentDeferred:
            await recordings.postpone_check(
                self.store, file["_id"],
                until=datetime.now(UTC) + timedelta(seconds=HOLD_SECONDS))
            result = "deferred"
        except SegmentRejected as rejected:
            await recordings.reject_segment(self.store, file["_id"], rejected.reason)
            result = f"rejected_{rejected.reason}"
        else:
            if verdict.data is None:
                await recordings.mark_segment_checked(self.store, file["_id"],
                                                      console_events=verdict.console_events,
                                                      personal_page=verdict.personal_page)
                result = "clean" if not verdict.console_events else "console_kept"
            else:
                removed = 0 if metadata.get("keepConsole") else verdict.console_events
                await recordings.replace_segment(
                    self.store, file, new_id(), verdict.data, console_removed=removed,
                    texts_masked=verdict.texts_masked, personal_page=verdict.personal_page)
                result = _rewritten_result(verdict, removed)
        if result != "deferred":
            await recordings.release_next_segment(self.store, file)
        self.metrics.count(CHECKED_METRIC, CHECKED_HELP, result=result)
        return result

    async def _personal_before(self, file: dict[str, Any]) -> bool | None:
        """Whether the segment sent before this one was of a personal page; None while it may
        still come or be checked."""
        metadata = file["metadata"]
        if metadata["seq"] == 0:
            # The first segment of its tab has none before it: a page's beginning it should
            # hold, or it is nothing to trust.
            return True
        before = _page_verdict(await recordings.previous_segments(self.store, file))
        if before is None and await self._given_up(metadata):
            return True
        return before

    async def _given_up(self, metadata: dict[str, Any]) -> bool:
        """The segment before this one is taken as lost: its recording has ended and
        LATE_SECONDS have passed since this one arrived."""
        received = metadata.get("receivedAt")
        if isinstance(received, datetime) and received.tzinfo is None:
            received = received.replace(tzinfo=UTC)  # some back-ends give naive UTC back
        if isinstance(received, datetime) \
                and self.lifecycle.clock() - received < timedelta(seconds=LATE_SECONDS):
            return False
        recording = await recordings.find_recording(self.store, metadata["siteId"],
                                                    metadata["recordingId"])
        return recording is None or recording.get("status") != "active"

    async def end_idle_recordings(self) -> int:
        """End the recordings idle past the inactivity threshold now; returns how many."""
        ended = await self.lifecycle.end_idle()
        if ended:
            self.metrics.count(IDLE_ENDED_METRIC, IDLE_ENDED_HELP, amount=ended)
        return ended

    def start(self) -> None:
        """Sweep in the background until `close`."""
        self._loop.start()

    async def close(self) -> None:
        """Stop the background sweep."""
        await self._loop.close()
