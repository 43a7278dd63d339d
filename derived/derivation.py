"""Unfolded facts and the fold that turns them into figures, off the request path.

An ingest transaction stores its raw records and, for each one that feeds a figure, inserts
one small *unfolded fact* (a document of its own, insert-only, under a fresh `_id`): two
requests of different visitors never write the same document. No figure document (`site_days`,
`page_days`, `visitor_days`, `heatmap_counts`, a recording's `marks`) is touched there.

`fold_partition` folds one site's facts: in ONE transaction it reads a batch of them in the
order they were recorded, deletes them and applies what they add to the figures, as
`derived.daily_figures.FIGURE_SOURCES` says for each kind. The deletions and the increments commit
together, so each fact is counted exactly once across crashes, retries and several folders:
two folders deleting the same fact conflict and one of them aborts and starts again. A lease
per site (`claim`, `Lease`) keeps folders apart: each batch renews it in its transaction and
checks it before committing, so a folder that stalled past its lease commits nothing. The
retention purge and a rebuild take the same lease. A fact the fold cannot apply is set aside
with its reason (`quarantine`), so it never stops the site's other facts, or other sites.

Erasure and restriction take out (or put back) only the folded share: what the visitor's
stored data adds up to, less what their pending facts will add. Erasure deletes those facts; a
fact of a restricted visitor is folded into their chain of days but not counted, as a rebuild
leaves them out. Both stay exact whether or not a folder had got to the visitor's facts
(decision "Figures are derived off the request path" in docs/decisions.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from derived import daily_figures, journeys, visits
from documents import heatmaps, recordings, sites, visitors
from documents.accounts import new_id
from documents.store import (
    ASCENDING,
    DuplicateKeyError,
    Index,
    Store,
    is_temporary_store_error,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

COLLECTION = "unfolded_facts"
LEASES = "derivation_leases"
#: Facts folded per transaction: enough to make a fold cheap per fact, few enough that one
#: transaction stays small and short.
FOLD_BATCH = 200
#: How long a folder holds a site; a folder that died is followed after this.
LEASE = timedelta(seconds=60)
#: How often a rebuild or a purge tries again to take a site that a folder holds.
_CLAIM_PAUSE_SECONDS = 0.2
#: A fact the fold could not apply carries this field, with its reason, and is left out of
#: every later fold (`quarantine`); an operator puts it back with `requeue_quarantined`.
QUARANTINED = "quarantined"
#: What the fold reads: the facts not set aside, in the order they were recorded.
_FOLDABLE = {QUARANTINED: None}
_IN_ORDER = [("recordedAt", ASCENDING), ("_id", ASCENDING)]

INDEXES = [
    # A site's facts in the order they were recorded (the fold's read and the site's lag).
    Index(COLLECTION, (("siteId", ASCENDING), ("recordedAt", ASCENDING), ("_id", ASCENDING))),
    # A visitor's pending facts (erasure, restriction, export).
    Index(COLLECTION, (("siteId", ASCENDING), ("visitorId", ASCENDING))),
    # The oldest fact of all, for the lag in /metrics.
    Index(COLLECTION, (("recordedAt", ASCENDING),)),
    # The facts set aside, for /metrics and the operator (sparse: there are seldom any).
    Index(COLLECTION, ((f"{QUARANTINED}.at", ASCENDING),),
          partial_filter={QUARANTINED: {"$exists": True}}),
]


class FoldRaced(RuntimeError):
    """Another folder deleted some of this batch's facts first (the embedded store's form of
    a write conflict); the batch is undone and read again."""


async def add_fact(store: Store, site_id: str, visitor_id: str | None, kind: str,
                   records: Iterable[dict[str, Any]], *, session: Any,
                   **details: Any) -> None:
    """Record, inside the ingest transaction, that these stored records are still to be
    counted. `kind` names their row of `daily_figures.FIGURE_SOURCES`; `details` are what the fold
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
    tally = daily_figures.Tally(site_id, await sites.site_clock(store, site_id,
                                                                       session=session))
    # A restricted visitor's records are not counted in the daily figures while it holds (they
    # are when it is lifted, from the stored data), but their days are chained, as a rebuild
    # chains them.
    held = await visitors.restricted_among(
        store, site_id, sorted({f["visitorId"] for f in facts if f.get("visitorId")}),
        session=session)
    shares: list[dict[str, Any]] = []
    for fact in facts:
        source = daily_figures.SOURCES[fact["kind"]]
        who = fact.get("visitorId")
        counted = tally if who not in held else daily_figures.Tally(site_id, tally.clock)
        marks = []
        for record in fact["records"]:
            source.count(counted, who, record)
            if source.chains_days and who:
                await daily_figures.chain_day(store, counted, site_id, who, record["at"],
                                              country=fact.get("country"),
                                              device=fact.get("device"), session=session)
                await daily_figures.chain_visit(store, counted, site_id, who, record,
                                                country=fact.get("country"),
                                                device=fact.get("device"), session=session)
            if source.chains_error_days and who:
                await daily_figures.chain_error_day(store, counted, site_id, who, record,
                                                    session=session)
            if source.journey is not None and who:
                await _join_journey(store, counted, source, fact, record, session=session)
            if source.heatmap and record.get("heatmap"):
                shares.append(record["heatmap"])
            mark = source.mark(record)
            if mark is not None:
                marks.append((mark, record["at"]))
        await recordings.add_marks(store, site_id, who, fact.get("sessionId"), marks,
                                   session=session)
    await heatmaps.add_to_aggregates(store, site_id, shares, session=session)
    await tally.write(store, session=session)
    paid = next((record["currency"] for fact in facts if fact["kind"] == daily_figures.ORDER
                 and fact.get("visitorId") not in held for record in fact["records"]
                 if record.get("orders", 0) > 0), None)
    if paid is not None:
        # The reporting currency until the owner chooses one, kept on the site once known.
        await sites.keep_first_currency(store, site_id, paid, session=session)


