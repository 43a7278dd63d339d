"""The retention purge (issue 32): what of each kind is past its site's retention goes.

`PURGES` says, per kind of `documents.retention.KINDS`, what one batch does, how the oldest
item held is found, and how a shortened retention is previewed. Every batch is one transaction
that also counts what it removed (`documents.retention.count_removed`), so a purge stopped at
any point leaves exact counts and is resumed by the next run without redoing a batch.

Like erasure, files go with their chunks and the rows that point at them, and error records
are anonymised rather than deleted (privacy/erasure.py does both). Unlike erasure, nothing is
taken out of the figures: the daily figures, page figures and heatmap counts keep what purged
data added, as anonymous aggregates; a visitor's chain of days goes with the visitor (decision
"Issue 32: retention" in docs/decisions.md). Each batch that removes counted data also keeps
what that data was counted as in the figures' retained share (`derived.daily_figures.retain`), so
a rebuild of the figures adds it back to what is still stored.

A site is purged under its fold lease (derived/derivation.py), as a folder folds it: its
pending facts are folded first, a purged visitor's facts that came since are folded in the
batch that removes the visitor, and every batch renews the lease and commits only while it is
held.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from derived import daily_figures, derivation, visits
from documents import (
    activity,
    commerce,
    engagement,
    error_records,
    heatmaps,
    interactions,
    leads,
    recordings,
    requests,
    retention,
    sites,
    visitors,
)
from documents.retention import Expiry
from documents.store import Store
from privacy import erasure

#: One batch: (store, site id, cutoff, limit, session, cutoffs of every kind) -> (found, removed).
Batch = Callable[[Store, str, datetime, int, Any, dict[str, datetime]],
                 Awaitable[tuple[int, int]]]


def _delete(expiry: Expiry, extra: dict[str, Any] | None = None) -> Batch:
    async def batch(store: Store, site_id: str, before: datetime, limit: int, session: Any,
                    _cutoffs: dict[str, datetime]) -> tuple[int, int]:
        return await retention.delete_expired(store, expiry, site_id, before, limit=limit,
                                              extra=extra, session=session)
    return batch


async def _orders(store: Store, site_id: str, before: datetime, limit: int, session: Any,
                  _cutoffs: dict[str, datetime]) -> tuple[int, int]:
    return await commerce.purge_expired_orders(store, site_id, before, limit=limit,
                                               session=session)


def _trim(expiry: Expiry) -> Batch:
    async def batch(store: Store, site_id: str, before: datetime, limit: int, session: Any,
                    _cutoffs: dict[str, datetime]) -> tuple[int, int]:
        return await retention.trim_expired_buckets(store, expiry, site_id, before,
                                                    limit=limit, session=session)
    return batch


async def _recordings(store: Store, site_id: str, before: datetime, limit: int, session: Any,
                      _cutoffs: dict[str, datetime]) -> tuple[int, int]:
    return await recordings.purge_expired(store, site_id, before, limit=limit, session=session)


def _anonymise(expiry: Expiry, collection_key: str) -> Batch:
    """Anonymise expired occurrences or aggregates still naming someone, as erasure does."""
    anonymiser = erasure.ANONYMISERS[collection_key]

    async def batch(store: Store, site_id: str, before: datetime, limit: int, session: Any,
                    _cutoffs: dict[str, datetime]) -> tuple[int, int]:
        ids = await retention.expired_ids(store, expiry, site_id, before, limit=limit,
                                          extra=error_records.NAMING_SOMEONE, session=session)
        if not ids:
            return 0, 0
        return len(ids), await anonymiser(store, {"_id": {"$in": ids}}, session)
    return batch


def _recent(kind: str) -> Batch:
    """Copies of the kind's expired records in profiles' recent activity (not counted)."""
    async def batch(store: Store, site_id: str, before: datetime, limit: int, session: Any,
                    _cutoffs: dict[str, datetime]) -> tuple[int, int]:
        return await visitors.trim_recent(store, site_id, before, kind, limit=limit,
                                          session=session)
    return batch


async def _visitors(store: Store, site_id: str, before: datetime, limit: int, session: Any,
                    cutoffs: dict[str, datetime]) -> tuple[int, int]:
    ids = await visitors.expired_visitor_ids(store, site_id, before, limit=limit,
                                             session=session)
    if ids:
        # What came for them since the site's fold (a late payment, say) is counted first.
        await derivation.fold_visitors(store, site_id, ids, session=session)
        # Their records that erasure keeps go on being counted as no one's.
        counted = _StoredCount(store, site_id, ids,
                               await daily_figures.kept_when_erased(store, site_id, ids,
                                                                    session=session), session)
        before_purge = await counted.measure()
        await erasure.purge_visitors(store, site_id, tuple(ids),
                                     consent_before=cutoffs["consent"], session=session)
        await daily_figures.retain(store, before_purge, await counted.measure(), session=session)
    return len(ids), len(ids)


@dataclass(frozen=True)
class _StoredCount:
    """What some visitors' stored data, and some records that may come to name no one, add to
    the figures as a rebuild counts them: measured before and after a batch, the difference is
    what the batch removed from what a rebuild would find (`daily_figures.retain`)."""

    store: Store
    site_id: str
    visitor_ids: list[str]
    records: list[tuple[daily_figures.FigureSource, list[Any]]]
    session: Any

    async def measure(self) -> daily_figures.Tally:
        tally = (await daily_figures.count_stored(self.store, self.site_id, self.visitor_ids,
                                                  session=self.session)).tally
        for source, ids in self.records:
            await daily_figures.count_anonymous(self.store, tally, source, ids,
                                                session=self.session)
        return tally


def _retaining(step: Batch, expiry: Expiry, extra: dict[str, Any] | None = None) -> Batch:
    """`step`, keeping in the figures' retained share what the data it removes or anonymises
    was counted as, so that a rebuild adds it back (`daily_figures.retain`)."""
    source = daily_figures.SOURCE_IN.get(expiry.collection)

    async def batch(store: Store, site_id: str, before: datetime, limit: int, session: Any,
                    cutoffs: dict[str, datetime]) -> tuple[int, int]:
        taken = await retention.expired_documents(store, expiry, site_id, before, limit=limit,
                                                  projection={"visitorId": 1}, extra=extra,
                                                  session=session)
        if not taken:
            return 0, 0
        counted = _StoredCount(
            store, site_id, sorted({doc["visitorId"] for doc in taken if doc.get("visitorId")}),
            [(source, [doc["_id"] for doc in taken])] if source else [], session)
        before_step = await counted.measure()
        result = await step(store, site_id, before, limit, session, cutoffs)
        await daily_figures.retain(store, before_step, await counted.measure(), session=session)
        return result
    return batch


@dataclass(frozen=True)
class KindPurge:
    """How one kind is purged: its batches in order, and the collections that hold it."""

    batches: tuple[Batch, ...]
    #: (expiry, the items' condition) whose oldest item is "the oldest held".
    held: tuple[tuple[Expiry, dict[str, Any] | None], ...]
    #: Counts events inside buckets rather than documents.
    buckets: bool = False
    #: Documents per transaction when fewer than the batch setting: a bucket holds up to 200
    #: events, and an expired profile goes with everything of the visitor (the batch's
    #: visitors in one walk, as erasure walks one: some thirty operations whatever their
    #: number); either would make a transaction of the setting's size long enough to hold
    #: ingest up (bench/retention).
    most_per_batch: int | None = None
    #: Steps whose removals are copies of items counted elsewhere, so not counted again.
    uncounted: tuple[Batch, ...] = ()


_RECENT_RECORDINGS, _RECENT_PAGEVIEWS, _RECENT_LEADS = (
    _recent("recording"), _recent("pageview"), _recent("lead"))
#: Visits are made of pageviews (derived/visits.py): removed with them, not counted again.
_VISITS = _retaining(_delete(visits.EXPIRY), visits.EXPIRY)

PURGES: dict[str, KindPurge] = {
    "recordings": KindPurge((_recordings, _RECENT_RECORDINGS), ((recordings.EXPIRY, None),),
                            uncounted=(_RECENT_RECORDINGS,)),
    "heatmaps": KindPurge((_delete(heatmaps.EXPIRY),), ((heatmaps.EXPIRY, None),)),
    "errors": KindPurge(
        (_delete(error_records.SESSION_LINK_EXPIRY),
         _retaining(_anonymise(error_records.OCCURRENCE_EXPIRY, error_records.OCCURRENCES),
                    error_records.OCCURRENCE_EXPIRY, error_records.NAMING_SOMEONE),
         _anonymise(error_records.ERROR_EXPIRY, error_records.ERRORS)),
        ((error_records.SESSION_LINK_EXPIRY, None),
         (error_records.OCCURRENCE_EXPIRY, error_records.NAMING_SOMEONE),
         (error_records.ERROR_EXPIRY, error_records.NAMING_SOMEONE))),
    "activity": KindPurge((_retaining(_trim(activity.EXPIRY), activity.EXPIRY),
                           _retaining(_trim(interactions.EXPIRY), interactions.EXPIRY),
                           _RECENT_PAGEVIEWS, _VISITS),
                          ((activity.EXPIRY, None), (interactions.EXPIRY, None)), buckets=True,
                          most_per_batch=20, uncounted=(_RECENT_PAGEVIEWS, _VISITS)),
    "leads": KindPurge(
        (_retaining(_delete(leads.EXPIRY), leads.EXPIRY),
         _retaining(_orders, commerce.ORDER_EXPIRY),
         _delete(commerce.EVENT_EXPIRY, commerce.EVENTS_OF_NO_ORDER), _RECENT_LEADS),
        ((leads.EXPIRY, None), (commerce.ORDER_EXPIRY, None),
         (commerce.EVENT_EXPIRY, commerce.EVENTS_OF_NO_ORDER)), uncounted=(_RECENT_LEADS,)),
    "surveys": KindPurge((_delete(engagement.SURVEY_EXPIRY),),
                         ((engagement.SURVEY_EXPIRY, None),)),
    "chats": KindPurge((_delete(engagement.CHAT_EXPIRY),), ((engagement.CHAT_EXPIRY, None),)),
    "consent": KindPurge((_delete(engagement.CONSENT_EXPIRY),),
                         ((engagement.CONSENT_EXPIRY, None),)),
    "visitors": KindPurge((_visitors,), ((visitors.EXPIRY, None),), most_per_batch=20),
    "requestLog": KindPurge((_delete(requests.EXPIRY),), ((requests.EXPIRY, None),)),
}


#: Longest pause between two batches.
MAX_PAUSE_SECONDS = 1.0


async def _pause_after(started: float) -> None:
    """Rest as long as the batch begun at `started` took: the purge works at most half the
    time, which halves its share of the database."""
    await asyncio.sleep(min(MAX_PAUSE_SECONDS, time.monotonic() - started))


class LeaseLost(RuntimeError):
    """Another runner took the purge over (this one was too slow to renew its lease)."""


class PurgeFailed(RuntimeError):
    """A batch failed; `site_id` and `kind` say where (the cause is chained)."""

    def __init__(self, site_id: str, kind: str) -> None:
        super().__init__(f"the retention purge failed at kind {kind}")
        self.site_id = site_id
        self.kind = kind


@dataclass
class PurgeReport:
    """What one run removed, per kind, and the sites whose oldest item is past retention."""

    run_id: str
    removed: dict[str, int] = field(default_factory=dict)
    behind: dict[str, list[str]] = field(default_factory=dict)


async def oldest_held(store: Store, site_id: str, kind: str) -> datetime | None:
    """The oldest item of the kind the site still holds."""
    found = [moment for expiry, extra in PURGES[kind].held
             if (moment := await retention.oldest(store, expiry, site_id, extra)) is not None]
    return min(found) if found else None


async def preview(store: Store, site: dict[str, Any], days: dict[str, int], now: datetime
                  ) -> dict[str, int]:
    """How many items of each kind the retentions `days` would remove at `now`."""
    chosen = {**retention.site_days(site), **days}
    counts: dict[str, int] = {}
    for kind in retention.KINDS:
        before = retention.cutoff(now, chosen[kind.key])
        purge = PURGES[kind.key]
        total = 0
        for expiry, extra in purge.held:
            if purge.buckets:
                total += await retention.count_expired_events(store, expiry, site["_id"], before)
            else:
                total += await retention.count_expired(store, expiry, site["_id"], before, extra)
        counts[kind.key] = total
    return counts


async def purge_all(store: Store, owner: str, *, now: datetime, batch: int,
                    renew: Callable[[], Awaitable[bool]]) -> PurgeReport:
    """Run (or resume) the purge over every site; `renew` keeps the runner's lease and says
    False when it was lost. Raises PurgeFailed at the first failing batch."""
    run = await retention.open_run(store, owner, now)
    measured_from: datetime = run["now"]
    report = PurgeReport(run["_id"], {kind.key: 0 for kind in retention.KINDS})
    done = set(run.get("done", []))
    for site in await sites.all_sites(store):
        site_id = site["_id"]
        days = retention.site_days(site)
        cutoffs = {key: retention.cutoff(measured_from, value) for key, value in days.items()}
        # The site's figures are the fold's: the purge holds its lease while it works there.
        lease = await derivation.claim_when_free(store, site_id, owner)
        try:
            # What the visitors to be purged added must be in the figures before they go.
            await derivation.fold_site(store, lease)
            for kind in retention.KINDS:
                if retention.pair_key(site_id, kind.key) in done:
                    continue
                await retention.start_pair(store, run["_id"], site_id, kind.key)
                try:
                    removed = await _purge_kind(store, run["_id"], lease, kind.key, cutoffs,
                                                batch, renew)
                except LeaseLost:
                    raise
                except Exception as exc:
                    raise PurgeFailed(site_id, kind.key) from exc
                report.removed[kind.key] += removed
                held = await oldest_held(store, site_id, kind.key)
                await retention.finish_pair(store, run["_id"], site_id, kind.key,
                                            days=days[kind.key], oldest_held=held,
                                            purged_at=measured_from)
                if held is not None and held < cutoffs[kind.key]:
                    report.behind.setdefault(site_id, []).append(kind.key)
        except derivation.LeaseLost as lost:
            raise LeaseLost("the site's fold lease was taken over") from lost
        finally:
            await derivation.release(store, site_id, owner)
    await retention.complete_run(store, run["_id"], measured_from, finished_at=now)
    return report


async def _purge_kind(store: Store, run_id: str, lease: derivation.Lease, kind: str,
                      cutoffs: dict[str, datetime], limit: int,
                      renew: Callable[[], Awaitable[bool]]) -> int:
    site_id = lease.site_id
    removed_total = 0
    purge = PURGES[kind]
    limit = min(limit, purge.most_per_batch or limit)
    for step in purge.batches:
        while True:
            if not await renew():
                raise LeaseLost("the purge lease was taken over")

            counted = step not in purge.uncounted

            async def work(session: Any, step: Batch = step, counted: bool = counted
                           ) -> tuple[int, int]:
                found, removed = await step(store, site_id, cutoffs[kind], limit, session,
                                            cutoffs)
                if counted:
                    await retention.count_removed(store, run_id, site_id, kind, removed,
                                                  session=session)
                return found, removed

            started = time.monotonic()
            found, removed = await lease.transaction(store, work)
            removed_total += removed if counted else 0
            await _pause_after(started)
            # A full batch that removed nothing is one whose items all changed meanwhile:
            # they are left for the next run rather than read again and again.
            if found < limit or removed == 0:
                break
    return removed_total
