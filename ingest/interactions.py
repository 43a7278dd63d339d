"""Interaction batches (clicks, rage clicks, dead clicks, scroll depth): gate, shape, store.

Each event passes the privacy gate for its own page: one gate decision per distinct URL in the
batch, so an event on a page excluded from all collection is dropped while the rest are kept.
A batch with a `batchId` is stored at most once, so a caller may retry it after a 503 or a lost
answer; one without is stored each time it is sent, as before.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from derived import daily_figures, derivation
from documents import heatmaps, interactions, sites, visitors
from documents.accounts import new_id
from documents.store import Store
from ingest.intake import VisitorIntake, parse_time
from privacy.heatmap_pages import page_group_rules, page_of


@dataclass(frozen=True)
class BatchOutcome:
    """How many events of a batch are stored and how many the privacy gate dropped.

    `duplicate` is set when an earlier attempt at the same `batchId` had already stored them.
    """

    stored: int
    dropped: int
    duplicate: bool = False


#: Optional event fields copied as they are, after the schema has bounded them.
_EVENT_FIELDS = ("selector", "x", "y", "count", "depth", "from", "fold", "vw", "ox", "oy")


async def record_interactions(store: Store, intake: VisitorIntake, site: dict[str, Any],
                              body: dict[str, Any], *,
                              cap: int = interactions.BUCKET_CAP) -> BatchOutcome:
    """Store the batch's admitted events in the visitor's buckets and touch the profile."""
    now = datetime.now(UTC)
    by_url: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for index, item in enumerate(body["interactions"]):
        by_url[item.get("url") or body.get("url") or ""].append((index, item))
    admitted: list[dict[str, Any]] = []
    for url, items in by_url.items():
        gated = {**body, "url": url or None}
        decision = await intake.admit(site, "interaction", gated)
        if not decision.allowed:
            # admit counted one drop for the decision; the batch's other events count too.
            if len(items) > 1:
                intake.count("interaction", "dropped", decision.reason or "refused",
                             len(items) - 1)
            continue
        # The page as admitted: its addresses anonymised and its secret parameters stripped.
        admitted.extend(_event(body, item, now, gated["url"], f"interactions.{index}.at")
                        for index, item in items)
    dropped = len(body["interactions"]) - len(admitted)
    if not admitted:
        return BatchOutcome(0, dropped)
    admitted.sort(key=lambda event: event["at"])
    rules, clock = page_group_rules(site), sites.day_clock(site)
    for event in admitted:
        # The share each event adds to the heatmap counts stays on it, for erasure to subtract.
        share = (heatmaps.contribution(event, page_of(event["url"], rules), clock)
                 if event["url"] else None)
        if share is not None:
            event["heatmap"] = share
    batch_id = body.get("batchId")
    site_id, visitor_id = site["_id"], body["visitorId"]
    facts = intake.describe_visitor(body)

    async def write(session: Any) -> None:
        # The events, the profile's count and the fact that counts them go together: a batch
        # is counted (heatmap cells, page figures, recording marks, folded in later by
        # derived/derivation.py) exactly when it is stored, and a retry stores it all once.
        if batch_id is None:
            await interactions.append_interactions(store, site_id, visitor_id, admitted,
                                                   cap=cap, session=session)
        else:
            await interactions.append_batch(store, site_id, visitor_id, batch_id, admitted,
                                            cap=cap, session=session)
        await visitors.touch(store, site_id, visitor_id, seen_at=now, facts=facts,
                             counts={"interactions": len(admitted)}, session=session)
        await derivation.add_fact(store, site_id, visitor_id, daily_figures.INTERACTION, [
            {name: event[name] for name in ("at", "url", "kind", "heatmap", "depth", "from")
             if name in event}
            for event in admitted
            if "heatmap" in event or event["kind"] in daily_figures.CLICK_FIELDS],
            sessionId=body.get("sessionId"), session=session)

    if not await store.write_once(write):
        intake.count("interaction", "duplicate", amount=len(admitted))
        return BatchOutcome(len(admitted), dropped, duplicate=True)
    intake.count("interaction", "stored", amount=len(admitted))
    return BatchOutcome(len(admitted), dropped)


def _event(body: dict[str, Any], item: dict[str, Any], now: datetime, url: str | None,
           at_field: str) -> dict[str, Any]:
    event: dict[str, Any] = {
        "id": new_id(),
        "kind": item["kind"],
        "at": parse_time(item.get("at"), now, field=at_field),
        "url": url or None,
        "sessionId": body.get("sessionId"),
        "recordingId": body.get("recordingId"),
    }
    event.update({name: item[name] for name in _EVENT_FIELDS if name in item})
    return event