async def _join_journey(store: Store, tally: daily_figures.Tally,
                        source: daily_figures.FigureSource, fact: dict[str, Any],
                        record: dict[str, Any], *, session: Any) -> None:
    """Put a record into its session's journey (derived/journeys.py) and count the
    difference it makes to the daily outcome counts."""
    assert source.journey is not None
    session_id = record.get("sessionId") or fact.get("sessionId")
    if not session_id and not source.joins_without_session:
        return
    if source.journey(journeys.empty(), record, fact) is None:
        return  # a click that is no rage or dead click, say: no visit to look up
    site_id, who = fact["siteId"], fact["visitorId"]
    visit = await visits.journey_visit(store, site_id, who, session_id, record["at"],
                                       clock=tally.clock, session=session)
    if visit is None:
        return
    changed = source.journey(journeys.of(visit), record, fact)
    if changed is None:
        return
    after = {**visit, "journey": changed}
    await visits.save_visit(store, after, session=session)
    tally.visit(visit, -1)
    tally.visit(after)


async def fold_partition(store: Store, site_id: str, *, batch: int = FOLD_BATCH,
                         lease: Lease | None = None) -> int:
    """Fold the site's oldest `batch` facts in one transaction; returns how many (0 when there
    were none, or when another folder took them first).

    Under a `lease` the transaction renews it first and checks it last, so a batch commits only
    while its folder holds the site (LeaseLost otherwise, with nothing of the batch kept)."""

    async def work(session: Any) -> int:
        facts = await store.collection(COLLECTION).find(
            {"siteId": site_id, **_FOLDABLE}, session=session,
        ).sort(_IN_ORDER).limit(batch).to_list(None)
        if facts:
            await _fold(store, site_id, facts, session=session)
        return len(facts)

    try:
        if lease is None:
            return await store.transaction(work)
        return await lease.transaction(store, work)
    except FoldRaced:
        return 0


async def fold_visitors(store: Store, site_id: str, visitor_ids: Iterable[str], *,
                        session: Any) -> int:
    """Fold the visitors' pending facts in the caller's transaction (the retention purge, before
    it removes them: what they add stays in the figures); returns how many."""
    facts = await store.collection(COLLECTION).find(
        {"siteId": site_id, "visitorId": {"$in": list(visitor_ids)}, **_FOLDABLE},
        session=session).sort(_IN_ORDER).to_list(None)
    if facts:
        await _fold(store, site_id, facts, session=session)
    return len(facts)


async def _unfolded_share(store: Store, site_id: str, visitor_id: str, *, session: Any
                          ) -> tuple[daily_figures.Tally, list[dict[str, Any]]]:
    """What the visitor's pending facts will add: to the daily figures, and heatmap shares."""
    unfolded = daily_figures.Tally(site_id, await sites.site_clock(store, site_id,
                                                                           session=session))
    shares: list[dict[str, Any]] = []
    async for fact in store.collection(COLLECTION).find(
            {"siteId": site_id, "visitorId": visitor_id}, session=session):
        source = daily_figures.SOURCES[fact["kind"]]
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
        share = await daily_figures.visitor_share(store, site_id, visitor_id, session=session)
        share.leave_out(unfolded)
        await share.write(store, sign=-1, session=session)
    kept = await daily_figures.anonymised_share(store, site_id, visitor_id, session=session)
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
    share = await daily_figures.visitor_share(store, site_id, visitor_id, session=session)
    share.leave_out(unfolded)
    await share.write(store, sign=-1 if restricted else 1, session=session)


# Leases ---------------------------------------------------------------------------------------


class LeaseLost(RuntimeError):
    """The folder no longer holds the site: its lease ran out and another folder took it."""


