"""The retention purge: each kind goes once past its retention, nothing younger is touched, a
purged visitor leaves only anonymous aggregates, and a stopped run resumes without redoing work.

Two visitors (Ada and Bob) are seeded through the real endpoints with one of everything
(tests/support/visitor_data.py): per visitor two pageviews, two interactions, one recording
with one footage segment plus one legacy recording from 2024, one heatmap image, one lead, one
consent decision, one survey answer, two chat transcripts, one error occurrence with its
session link; and one error aggregate both hit. The purge is then run with an injected clock.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from derived import daily_figures, derivation
from documents import retention
from tests.retention.conftest import RecordingAlerts, Seeded, make_purger
from tests.support.app import all_documents_text
from tests.support.faulty_store import FaultPlan, FaultyStore

NOTHING = {kind.key: 0 for kind in retention.KINDS}


async def _count(store: Any, collection: str, query: dict[str, Any] | None = None) -> int:
    return await store.collection(collection).count_documents(query or {})


async def _events(store: Any, collection: str) -> int:
    return sum([len(bucket["events"]) async for bucket in store.collection(collection).find({})])


async def _held(store: Any) -> dict[str, int]:
    """What the store holds of each kind, counted the way the purge counts removals."""
    return {
        "recordings": await _count(store, "recordings"),
        "segments": await _count(store, "segments.files"),
        "segmentChunks": await _count(store, "segments.chunks"),
        "heatmapImages": await _count(store, "heatmaps.files"),
        "heatmapChunks": await _count(store, "heatmaps.chunks"),
        "errorLinks": await _count(store, "error_sessions"),
        "occurrencesNamingSomeone": await _count(
            store, "error_occurrences", {"visitorId": {"$ne": None}}),
        "occurrences": await _count(store, "error_occurrences"),
        "errorRecords": await _count(store, "errors"),
        "pageviews": await _events(store, "pageview_buckets"),
        "interactions": await _events(store, "interaction_buckets"),
        "leads": await _count(store, "leads"),
        "surveys": await _count(store, "survey_responses"),
        "chats": await _count(store, "chat_transcripts"),
        "consents": await _count(store, "consent_decisions"),
        "profiles": await _count(store, "visitors"),
        "activeDays": await _count(store, "visitor_days"),
    }


async def _recent_kinds(store: Any) -> dict[str, int]:
    kinds: dict[str, int] = {}
    async for profile in store.collection("visitors").find({}, {"recent": 1}):
        for entry in profile.get("recent") or []:
            kinds[entry["kind"]] = kinds.get(entry["kind"], 0) + 1
    return kinds


async def test_each_kind_goes_once_past_its_retention_and_nothing_younger_is_touched(
        seeded: Seeded, deps):
    store = deps.store
    purger = make_purger(store)
    await derivation.fold_all(store)
    held = await _held(store)
    assert await _recent_kinds(store) == {"pageview": 4, "lead": 2, "recording": 2}
    assert held == {
        "recordings": 4, "segments": 2, "segmentChunks": 2, "heatmapImages": 2,
        "heatmapChunks": 2, "errorLinks": 2, "occurrencesNamingSomeone": 2, "occurrences": 2,
        "errorRecords": 1, "pageviews": 4, "interactions": 4, "leads": 2, "surveys": 2,
        "chats": 4, "consents": 2, "profiles": 2, "activeDays": 2}

    async def run(days: float, removed: dict[str, int], changes: dict[str, int]) -> None:
        report = await purger.purge(seeded.at + timedelta(days=days))
        assert report is not None
        assert report.removed == {**NOTHING, **removed}, days
        held.update(changes)
        assert await _held(store) == held, days

    # A month on, only the two legacy recordings of 2024 are past 90 days.
    await run(30, {"recordings": 2}, {"recordings": 2})
    # A day short of 90, the recordings and images stay; nothing more goes.
    await run(89, {}, {})
    # Past 90 days: recordings with their footage files and chunks, images with theirs, and the
    # errors' links (deleted), occurrences and the aggregate (anonymised, kept).
    await run(91, {"recordings": 2, "heatmaps": 2, "errors": 2 + 2 + 1}, {
        "recordings": 0, "segments": 0, "segmentChunks": 0, "heatmapImages": 0,
        "heatmapChunks": 0, "errorLinks": 0, "occurrencesNamingSomeone": 0})
    # The profiles' recent activity no longer lists the recordings; the pageviews stay.
    assert await _recent_kinds(store) == {"pageview": 4, "lead": 2}
    # A second run at the same time finds nothing left to do.
    await run(91, {}, {})
    # Past a year: survey answers and chat transcripts.
    await run(366, {"surveys": 2, "chats": 4}, {"surveys": 0, "chats": 0})
    # Past 25 months: pageviews and interactions; the profiles, not seen since, go with their
    # leads and chains of days; their consent decisions stay as proof.
    await run(762, {"activity": 4 + 4, "visitors": 2}, {
        "pageviews": 0, "interactions": 0, "profiles": 0, "leads": 0, "activeDays": 0})
    # Past five years: the consent decisions.
    await run(1827, {"consent": 2}, {"consents": 0})


async def test_a_purged_visitor_leaves_no_trace_but_anonymous_aggregates(seeded: Seeded, deps,
                                                                      tenant):
    store = deps.store
    await derivation.fold_all(store)
    figures = await _figures_as_read(store)
    assert all(figures.values())

    assert await make_purger(store).purge(seeded.at + timedelta(days=1900)) is not None

    text = await all_documents_text(store)
    for visitor in (seeded.ada, seeded.bob):
        for value in (visitor.visitor_id, visitor.session_id, visitor.email,
                      visitor.recording_id, visitor.legacy_path):
            assert value not in text, value
    for value in ("Ada Lovelace", "Bob Builder", "+44 20 7946 0000", "Where is my parcel?"):
        assert value not in text, value
    for name in ("segments.files", "segments.chunks", "heatmaps.files", "heatmaps.chunks",
                 "visitors", "visitor_days", "recordings", "pageview_buckets",
                 "interaction_buckets", "leads", "consent_decisions"):
        assert await _count(store, name) == 0, name
    # The figures are what they were: purged data is not taken out of them.
    assert await _figures_as_read(store) == figures
    # A rebuild finds none of the purged data, and adds back what the purge kept of it.
    await derivation.rebuild_site(store, tenant.site_id)
    assert await _figures_as_read(store) == figures
    # The error stays in the Errors list with both occurrences, naming no one.
    error = await store.collection("errors").find_one({"message": "cart is undefined"})
    assert error["occurrenceCount"] == 2
    assert (error["visitorId"], error["sessionId"], error["wpUserId"]) == (None, None, None)
    assert await _count(store, "error_occurrences", {"visitorId": None}) == 2


async def test_consent_decisions_outlive_an_expired_profile_for_the_legal_period(
        seeded: Seeded, deps):
    store = deps.store
    await make_purger(store).purge(seeded.at + timedelta(days=800))
    assert await _count(store, "visitors") == 0
    kept = await store.collection("consent_decisions").find({}).to_list(None)
    assert sorted(d["visitorId"] for d in kept) == ["ada-1", "bob-2"]


async def test_a_shorter_retention_applies_at_the_next_run(seeded: Seeded, deps, tenant):
    store = deps.store
    await store.collection("sites").update_one(
        {"_id": tenant.site_id},
        {"$set": {"settings.retentionDays": {"activity": 30, "leads": 30}}})
    report = await make_purger(store).purge(seeded.at + timedelta(days=31))
    assert report is not None
    assert report.removed == {**NOTHING, "recordings": 2, "activity": 8, "leads": 2}
    assert await _count(store, "visitors") == 2  # profiles keep their 25 months


async def test_a_runner_stopped_mid_batch_resumes_without_double_work(seeded: Seeded, deps):
    plan = FaultPlan()
    faulty = FaultyStore(deps.store, plan)
    # Batches of one; the second occurrence's anonymisation fails, inside its batch.
    plan.fail("error_occurrences", "update_many", skip=1)
    stopped = make_purger(faulty, batch=1)
    now = seeded.at + timedelta(days=91)
    try:
        await stopped.purge(now)
    except Exception as exc:  # noqa: BLE001 - the failure is the point
        failure = exc
    assert type(failure).__name__ == "PurgeFailed"
    (run,) = await deps.store.collection("retention_runs").find({}).to_list(None)
    assert run["completedAt"] is None
    # Recordings and images were done; of the errors, both links and one occurrence.
    assert run["removed"] == {"recordings": 4, "heatmaps": 2, "errors": 3}
    assert await _count(deps.store, "error_occurrences", {"visitorId": {"$ne": None}}) == 1

    plan.clear()
    plan.record_calls = True
    resumed = await make_purger(faulty, batch=1).purge(now + timedelta(days=1))
    assert resumed is not None and resumed.run_id == run["_id"]
    # The finished kinds were not visited again, nor a link deleted twice.
    touched = {collection for collection, operation in plan.calls
               if operation.startswith("delete") or operation.startswith("update")}
    assert not touched & {"recordings", "segments.files", "segments.chunks", "heatmaps.files",
                          "heatmaps.chunks", "error_sessions"}
    assert resumed.removed == {**NOTHING, "errors": 2}
    (run,) = await deps.store.collection("retention_runs").find({}).to_list(None)
    assert run["completedAt"] is not None
    assert run["removed"] == {"recordings": 4, "heatmaps": 2, "errors": 5}
    assert await _count(deps.store, "error_occurrences", {"visitorId": {"$ne": None}}) == 0


async def _figures_as_read(store: Any) -> dict[str, list[dict[str, Any]]]:
    """Every figure document as a reader sums it: without the share kept of purged data (which
    only a rebuild reads) and without counts at 0 (an erased visitor's leave a 0), and so
    without a document left with nothing else."""
    keys = {"siteId", "day", "slot", "page", "dimension", "value"}

    def counted(doc: dict[str, Any]) -> dict[str, Any]:
        kept = {}
        for name, value in doc.items():
            if isinstance(value, dict):
                value = {key: count for key, count in value.items() if count != 0}
            if name in keys or value not in (0, {}):
                kept[name] = value
        return kept

    return {name: [doc for doc in map(counted, await store.collection(name).find(
        {}, {"_id": 0, "retained": 0}).sort([("siteId", 1), ("day", 1), ("_id", 1)]).to_list(
        None)) if set(doc) - keys]
        for name in ("site_days", "page_days", "session_days", "heatmap_counts")}


class PausingStore(FaultyStore):
    """The store, with every footage-chunk delete waiting until the test lets it go on."""

    def __init__(self, store: Any) -> None:
        super().__init__(store)
        self.reached = asyncio.Event()
        self.go_on = asyncio.Event()

    def collection(self, name: str) -> Any:
        proxy = super().collection(name)
        if name != "segments.chunks":
            return proxy
        pausing = self

        class Pausing:
            def __getattr__(self, attribute: str) -> Any:
                return getattr(proxy, attribute)

            async def delete_many(self, *args: Any, **kwargs: Any) -> Any:
                pausing.reached.set()
                await pausing.go_on.wait()
                return await proxy.delete_many(*args, **kwargs)

        return Pausing()


async def test_two_runners_never_run_at_once(seeded: Seeded, deps):
    now = seeded.at + timedelta(days=91)
    paused = PausingStore(deps.store)
    first, second = make_purger(paused), make_purger(deps.store)
    running = asyncio.create_task(first.purge(now))
    await asyncio.wait_for(paused.reached.wait(), 10)
    # The first is inside a batch: the second does nothing at all, however often it tries.
    for _ in range(3):
        assert await second.purge(now) is None
    assert await _count(deps.store, "recordings") == 4
    paused.go_on.set()
    report = await running
    assert report is not None and report.removed["recordings"] == 4
    # Once the first is done the second may run, and finds nothing left.
    again = await second.purge(now)
    assert again is not None and again.removed == NOTHING
    assert await _count(deps.store, "retention_runs") == 2


async def test_a_failing_run_is_counted_and_notifies_the_owner_once_a_day(
        seeded: Seeded, deps, tenant):
    plan = FaultPlan()
    plan.fail("leads", "delete_many", times=2)
    alerts = RecordingAlerts()
    purger = make_purger(FaultyStore(deps.store, plan), alerts)
    await deps.store.collection("sites").update_one(
        {"_id": tenant.site_id}, {"$set": {"settings.retentionDays": {"leads": 30}}})
    now = seeded.at + timedelta(days=31)
    for _ in range(2):
        try:
            await purger.purge(now)
        except Exception as exc:  # noqa: BLE001 - the failure is the point
            assert type(exc).__name__ == "PurgeFailed"
    assert alerts.calls == [(tenant.site_id, "failed", ["leads"])]
    assert purger.metrics.value("retention_purge_failures_total") == 2
    assert purger.last_success == 0.0
    (run,) = await deps.store.collection("retention_runs").find({}).to_list(None)
    assert run["lastError"] == "InjectedFault while purging leads"
    # The next day's pass succeeds and says so.
    report = await purger.purge(now + timedelta(days=1))
    assert report is not None and purger.last_success > 0


async def test_a_bucket_with_old_and_young_events_keeps_the_young_ones(deps, tenant):
    store = deps.store
    now = datetime.now(UTC)
    old, young = now - timedelta(days=800), now - timedelta(days=1)
    events = [{"id": "p1", "at": old, "url": "/a"}, {"id": "p2", "at": old, "url": "/b"},
              {"id": "p3", "at": young, "url": "/c"}]
    await store.collection("pageview_buckets").insert_many([
        {"_id": "mixed", "siteId": tenant.site_id, "visitorId": "v1", "sequence": 0,
         "count": 3, "events": events, "firstAt": old, "lastAt": young},
        {"_id": "all-old", "siteId": tenant.site_id, "visitorId": "v2", "sequence": 0,
         "count": 2, "events": events[:2], "firstAt": old, "lastAt": old}])
    report = await make_purger(store).purge(now)
    assert report is not None and report.removed["activity"] == 2 + 2
    (left,) = await store.collection("pageview_buckets").find({}).to_list(None)
    assert left["_id"] == "mixed" and left["count"] == 1
    assert [event["id"] for event in left["events"]] == ["p3"]
    assert abs(left["firstAt"] - young) < timedelta(milliseconds=1)


async def test_orders_go_with_their_events_and_their_revenue_stays_in_the_figures(
        fetch, deps, tenant):
    store = deps.store
    at = datetime.now(UTC)
    context = {"visitorId": "shopper-1", "sessionId": "sess-shopper-1",
               "url": "https://shop.example/checkout"}
    for event in ({"eventId": "cart-1", "type": "add_to_cart", "productId": "mug"},
                  {"eventId": "placed-1", "type": "order_placed", "orderId": "o-1",
                   "total": "25.00", "currency": "EUR"},
                  {"eventId": "paid-1", "type": "order_paid", "orderId": "o-1"}):
        answer = await fetch("/ingest/commerce", "POST", json_body={**context, **event},
                             headers={"X-Service-Key": tenant.api_key})
        assert answer.code == 200, answer
    await derivation.fold_all(store)
    figures = await _figures_as_read(store)
    assert "orders" in repr(figures)  # the paid order is counted in its day's figures
    await store.collection("sites").update_one(
        {"_id": tenant.site_id}, {"$set": {"settings.retentionDays": {"leads": 30}}})

    report = await make_purger(store).purge(at + timedelta(days=29))
    assert report is not None and report.removed["leads"] == 0
    report = await make_purger(store).purge(at + timedelta(days=31))
    assert report is not None and report.removed["leads"] == 1 + 1  # the order, the cart
    assert await _count(store, "orders") == 0
    assert await _count(store, "commerce_events") == 0
    assert await _figures_as_read(store) == figures
    # A rebuild finds no order, and adds back the revenue the purge kept.
    await derivation.rebuild_site(store, tenant.site_id)
    assert await _figures_as_read(store) == figures
    # The reporting currency came from the first paid order and stays with that order gone,
    # so the kept EUR revenue is still the site's own, not "another currency".
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/overview?from="
                         f"{at.date().isoformat()}&to={at.date().isoformat()}",
                         token=tenant.token)
    assert answer.code == 200, answer
    money = answer.json()["commerce"]
    assert (money["currency"], money["currencySource"], money["otherCurrencies"]) == (
        "EUR", "firstOrder", [])


class RacingStore(FaultyStore):
    """The store, where a pageview lands in a bucket just before the purge rewrites it."""

    def collection(self, name: str) -> Any:
        proxy = super().collection(name)
        if name != "pageview_buckets":
            return proxy

        class Racing:
            def __getattr__(self, attribute: str) -> Any:
                return getattr(proxy, attribute)

            async def update_one(self, filter_: Any, update: Any, **kwargs: Any) -> Any:
                if "count" in filter_:  # the purge's conditional rewrite
                    await proxy.update_one({"_id": filter_["_id"]}, {
                        "$push": {"events": {"id": "late", "at": datetime.now(UTC)}},
                        "$inc": {"count": 1}}, session=kwargs.get("session"))
                return await proxy.update_one(filter_, update, **kwargs)

        return Racing()


async def test_a_purge_that_falls_behind_notifies_the_owner_once_a_day(deps, tenant):
    store = deps.store
    now = datetime.now(UTC)
    old = now - timedelta(days=800)
    await store.collection("pageview_buckets").insert_one(
        {"_id": "busy", "siteId": tenant.site_id, "visitorId": "v1", "sequence": 0, "count": 2,
         "events": [{"id": "p1", "at": old}, {"id": "p2", "at": now}],
         "firstAt": old, "lastAt": now})
    alerts = RecordingAlerts()
    purger = make_purger(RacingStore(store), alerts)
    for day in range(2):
        report = await purger.purge(now + timedelta(hours=day))
        assert report is not None and report.behind == {tenant.site_id: ["activity"]}
    # The late pageview is kept, and so (until a quieter run) is the old one.
    (bucket,) = await store.collection("pageview_buckets").find({}).to_list(None)
    assert [event["id"] for event in bucket["events"]] == ["p1", "p2", "late", "late"]
    assert alerts.calls == [(tenant.site_id, "behind", ["activity"])]
    status = (await retention.site_status(store, tenant.site_id))["activity"]
    assert status["oldestHeldAt"] is not None
    # A quieter run catches up.
    report = await make_purger(store, alerts).purge(now + timedelta(days=1, hours=1))
    assert report is not None and report.behind == {} and report.removed["activity"] == 1


async def test_the_request_log_keeps_completed_requests_five_years(deps, tenant):
    store = deps.store
    now = datetime.now(UTC)
    base = {"siteId": tenant.site_id, "organizationId": tenant.organization_id,
            "type": "access"}
    await store.collection("dsr_requests").insert_many([
        {**base, "_id": "done-long-ago", "receivedAt": now - timedelta(days=1900),
         "completedAt": now - timedelta(days=1830), "status": "completed"},
        {**base, "_id": "done-recently", "receivedAt": now - timedelta(days=1900),
         "completedAt": now - timedelta(days=1820), "status": "completed"},
        {**base, "_id": "never-done", "receivedAt": now - timedelta(days=1900),
         "completedAt": None, "status": "failed"}])
    report = await make_purger(store).purge(now)
    assert report is not None and report.removed["requestLog"] == 1
    left = sorted([doc["_id"] async for doc in store.collection("dsr_requests").find({})])
    assert left == ["done-recently", "never-done"]


async def test_a_batch_of_expired_profiles_costs_the_same_store_calls_whatever_it_holds(
        deps, tenant):
    """One walk per batch, not per visitor: with a walk per expired profile, the purge's time
    grew with the square of the data on the embedded store, where every call reads the whole
    collection, and by some thirty round trips per visitor on a replica set."""
    now = datetime.now(UTC)
    plan = FaultPlan()
    purger = make_purger(FaultyStore(deps.store, plan))

    async def calls_to_purge(visitors: int, prefix: str) -> list[tuple[str, str]]:
        old = now - timedelta(days=800)
        for n in range(visitors):
            visitor_id = f"{prefix}-{n}"
            await deps.store.collection("visitors").insert_one({
                "_id": f"{tenant.site_id}:{visitor_id}", "siteId": tenant.site_id,
                "visitorId": visitor_id, "firstSeen": old, "lastSeen": old,
                "emails": [f"{visitor_id}@example.com"]})
            await deps.store.collection("leads").insert_one({
                "_id": f"lead-{visitor_id}", "siteId": tenant.site_id, "visitorId": visitor_id,
                "sessionId": f"s-{visitor_id}", "email": f"{visitor_id}@example.com",
                "createdAt": now})
        plan.record_calls = True
        report = await purger.purge(now)
        plan.record_calls = False
        assert report is not None and report.removed["visitors"] == visitors
        # What the visitors counted is kept with the figures, one write per figure document
        # (at most daily_figures.SLOTS a day, whatever the number of visitors), left out here.
        calls = sorted(call for call in plan.calls
                       if call != (daily_figures.SITE_DAYS, "update_one"))
        plan.calls.clear()
        return calls

    one = await calls_to_purge(1, "alone")
    assert await calls_to_purge(12, "crowd") == one
    assert await deps.store.collection("visitors").count_documents({}) == 0
    # The visitors' leads went with them, although leads are kept three years.
    assert await deps.store.collection("leads").count_documents({}) == 0


async def test_a_rebuild_after_a_trim_and_an_erasure_still_finds_the_figures(fetch, deps, tenant):
    """Retention takes a visitor's older pageviews; the visitor is then erased; a rebuild finds
    the figures as the fold left them: the purged pageviews stay as anyone's, the visitor's days
    and visits go with the erasure, in both."""
    store = deps.store
    now = datetime.now(UTC)
    headers = {"X-Service-Key": tenant.api_key}
    for who, back, page in (("ada", 20, "/old"), ("ada", 0, "/new"), ("bob", 20, "/old"),
                            ("bob", 0, "/new"), ("bob", 0, "/cart")):
        answer = await fetch("/ingest/pageviews", "POST", headers=headers, json_body={
            "visitorId": who, "sessionId": f"{who}-{back}", "url": f"https://shop.example{page}",
            "occurredAt": (now - timedelta(days=back)).isoformat()})
        assert answer.code == 200, answer
    await derivation.fold_all(store)
    await store.collection("sites").update_one(
        {"_id": tenant.site_id}, {"$set": {"settings.retentionDays": {"activity": 30}}})

    # Fifteen days on, the pageviews of twenty days ago are past the 30 days kept.
    report = await make_purger(store).purge(now + timedelta(days=15))
    assert report is not None and report.removed["activity"] == 2
    erased = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/ada/data", "DELETE",
                         token=tenant.token)
    assert erased.code == 200, erased
    figures = await _figures_as_read(store)
    await derivation.rebuild_site(store, tenant.site_id)
    assert await _figures_as_read(store) == figures
    # By hand: bob's two pages today, and the two pageviews of twenty days ago, kept as
    # anyone's; ada's pageview of today went with her.
    pageviews = sum(doc.get("pageviews", 0) for doc in figures["site_days"])
    assert pageviews == 2 + 2
