"""Heatmaps: background images in GridFS with the recordings they came from, and the counts.

Keeping the source recording ids on each image is what lets erasure find and delete the
images rendered from a visitor's recordings (spec §4.3 effect 6).
"""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import date, datetime, timedelta
from typing import Any

from documents import interactions
from documents.retention import Expiry
from documents.store import ASCENDING, DuplicateKeyError, Index, Store
from instants import UTC_DAYS, DayClock

BUCKET = "heatmaps"

INDEXES = [
    Index(f"{BUCKET}.files", (("metadata.siteId", ASCENDING),
                              ("metadata.sourceRecordingIds", ASCENDING))),
    Index(f"{BUCKET}.files", (("metadata.siteId", ASCENDING), ("metadata.pageUrl", ASCENDING))),
    # The newest image of a page at a width class.
    Index(f"{BUCKET}.files", (("metadata.siteId", ASCENDING), ("metadata.pageUrl", ASCENDING),
                              ("metadata.width", ASCENDING), ("uploadDate", ASCENDING))),
    Index(f"{BUCKET}.chunks", (("files_id", ASCENDING), ("n", ASCENDING)), unique=True),
    # The site's oldest images, for retention (documents/retention.py).
    Index(f"{BUCKET}.files", (("metadata.siteId", ASCENDING), ("uploadDate", ASCENDING))),
]
#: An image expires by when it was rendered; it goes with its chunks.
EXPIRY = Expiry(f"{BUCKET}.files", "uploadDate", "metadata.siteId", bucket=BUCKET)


async def store_heatmap(store: Store, site_id: str, page_url: str, image: bytes,
                        source_recording_ids: list[str], *, session: Any = None,
                        details: dict[str, Any] | None = None) -> str:
    """Store a rendered image with the recordings it came from; returns its file id.

    `details` (width class, size, element boxes) go into the metadata beside them.
    """
    file_id = str(uuid.uuid4())
    await store.bucket(BUCKET).upload(
        file_id, f"{site_id}/heatmap-{file_id}.png", image,
        {**(details or {}), "siteId": site_id, "pageUrl": page_url, "contentType": "image/png",
         "sourceRecordingIds": sorted(set(source_recording_ids))},
        session=session,
    )
    return file_id


async def latest_image(store: Store, site_id: str, page: str, width: str
                       ) -> dict[str, Any] | None:
    """The newest image of a page at a width class (its files document), if any."""
    cursor = store.bucket(BUCKET).files.find(
        {"metadata.siteId": site_id, "metadata.pageUrl": page, "metadata.width": width}
    ).sort("uploadDate", -1).limit(1)
    found = [doc async for doc in cursor]
    return found[0] if found else None


async def read_image(store: Store, site_id: str, file_id: str) -> bytes | None:
    """An image's PNG bytes, if it belongs to the site."""
    bucket = store.bucket(BUCKET)
    if await bucket.files.find_one({"_id": file_id, "metadata.siteId": site_id}) is None:
        return None
    return b"".join([chunk async for chunk in bucket.read_chunks(file_id)])


# --- Aggregates folded from the interactions ------------------------------------------------------
#
# One document per (site, page, width class, kind, day, target, cell) holding counts only: `n`
# events, `xSum`/`ySum` (page position fallbacks). Scroll documents (kind "scroll", no target)
# hold `views`, `foldSum` and `reach.<depth>`: how many views reached each depth bucket. Nothing
# in them names a visitor; each raw interaction event keeps the `heatmap` contribution it adds,
# which the derivation folds in (derived/derivation.py), so erasure subtracts exactly the
# visitor's folded share (decisions "Heatmaps (issue 22)" and "Figures are derived off the
# request path").

COUNTS = "heatmap_counts"

#: Click kinds drawn as points; "scroll" is drawn as a gradient.
POINT_KINDS = ("click", "rage_click", "dead_click")
KINDS = (*POINT_KINDS, "scroll")
#: Viewport widths below each bound fall in that class (CSS's common phone/tablet breakpoints).
WIDTH_CLASSES = (("phone", 768), ("tablet", 1024), ("desktop", 1_000_000))
#: Offsets inside an element are kept in tenths of its box: 100 cells per element.
OFFSET_STEPS = 10
#: Scroll depth reach is counted per 5 percent.
DEPTH_STEP = 5
#: Clicks without a selector fall on a page grid: tenths of the width, 50 px rows.
GRID_ROW_PX = 50

_KEY = ("siteId", "page", "width", "kind", "day", "target", "cell")

INDEXES += [
    # The heatmap read (one page, width, kind, over days) and the $inc upsert's match.
    Index(COUNTS, tuple((name, ASCENDING) for name in _KEY), unique=True),
    # The pages list: a site's counts over a date range.
    Index(COUNTS, (("siteId", ASCENDING), ("day", ASCENDING), ("page", ASCENDING))),
]


def width_class(viewport_width: int | None) -> str:
    """desktop, tablet or phone for a viewport width (desktop when unknown)."""
    if not viewport_width:
        return "desktop"
    return next(name for name, bound in WIDTH_CLASSES if viewport_width < bound)