@dataclass(frozen=True)
class Lease:
    """A folder's hold on one site's figures (the fold, the purge's fold, a rebuild)."""

    site_id: str
    owner: str
    length: timedelta = LEASE

    async def transaction(self, store: Store, work: Callable[[Any], Awaitable[T]]) -> T:
        """Run `work(session)` in a transaction that renews the lease first and checks it
        last: the renewal is a write to the lease, so on a replica set a claim by another
        folder meanwhile conflicts with it, and a batch that outlived its lease is not
        committed (LeaseLost)."""

        async def held(session: Any) -> T:
            await self._renew(store, session)
            result = await work(session)
            await self._check(store, session)
            return result

        return await store.transaction(held)

    async def _renew(self, store: Store, session: Any) -> None:
        now = datetime.now(UTC)
        renewed = await store.collection(LEASES).update_one(
            {"_id": self.site_id, "owner": self.owner, "leaseUntil": {"$gte": now}},
            {"$set": {"leaseUntil": now + self.length}}, session=session)
        if renewed.matched_count == 0:
            raise LeaseLost(f"the lease on site {self.site_id} was lost")

    async def _check(self, store: Store, session: Any) -> None:
        held = await store.collection(LEASES).find_one(
            {"_id": self.site_id, "owner": self.owner,
             "leaseUntil": {"$gte": datetime.now(UTC)}}, {"_id": 1}, session=session)
        if held is None:
            raise LeaseLost(f"the lease on site {self.site_id} ran out during a batch")


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


async def claim_when_free(store: Store, site_id: str, owner: str, *,
                          lease: timedelta = LEASE) -> Lease:
    """Take the site, waiting while another folder holds it (a folder holds a site for one
    pass, and one that died for its lease)."""
    for _ in itertools.count():
        if await claim(store, site_id, owner, now=datetime.now(UTC), lease=lease):
            break
        await asyncio.sleep(_CLAIM_PAUSE_SECONDS)
    return Lease(site_id, owner, lease)


async def release(store: Store, site_id: str, owner: str) -> None:
    """Give the site back, unless the lease ran out and another folder took it."""
    # A second in the past: stores keep milliseconds, and a claim within the same millisecond
    # must find the lease run out.
    await store.collection(LEASES).update_one(
        {"_id": site_id, "owner": owner},
        {"$set": {"leaseUntil": datetime.now(UTC) - timedelta(seconds=1)}})


# Facts that cannot be applied -------------------------------------------------------------------


def _reason(exc: BaseException) -> str:
    """Why a fact could not be folded, in words that hold no visitor data: the error's type and
    the store's code, never its message (which may quote a document)."""
    code = getattr(exc, "code", None)
    return type(exc).__name__ + (f" (code {code})" if code is not None else "")


async def quarantine(store: Store, lease: Lease, fact_id: Any, reason: str) -> bool:
    """Set the fact aside with its reason, under the lease; False when it was gone already."""

    async def work(session: Any) -> bool:
        marked = await store.collection(COLLECTION).update_one(
            {"_id": fact_id, "siteId": lease.site_id, **_FOLDABLE},
            {"$set": {QUARANTINED: {"reason": reason, "at": datetime.now(UTC)}}},
            session=session)
        return bool(marked.modified_count)

    return await lease.transaction(store, work)


async def quarantined_count(store: Store) -> int:
    """Facts set aside, of every site (the gauge in /metrics)."""
    return await store.collection(COLLECTION).count_documents({QUARANTINED: {"$exists": True}})


async def quarantined_facts(store: Store, site_id: str | None = None, *, limit: int = 100
                            ) -> list[dict[str, Any]]:
    """What an operator sees of the facts set aside: site, kind, when and why, no records."""
    query: dict[str, Any] = {QUARANTINED: {"$exists": True}}
    if site_id is not None:
        query["siteId"] = site_id
    cursor = store.collection(COLLECTION).find(
        query, {"siteId": 1, "kind": 1, "recordedAt": 1, QUARANTINED: 1},
    ).sort(f"{QUARANTINED}.at", ASCENDING).limit(limit)
    return [doc async for doc in cursor]


async def requeue_quarantined(store: Store, site_id: str) -> int:
    """Put the site's facts set aside back in line (once what stopped them is fixed)."""
    requeued = await store.collection(COLLECTION).update_many(
        {"siteId": site_id, QUARANTINED: {"$exists": True}}, {"$unset": {QUARANTINED: ""}})
    return requeued.modified_count


@dataclass
class SiteFold:
    """What one folder did on one site."""

    folded: int = 0
    quarantined: list[str] = field(default_factory=list)


