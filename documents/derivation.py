"""Unfolded facts and the fold that turns them into figures, off the request path.

An ingest transaction stores its raw records and, for each one that feeds a figure, inserts
one small *unfolded fact* (a document of its own, insert-only, under a fresh `_id`): two
requests of different visitors never write the same document. No figure document (`site_days`,
`page_days`, `visitor_days`, `heatmap_counts`, a recording's `marks`) is touched there.

`fold_partition` folds one site's facts: in ONE transaction it reads a batch of them in the
order they were recorded, deletes them and applies what they add to the figures, as
`documents.rollups.FIGURE_SOURCES` says for each kind. The deletions and the increments commit
together, so each fact is counted exactly once across crashes, retries and several folders:
two folders deleting the same fact conflict and one of them aborts and starts again. A lease
per site (`claim`) keeps folders from doing the same work twice in the first place.

Erasure and restriction take out (or put back) only the folded share: what the visitor's
stored data adds up to, less what their pending facts will add. Erasure deletes those facts; a
fact of a restricted visitor is folded into their chain of days but not counted, as a rebuild
leaves them out. Both stay exact whether or not a folder had got to the visitor's facts
(decision "Figures are derived off the request path" in docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from documents import heatmaps, recordings, rollups, visitors
from documents.accounts import new_id
from documents.store import ASCENDING, DuplicateKeyError, Index, Store

COLLECTION = "unfolded_facts"
LEASES = "derivation_leases"
#: Facts folded per transaction: enough to make a fold cheap per fact, few enough that one
#: transaction stays small and short.
FOLD_BATCH = 200
#: How long a folder holds a site; a folder that died is followed after this.
LEASE = timedelta(seconds=60)

INDEXES = [
    # A site's facts in the order they were recorded (the fold's read and the site's lag).
    Index(COLLECTION, (("siteId", ASCENDING), ("recordedAt", ASCENDING), ("_id", ASCENDING))),
    # A visitor's pending facts (erasure, restriction, export).
    Index(COLLECTION, (("siteId", ASCENDING), ("visitorId", ASCENDING))),
    # The oldest fact of all, for the lag in /metrics.
    Index(COLLECTION, (("recordedAt", ASCENDING),)),
]


class FoldRaced(RuntimeError):
    """Another folder deleted some of this batch's facts first (the embedded store's form of
    a write conflict); the batch is undone and read again."""


async def add_fact(store: Store, site_id: str, visitor_id: str | None, kind: str,
                   records: Iterable[dict[str, Any]], *, session: Any,
                   **details: Any) -> None:
    """Record, inside the ingest transaction, that these stored records are still to be
    counted. `kind` names their row of `rollups.FIGURE_SOURCES`; `details` are what the fold
    needs beyond the records (the visitor's country and device, the session)."""
    listed = list(records)
    if not listed:
        return
    await store.collection(COLLECTION).insert_one({
        "_id": new_id(), "siteId": site_id, "visitorId": visitor_id, "kind": kind,
        "recordedAt": datetime.now(UTC), "records": listed, **details}, session=session)


async def _fold(store: Store, site_id: str, facts: list[dict[str, Any]], *,
                session: Any) -> None:
    """Delete the facts and add what they count, in the caller's transaction."""
    ids = [fact["_id"] for fact in facts]
    deleted = await store.collection(COLLECTION).delete_many(
        {"_id": {"$in": ids}}, session=session)
    if deleted.deleted_count != len(ids):
        raise FoldRaced(f"{len(ids) - deleted.deleted_count} facts were folded elsewhere")
    tally = rollups.Tally(site_id)
    # A restricted visitor's records are not counted in the daily figures while it holds (they
    # are when it is lifted, from the stored data), but their days are chained, as a rebuild
    # chains them.
    held = await visitors.restricted_among(
        store, site_id, sorted({f["visitorId"] for f in facts if f.get("visitorId")}),
        session=session)
    shares: list[dict[str, Any]] = []
    for fact in facts:
        source = rollups.SOURCES[fact["kind"]]
        who = fact.get("visitorId")
        counted = tally if who not in held else rollups.Tally(site_id)
        marks = []
        for record in fact["records"]:
            source.count(counted, who, record)
            if source.chains_days and who:
                await rollups.chain_day(store, counted, site_id, who, record["at"],
                                        country=fact.get("country"),
                                        device=fact.get("device"), session=session)
                await rollups.chain_visit(store, counted, site_id, who, record,
                                          country=fact.get("country"),
                                          device=fact.get("device"), session=session)
            if source.heatmap and record.get("heatmap"):
                shares.append(record["heatmap"])
            mark = source.mark(record)
            if mark is not None:
                marks.append((mark, record["at"]))
        await recordings.add_marks(store, site_id, who, fact.get("sessionId"), marks,
                                   session=session)
    await heatmaps.add_to_aggregates(store, site_id, shares, session=session)
    await tally.write(store, session=session)


async def fold_partition(store: Store, site_id: str, *, batch: int = FOLD_BATCH) -> int:
    """Fold the site's oldest `batch` facts in one transaction; returns how many (0 when there
    were none, or when another folder took them first)."""

    async def work(session: Any) -> int:
        facts = await store.collection(COLLECTION).find(
            {"siteId": site_id}, session=session,
        ).sort([("recordedAt", ASCENDING), ("_id", ASCENDING)]).limit(batch).to_list(None)
        if facts:
            await _fold(store, site_id, facts, session=session)
        return len(facts)

    try:
        return await store.transaction(work)
    except FoldRaced:
        return 0


async def _unfolded_share(store: Store, site_id: str, visitor_id: str, *, session: Any
                          ) -> tuple[rollups.Tally, list[dict[str, Any]]]:
    """What the visitor's pending facts will add: to the daily figures, and heatmap shares."""
    unfolded = rollups.Tally(site_id)
    shares: list[dict[str, Any]] = []
    async for fact in store.collection(COLLECTION).find(
            {"siteId": site_id, "visitorId": visitor_id}, session=session):
        source = rollups.SOURCES[fact["kind"]]
        for record in fact["records"]:
            source.count(unfolded, visitor_id, record)
            if source.heatmap and record.get("heatmap"):
                shares.append(record["heatmap"])
    return unfolded, shares


async def take_out_visitor(store: Store, site_id: str, visitor_id: str, *, restricted: bool,
                           session: Any) -> None:
    """Take the visitor's folded share out of every figure (erasure), in the caller's
    transaction: what their stored data adds up to, less what their pending facts, deleted
    with the rest of their data, would have added. A restricted visitor's daily figures are
    out already.

    What erasure keeps anonymised (error occurrences) is then counted again, all of it, as
    anyone's, as a rebuild counts it once it names no visitor: its folded share came out with
    the rest (or with a restriction), its pending facts go with the rest.
    """
    unfolded, shares = await _unfolded_share(store, site_id, visitor_id, session=session)
    await heatmaps.subtract_visitor(store, site_id, visitor_id, unfolded=shares,
                                    session=session)
    if not restricted:
        share = await rollups.visitor_share(store, site_id, visitor_id, session=session)
        share.leave_out(unfolded)
        await share.write(store, sign=-1, session=session)
    kept = await rollups.anonymised_share(store, site_id, visitor_id, session=session)
    await kept.write(store, session=session)


async def restriction_switched(store: Store, site_id: str, visitor_id: str, *,
                               restricted: bool, session: Any) -> None:
    """A restricted visitor's data is not processed (Art. 18): the folded share of the daily
    figures is taken out while the restriction holds and put back when it is lifted; a pending
    fact is folded by the rule in force when it is folded."""
    unfolded, _ = await _unfolded_share(store, site_id, visitor_id, session=session)
    # Writing the pending facts makes a fold that read them before this switch conflict with
    # it and run again, so it cannot count them by the rule this switch replaces.
    await store.collection(COLLECTION).update_many(
        {"siteId": site_id, "visitorId": visitor_id},
        {"$set": {"restrictionSwitchedAt": datetime.now(UTC)}}, session=session)
    share = await rollups.visitor_share(store, site_id, visitor_id, session=session)
    share.leave_out(unfolded)
    await share.write(store, sign=-1 if restricted else 1, session=session)


# Leases ---------------------------------------------------------------------------------------


async def claim(store: Store, site_id: str, owner: str, *, now: datetime,
                lease: timedelta = LEASE) -> bool:
    """Take the site for `owner` unless another folder holds it; True when taken."""
    try:
        await store.collection(LEASES).update_one(
            {"_id": site_id, "$or": [{"leaseUntil": {"$lt": now}}, {"owner": owner}]},
            {"$set": {"leaseUntil": now + lease, "owner": owner}}, upsert=True)
    except DuplicateKeyError:
        return False  # held by a live folder
    return True


async def release(store: Store, site_id: str, owner: str) -> None:
    """Give the site back, unless the lease ran out and another folder took it."""
    # A second in the past: stores keep milliseconds, and a claim within the same millisecond
    # must find the lease run out.
    await store.collection(LEASES).update_one(
        {"_id": site_id, "owner": owner},
        {"$set": {"leaseUntil": datetime.now(UTC) - timedelta(seconds=1)}})


@dataclass(frozen=True)
class FoldPass:
    """What one pass over every site did."""

    folded: int
    skipped_sites: int


async def fold_all(store: Store, owner: str | None = None, *, batch: int = FOLD_BATCH,
                   now: datetime | None = None) -> FoldPass:
    """Fold every site with pending facts that this folder can lease, until none is left."""
    owner = owner or new_id()
    folded = skipped = 0
    sites = set(await store.collection(COLLECTION).distinct("siteId"))
    # A folder that stopped between a fold and its marks left them pending.
    sites.update(await recordings.sites_with_pending_marks(store))
    for site_id in sorted(sites):
        if not await claim(store, site_id, owner, now=now or datetime.now(UTC)):
            skipped += 1
            continue
        try:
            while (done := await fold_partition(store, site_id, batch=batch)) > 0:
                folded += done
                if done < batch:
                    break
            await recordings.apply_marks(store, site_id)
        finally:
            await release(store, site_id, owner)
    return FoldPass(folded, skipped)


# Lag --------------------------------------------------------------------------------------------


async def oldest_unfolded(store: Store, site_id: str | None = None) -> datetime | None:
    """When the oldest fact not yet folded was recorded (of one site, or of all)."""
    query = {"siteId": site_id} if site_id is not None else {}
    cursor = store.collection(COLLECTION).find(query, {"recordedAt": 1}).sort(
        "recordedAt", ASCENDING).limit(1)
    found = [doc async for doc in cursor]
    return found[0]["recordedAt"] if found else None




async def rebuild_all_sites(store: Store) -> None:
    """Fold what is pending, then rebuild every site's daily figures from its stored data (the
    migration that introduced them): a fact left pending would be counted twice."""
    await fold_all(store)
    await rollups.rebuild_all_sites(store)
