"""The segment sweeper: checks stored recording segments off the request path.

Segments are stored exactly as the client sent them, gzip-compressed, with
`metadata.consoleChecked: false`, and are not served for replay until this sweeper has looked
inside (privacy rule 5, decision "Console capture is enforced off the request path" in
docs/decisions.md). For each unchecked segment it:

1. leases the file, so several server processes and workers can sweep side by side;
2. inflates it in a thread with a hard cap on the inflated size (a gzip bomb stops at the cap
   instead of exhausting memory) and parses the rrweb event array;
3. removes rrweb console-plugin events unless the site captured console output at upload time,
   recompresses, and swaps the file for the stripped one in one transaction (fresh file id);
4. or marks it checked as it is, or rejects it (content dropped, key kept) when it is too large
   inflated, not gzip, or not an rrweb event array.

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

from config.background import stop_task
from config.metrics import Metrics
from documents import recordings
from documents.accounts import new_id
from documents.store import Store

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


class SegmentRejected(ValueError):
    """The segment cannot be replayed safely; `reason` is stored on it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class SegmentCheck:
    """The verdict on one segment: `data` is set only when the segment must be replaced."""

    console_events: int
    data: bytes | None = None


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


def check_segment(data: bytes, *, keep_console: bool, max_inflated_bytes: int) -> SegmentCheck:
    """Inflate, parse and (unless console is kept) strip one segment; CPU-bound, run in a thread."""
    text = inflate(data, max_inflated_bytes)
    try:
        events = json.loads(text)
    except (ValueError, RecursionError):
        raise SegmentRejected("not_json") from None
    if not isinstance(events, list):
        raise SegmentRejected("not_rrweb_events")
    console = sum(1 for event in events if _is_console_event(event))
    if keep_console or console == 0:
        return SegmentCheck(console)
    kept = [event for event in events if not _is_console_event(event)]
    stripped = gzip.compress(json.dumps(kept, separators=(",", ":")).encode("utf-8"),
                             compresslevel=6, mtime=0)
    return SegmentCheck(console, stripped)


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
        self._task: asyncio.Task[None] | None = None

    async def sweep(self, limit: int = 100) -> int:
        """Check up to `limit` segments now; returns how many were checked."""
        checked = 0
        while checked < limit:
            now = datetime.now(UTC)
            claimed = await recordings.claim_unchecked_segment(self.store, now=now,
                                                               lease_until=now + self.lease)
            if claimed is None:
                break
            await self.check(claimed)
            checked += 1
        return checked

    async def check(self, file: dict[str, Any]) -> str:
        """Check one leased segment and record the verdict; returns it."""
        data = await self.store.bucket(recordings.SEGMENTS_BUCKET).read(file["_id"])
        try:
            verdict = await asyncio.to_thread(
                check_segment, data, keep_console=bool(file["metadata"].get("keepConsole")),
                max_inflated_bytes=self.max_inflated_bytes)
        except SegmentRejected as rejected:
            await recordings.reject_segment(self.store, file["_id"], rejected.reason)
            result = f"rejected_{rejected.reason}"
        else:
            if verdict.data is None:
                await recordings.mark_segment_checked(self.store, file["_id"],
                                                      console_events=verdict.console_events)
                result = "clean" if not verdict.console_events else "console_kept"
            else:
                await recordings.replace_segment(self.store, file, new_id(), verdict.data,
                                                 console_removed=verdict.console_events)
                result = "console_removed"
        self.metrics.count(CHECKED_METRIC, CHECKED_HELP, result=result)
        return result

    async def end_idle_recordings(self) -> int:
        """End the recordings idle past the inactivity threshold now; returns how many."""
        ended = await self.lifecycle.end_idle()
        if ended:
            self.metrics.count(IDLE_ENDED_METRIC, IDLE_ENDED_HELP, amount=ended)
        return ended

    def start(self) -> None:
        """Sweep in the background until `close`."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        """Stop the background sweep."""
        await stop_task(self._task)
        self._task = None

    async def _run(self) -> None:
        steps = (("segment sweep", self.sweep), ("idle recording sweep", self.end_idle_recordings))
        while True:
            for name, step in steps:
                try:
                    await step()
                except Exception:  # noqa: BLE001 - the loop outlives one bad pass; leases expire
                    log.exception("%s failed", name)
            await asyncio.sleep(self.interval)