async def fold_site(store: Store, lease: Lease, *, batch: int = FOLD_BATCH) -> SiteFold:
    """Fold every pending fact of the lease's site, batch after batch, each batch renewing
    the lease (LeaseLost when it was lost). A batch that fails for a reason of its own is
    folded again fact by fact, and a fact that fails alone is set aside (`quarantine`) so
    that the rest, and every other site, go on being folded."""
    done = SiteFold()
    singles = 0  # facts still to fold one at a time, after a batch failed
    while True:
        try:
            folded = await fold_partition(store, lease.site_id, batch=1 if singles else batch,
                                          lease=lease)
        except LeaseLost:
            raise
        except Exception as exc:
            if is_temporary_store_error(exc):
                raise  # the store, not the facts: the next pass tries again
            if not singles:
                singles = batch  # find the fact that fails
                continue
            singles -= 1
            failed = await _oldest_foldable(store, lease.site_id)
            if failed is not None and await quarantine(store, lease, failed, _reason(exc)):
                done.quarantined.append(_reason(exc))
                log.warning("a fact was set aside: it cannot be folded",
                            extra={"site": lease.site_id, "reason": _reason(exc)})
            continue
        done.folded += folded
        if singles and folded:
            singles -= 1
        elif folded < batch:
            break
    await recordings.apply_marks(store, lease.site_id)
    return done


async def _oldest_foldable(store: Store, site_id: str) -> Any:
    cursor = store.collection(COLLECTION).find(
        {"siteId": site_id, **_FOLDABLE}, {"_id": 1},
    ).sort(_IN_ORDER).limit(1)
    found = [doc["_id"] async for doc in cursor]
    return found[0] if found else None


@dataclass(frozen=True)
class FoldPass:
    """What one pass over every site did."""

    folded: int
    skipped_sites: int
    #: Sites whose fold failed or lost its lease this pass (tried again next pass).
    failed_sites: int = 0
    #: Facts set aside this pass, by reason.
    quarantined: tuple[str, ...] = ()


async def fold_all(store: Store, owner: str | None = None, *, batch: int = FOLD_BATCH,
                   now: datetime | None = None, lease_length: timedelta = LEASE) -> FoldPass:
    """Fold every site with pending facts that this folder can lease, until none is left.
    A site whose fold fails is logged and left for the next pass; the others go on."""
    owner = owner or new_id()
    folded = skipped = failed = 0
    quarantined: list[str] = []
    sites = set(await store.collection(COLLECTION).distinct("siteId", _FOLDABLE))
    # A folder that stopped between a fold and its marks left them pending.
    sites.update(await recordings.sites_with_pending_marks(store))
    for site_id in sorted(sites):
        if not await claim(store, site_id, owner, now=now or datetime.now(UTC),
                           lease=lease_length):
            skipped += 1
            continue
        try:
            done = await fold_site(store, Lease(site_id, owner, lease_length), batch=batch)
            folded += done.folded
            quarantined.extend(done.quarantined)
        except Exception as exc:  # noqa: BLE001 - one site's failure must not stop the others
            failed += 1
            log.warning("folding a site failed; it is tried again next pass",
                        extra={"site": site_id, "reason": _reason(exc)})
        # A lease that cannot be given back runs out by itself.
        with contextlib.suppress(Exception):
            await release(store, site_id, owner)
    return FoldPass(folded, skipped, failed, tuple(quarantined))


# Lag --------------------------------------------------------------------------------------------


async def oldest_unfolded(store: Store, site_id: str | None = None) -> datetime | None:
    """When the oldest fact not yet folded was recorded (of one site, or of all)."""
    query = {"siteId": site_id, **_FOLDABLE} if site_id is not None else dict(_FOLDABLE)
    cursor = store.collection(COLLECTION).find(query, {"recordedAt": 1}).sort(
        "recordedAt", ASCENDING).limit(1)
    found = [doc async for doc in cursor]
    return found[0]["recordedAt"] if found else None




#: How long a rebuild holds a site: it reads all of the site's stored data.
REBUILD_LEASE = timedelta(minutes=30)


async def rebuild_site(store: Store, site_id: str, owner: str | None = None) -> None:
    """Rebuild the site's figures under its fold lease: no folder, old or new, folds the site
    meanwhile; what is pending is folded first, since a fact left pending would be counted
    twice (once by the rebuild, from the stored data, and once when folded)."""
    owner = owner or new_id()
    await claim_when_free(store, site_id, owner, lease=REBUILD_LEASE)
    try:
        await fold_site(store, Lease(site_id, owner, REBUILD_LEASE))
        await daily_figures.rebuild_site(store, site_id)
    finally:
        await release(store, site_id, owner)


async def rebuild_all_sites(store: Store) -> None:
    """Rebuild every site's figures, one site at a time under its lease (the migrations that
    introduced the figures; a process still running older code folds under the same leases)."""
    owner = new_id()
    for site_id in await sites.site_ids(store):
        await rebuild_site(store, site_id, owner)