def _step(fraction: float) -> int:
    return min(OFFSET_STEPS - 1, max(0, int(fraction * OFFSET_STEPS)))


def contribution(event: dict[str, Any], page: str, clock: DayClock = UTC_DAYS
                 ) -> dict[str, Any] | None:
    """What one stored interaction adds to the aggregates (kept on the event for erasure), on
    the site's day of it (`clock`)."""
    kind = event["kind"]
    width = event.get("vw")
    base = {"page": page, "width": width_class(width), "day": clock.day_of(event["at"])}
    if kind == "scroll_depth":
        start = float(event.get("from") or 0)
        reached = [step for step in range(DEPTH_STEP, 101, DEPTH_STEP)
                   if start < step <= event["depth"]]
        return {**base, "kind": "scroll", "target": "", "cell": 0, "reach": reached,
                "view": start == 0, "fold": float(event.get("fold") or 0)}
    if kind not in POINT_KINDS:
        return None
    x = float(event.get("x") or 0) / width if width else 0.0
    selector = event.get("selector") or ""
    if selector and "ox" in event and "oy" in event:
        cell = _step(event["ox"]) * OFFSET_STEPS + _step(event["oy"])
    else:
        selector = ""
        cell = _step(x) * 100_000 + int(event.get("y") or 0) // GRID_ROW_PX
    return {**base, "kind": kind, "target": selector, "cell": cell, "x": round(min(x, 1.0), 4),
            "y": int(event.get("y") or 0)}


def _increments(share: dict[str, Any], sign: int) -> dict[str, Any]:
    if share["kind"] == "scroll":
        inc: dict[str, Any] = {f"reach.{step}": sign for step in share["reach"]}
        if share["view"]:
            inc.update({"views": sign, "foldSum": sign * share["fold"]})
        return inc
    return {"n": sign, "xSum": sign * share["x"], "ySum": sign * share["y"]}


async def _apply_shares(store: Store, site_id: str, shares: list[dict[str, Any]], sign: int,
                        session: Any) -> int:
    grouped: dict[tuple[Any, ...], dict[str, float]] = {}
    for share in shares:
        key = tuple(share[name] for name in _KEY[1:])
        totals = grouped.setdefault(key, {})
        for field, amount in _increments(share, sign).items():
            totals[field] = totals.get(field, 0) + amount
    collection = store.collection(COUNTS)
    for key, totals in grouped.items():
        if not totals:
            continue
        match = dict(zip(_KEY, (site_id, *key), strict=True))
        try:
            await collection.update_one(match, {"$inc": totals}, upsert=sign > 0,
                                        session=session)
        except DuplicateKeyError:
            if session is not None:
                # In a transaction the race is a write conflict the driver retries; a duplicate
                # key has aborted the transaction, and nothing more may run in it.
                raise
            # Two first increments of one cell raced; the unique index let one insert, and
            # this retry finds its document and increments it.
            await collection.update_one(match, {"$inc": totals})
    return len(grouped)


async def add_to_aggregates(store: Store, site_id: str, shares: list[dict[str, Any]], *,
                            session: Any = None) -> int:
    """Count the shares of stored interactions (the fold); returns the documents touched."""
    return await _apply_shares(store, site_id, shares, 1, session)


async def subtract_visitor(store: Store, site_id: str, visitor_id: str, *,
                           unfolded: list[dict[str, Any]] | None = None,
                           session: Any = None) -> int:
    """Remove the visitor's share from the aggregates (erasure); returns the shares removed.

    `unfolded` are shares of stored events not added yet (derived/derivation.py): left out.
    """
    cursor = interactions.visitor_events(store, site_id, visitor_id, session=session)
    pending = Counter(repr(sorted(share.items())) for share in unfolded or [])
    shares = []
    async for bucket in cursor:
        for event in bucket.get("events", []):
            share = event.get("heatmap")
            if not share:
                continue
            key = repr(sorted(share.items()))
            if pending[key] > 0:
                pending[key] -= 1
                continue
            shares.append(share)
    if not shares:
        return 0
    await _apply_shares(store, site_id, shares, -1, session)
    # Cells left with nothing are removed so that no empty trace of the visitor stays.
    await store.collection(COUNTS).delete_many(
        {"siteId": site_id, "kind": {"$in": list(POINT_KINDS)}, "n": {"$lte": 0}},
        session=session)
    return len(shares)


def _days(first_day: str, last_day: str) -> list[str]:
    """Every day of the range, as stored: an `$in` of days is as indexed as a range, and the
    wire store under test (SecantusDB 0.7) answers nothing to a range whose bounds are equal."""
    first, last = date.fromisoformat(first_day), date.fromisoformat(last_day)
    return [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]


async def read_heatmap(store: Store, site_id: str, page: str, width: str, kind: str,
                       first_day: str, last_day: str) -> list[dict[str, Any]]:
    """One page's counts for a width class and kind over days: one indexed query."""
    cursor = store.collection(COUNTS).find(
        {"siteId": site_id, "page": page, "width": width, "kind": kind,
         "day": {"$in": _days(first_day, last_day)}},
        {"_id": 0, "target": 1, "cell": 1, "n": 1, "xSum": 1, "ySum": 1, "views": 1,
         "foldSum": 1, "reach": 1})
    return [doc async for doc in cursor]


async def read_pages(store: Store, site_id: str, first_day: str, last_day: str
                     ) -> list[dict[str, Any]]:
    """Per page: click counts by kind over days (summed in the store)."""
    cursor = store.collection(COUNTS).aggregate([
        {"$match": {"siteId": site_id, "day": {"$in": _days(first_day, last_day)},
                    "kind": {"$in": list(POINT_KINDS)}}},
        {"$group": {"_id": {"page": "$page", "kind": "$kind"},
                    "n": {"$sum": {"$ifNull": ["$n", 0]}}}},
    ])
    return [doc async for doc in cursor]


def summarise(rows: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """Day documents summed into what the dashboard draws: points, or the scroll reach."""
    if kind == "scroll":
        views = sum(row.get("views", 0) for row in rows)
        fold = sum(row.get("foldSum", 0) for row in rows)
        reach = {step: sum(row.get("reach", {}).get(str(step), 0) for row in rows)
                 for step in range(DEPTH_STEP, 101, DEPTH_STEP)}
        return {"views": views, "fold": round(fold / views, 1) if views else None,
                "reach": [{"depth": step, "views": count,
                           "share": round(count / views, 4) if views else 0}
                          for step, count in reach.items()]}
    cells: dict[tuple[str, int], list[float]] = {}
    for row in rows:
        totals = cells.setdefault((row["target"], row["cell"]), [0, 0.0, 0.0])
        totals[0] += row.get("n", 0)
        totals[1] += row.get("xSum", 0)
        totals[2] += row.get("ySum", 0)
    points = []
    for (target, cell), (n, x_sum, y_sum) in cells.items():
        if n <= 0:
            continue
        point: dict[str, Any] = {"selector": target or None, "count": n,
                                 "x": round(x_sum / n, 4), "y": round(y_sum / n)}
        if target:
            point["ox"] = (cell // OFFSET_STEPS + 0.5) / OFFSET_STEPS
            point["oy"] = (cell % OFFSET_STEPS + 0.5) / OFFSET_STEPS
        points.append(point)
    points.sort(key=lambda point: -point["count"])
    return {"total": sum(point["count"] for point in points), "points": points}


def summarise_pages(rows: list[dict[str, Any]], pageviews: Counter[str]
                    ) -> list[dict[str, Any]]:
    """The pages list rows, busiest first: each page's pageviews (the overview's figure, not
    the scroll heatmap's measured views) and counts per kind."""
    pages: dict[str, Counter[str]] = {page: Counter() for page, n in pageviews.items() if n}
    for row in rows:
        pages.setdefault(row["_id"]["page"], Counter())[row["_id"]["kind"]] += row["n"]
    listed = [{"page": page, "views": pageviews[page], "clicks": c["click"],
               "rageClicks": c["rage_click"], "deadClicks": c["dead_click"]}
              for page, c in pages.items()]
    return sorted(listed, key=lambda p: (-(p["views"] + p["clicks"]), p["page"]))


# --- Render requests -----------------------------------------------------------------------------
#
# A heatmap looked at without a current image asks for one: a request document per (site, page,
# width class), created by an upsert on its derived `_id` (asked twice, it exists once), leased
# by one renderer at a time and deleted when done.

RENDERS = "heatmap_renders"
_RENDER_NAMESPACE = uuid.UUID("5f1d0c7e-2a44-4c1b-9a53-7f0e6b2d8c11")

INDEXES += [
    # The renderer claims the oldest request whose lease has run out.
    Index(RENDERS, (("leaseUntil", ASCENDING), ("requestedAt", ASCENDING))),
]


async def request_render(store: Store, site_id: str, page: str, width: str,
                         now: datetime) -> None:
    """Ask for the page's image at the width class (once, however often asked)."""
    request_id = str(uuid.uuid5(_RENDER_NAMESPACE, f"{site_id}\n{page}\n{width}"))
    try:
        await store.collection(RENDERS).update_one(
            {"_id": request_id},
            {"$setOnInsert": {"siteId": site_id, "page": page, "width": width,
                              "requestedAt": now, "leaseUntil": now}},
            upsert=True)
    except DuplicateKeyError:
        return  # asked at the same moment by another request: it exists, which is all we need


async def claim_render(store: Store, now: datetime, lease: timedelta
                       ) -> dict[str, Any] | None:
    """Lease the oldest waiting request (or one whose renderer died), if any."""
    return await store.collection(RENDERS).find_one_and_update(
        {"leaseUntil": {"$lte": now}}, {"$set": {"leaseUntil": now + lease}},
        sort=[("leaseUntil", ASCENDING), ("requestedAt", ASCENDING)])


async def finish_render(store: Store, request_id: str) -> None:
    """The request is done (rendered, or nothing to render from)."""
    await store.collection(RENDERS).delete_one({"_id": request_id})
