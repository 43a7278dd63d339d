"""The Store: transactions are all-or-nothing, sessions are enforced, faults can be injected."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from bson import ObjectId

from documents.store import (
    ASCENDING,
    DuplicateKeyError,
    Index,
    Store,
    TransactionSessionMissing,
)
from tests.support.faulty_store import FaultPlan, InjectedFault


async def _snapshot(store: Store, name: str) -> list[dict[str, Any]]:
    return await store.collection(name).find({}).sort("_id", ASCENDING).to_list(None)


async def test_an_aborted_transaction_leaves_every_touched_document_as_it_was(store: Store):
    things = store.collection("things")
    await things.insert_many([{"_id": 1, "n": 1}, {"_id": 2, "n": 2}, {"_id": 3, "n": 3}])
    before = await _snapshot(store, "things")

    async def work(session: Any) -> None:
        await things.update_one({"_id": 1}, {"$inc": {"n": 10}}, session=session)
        await things.update_many({}, {"$set": {"touched": True}}, session=session)
        await things.insert_one({"_id": 4, "n": 4}, session=session)
        await things.update_one({"_id": 5}, {"$set": {"n": 5}}, upsert=True, session=session)
        await things.delete_one({"_id": 2}, session=session)
        await things.find_one_and_update({"_id": 6}, {"$set": {"n": 6}}, upsert=True,
                                         session=session)
        await things.delete_many({"n": {"$gte": 3}}, session=session)
        raise RuntimeError("abort on purpose")

    with pytest.raises(RuntimeError, match="abort on purpose"):
        await store.transaction(work)
    assert await _snapshot(store, "things") == before


async def test_a_committed_transaction_keeps_its_writes(store: Store):
    things = store.collection("things")

    async def work(session: Any) -> str:
        await things.insert_one({"_id": "a", "n": 1}, session=session)
        await things.update_one({"_id": "a"}, {"$inc": {"n": 1}}, session=session)
        return "done"

    assert await store.transaction(work) == "done"
    assert await things.find_one({"_id": "a"}) == {"_id": "a", "n": 2}


@pytest.mark.parametrize("operation", ["read", "write", "delete"])
async def test_an_operation_inside_a_transaction_without_its_session_raises(
        store: Store, operation: str):
    things = store.collection("things")
    await things.insert_one({"_id": 1, "n": 1})

    async def forgetful(session: Any) -> None:
        await things.update_one({"_id": 1}, {"$set": {"n": 2}}, session=session)
        if operation == "read":
            await things.find_one({"_id": 1})
        elif operation == "write":
            await things.update_one({"_id": 1}, {"$set": {"n": 3}})
        else:
            await things.delete_many({})

    with pytest.raises(TransactionSessionMissing):
        await store.transaction(forgetful)
    assert await things.find_one({"_id": 1}) == {"_id": 1, "n": 1}


async def test_what_follows_a_transaction_runs_once_it_has_ended_committed_or_not(store: Store):
    things = store.collection("things")
    seen: list[Any] = []

    async def look() -> None:
        seen.append(await things.find_one({"_id": "a"}))

    async def work(session: Any) -> None:
        await things.insert_one({"_id": "a"}, session=session)
        await store.after_transaction(session, look)
        assert seen == []

    await store.transaction(work)
    assert seen == [{"_id": "a"}]  # it reads what the transaction committed

    async def failing(session: Any) -> None:
        await things.delete_one({"_id": "a"}, session=session)
        await store.after_transaction(session, look)
        raise RuntimeError("abort on purpose")

    with pytest.raises(RuntimeError, match="abort on purpose"):
        await store.transaction(failing)
    assert seen == [{"_id": "a"}, {"_id": "a"}]  # after the roll-back too

    await store.after_transaction(None, look)  # outside a transaction: at once
    assert len(seen) == 3


async def test_what_follows_a_transaction_needs_the_transactions_session(store: Store):
    async def nothing() -> None:
        pass

    async def forgetful(session: Any) -> None:
        await store.after_transaction(None, nothing)

    with pytest.raises(TransactionSessionMissing):
        await store.transaction(forgetful)
    with pytest.raises(TransactionSessionMissing):
        await store.after_transaction(object(), nothing)


async def test_a_planned_fault_fails_the_chosen_operation_then_lets_it_through(
        store: Store, faults: FaultPlan):
    things = store.collection("things")
    faults.fail("things", "insert_one", times=2)
    for _ in range(2):
        with pytest.raises(InjectedFault):
            await things.insert_one({"n": 1})
    await things.insert_one({"_id": "ok"})
    assert await things.count_documents({}) == 1


async def test_a_fault_in_the_middle_of_a_transaction_rolls_back_the_earlier_steps(
        store: Store, faults: FaultPlan):
    first, second = store.collection("first"), store.collection("second")
    await first.insert_one({"_id": 1, "state": "original"})
    faults.fail("second", "insert_one")

    async def work(session: Any) -> None:
        await first.update_one({"_id": 1}, {"$set": {"state": "changed"}}, session=session)
        await second.insert_one({"_id": 1}, session=session)

    with pytest.raises(InjectedFault):
        await store.transaction(work)
    assert await first.find_one({"_id": 1}) == {"_id": 1, "state": "original"}
    assert await second.count_documents({}) == 0


async def test_ensuring_indexes_twice_changes_nothing_and_unique_indexes_hold(store: Store):
    index = Index("people", (("email", ASCENDING),), unique=True)
    await store.ensure_indexes([index])
    await store.ensure_indexes([index])
    people = store.collection("people")
    await people.insert_one({"email": "a@example.com"})
    with pytest.raises(DuplicateKeyError):
        await people.insert_one({"email": "a@example.com"})
    names = await people.index_information()
    assert len([n for n in names if n != "_id_"]) == 1


async def test_a_bucket_file_reads_back_in_order_and_deletes_with_its_chunks(store: Store):
    bucket = store.bucket("blobs")
    await store.ensure_indexes(bucket.indexes())
    data = bytes(range(256)) * 3000  # several chunks
    await bucket.upload("f1", "one", data, {"owner": "x"})
    await bucket.upload("f2", "two", b"small", {"owner": "y"})
    assert await bucket.read("f1") == data
    assert await bucket.delete_where({"metadata.owner": "x"}) == 1
    assert await bucket.find_file({"_id": "f1"}) is None
    assert await store.collection("blobs.chunks").count_documents({"files_id": "f1"}) == 0
    assert await bucket.read("f2") == b"small"


async def test_a_second_upload_with_the_same_id_is_refused_and_keeps_the_first(store: Store):
    bucket = store.bucket("blobs")
    await store.ensure_indexes(bucket.indexes())
    await bucket.upload("f1", "one", b"first", {})
    with pytest.raises(DuplicateKeyError):
        await bucket.upload("f1", "one", b"second", {})
    assert await bucket.read("f1") == b"first"


async def test_an_upload_colliding_on_a_metadata_index_leaves_no_chunks_behind(store: Store):
    bucket = store.bucket("blobs")
    await store.ensure_indexes([*bucket.indexes(), Index(
        "blobs.files", (("metadata.part", ASCENDING),), unique=True)])
    await bucket.upload("f1", "one", b"first", {"part": 1})
    with pytest.raises(DuplicateKeyError):
        await bucket.upload("f2", "one", b"again", {"part": 1})
    assert await store.collection("blobs.chunks").count_documents({"files_id": "f2"}) == 0
    assert await bucket.read("f1") == b"first"


async def test_an_upload_colliding_inside_a_transaction_fails_at_once_and_leaves_nothing(
        store: Store):
    """The collision aborts the transaction on a real server: the upload must not try to clean
    up inside it (that would raise NoSuchTransaction, a transient error, and make the driver
    run the whole callback again and again); the abort itself removes the chunks."""
    bucket = store.bucket("blobs")
    await store.ensure_indexes([*bucket.indexes(), Index(
        "blobs.files", (("metadata.part", ASCENDING),), unique=True)])
    await bucket.upload("f1", "one", b"first", {"part": 1})
    runs = 0

    async def work(session: Any) -> None:
        nonlocal runs
        runs += 1
        await bucket.upload("f2", "one", b"again" * 100_000, {"part": 1}, session=session)

    with pytest.raises(DuplicateKeyError):
        await asyncio.wait_for(store.transaction(work), timeout=10)
    assert runs == 1
    assert await store.collection("blobs.chunks").count_documents({"files_id": "f2"}) == 0
    assert await bucket.read("f1") == b"first"


async def test_documents_read_back_are_copies_with_mongodb_datetimes(store: Store):
    """The embedded engine's faster copies still hand out independent documents, and datetimes
    still come back as MongoDB keeps them: UTC, tz-aware, to the millisecond."""
    moment = datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    events = store.collection("copies")
    await events.insert_one({"_id": "a", "at": moment, "nested": {"list": [{"at": moment}]},
                             "tags": ["x"], "id": ObjectId("0123456789abcdef01234567")})
    await events.update_one({"_id": "a"}, {"$push": {"tags": "y"}, "$set": {"when": moment}})
    first = await events.find_one({"_id": "a"})
    first["nested"]["list"][0]["at"] = None
    first["tags"].append("mutated")
    second = await events.find_one({"_id": "a"})
    expected = datetime(2026, 11, 22, 8, 0, 0, 123000, tzinfo=UTC)
    assert second["at"] == expected and second["at"].utcoffset() == timedelta(0)
    assert second["nested"]["list"][0]["at"] == expected and second["when"] == expected
    assert second["tags"] == ["x", "y"]
    assert second["id"] == ObjectId("0123456789abcdef01234567")
    found = await events.find({"at": expected}).to_list(None)
    assert [doc["_id"] for doc in found] == ["a"]


async def test_embedded_transactions_take_turns_so_one_never_sees_another_half_way(
        store: Store):
    """The embedded store's operations run off the event loop, so a transaction suspends at
    each of them; the next one starts only when it has ended."""
    if not store.embedded:
        pytest.skip("about the embedded store: a replica set isolates transactions itself")
    await store.collection("counters").insert_one({"_id": "c", "n": 0})
    seen: list[int] = []
    first_wrote = asyncio.Event()

    async def first(session: Any) -> None:
        await store.collection("counters").update_one({"_id": "c"}, {"$inc": {"n": 1}},
                                                      session=session)
        first_wrote.set()
        await asyncio.sleep(0.05)
        raise RuntimeError("rolled back")

    async def second(session: Any) -> None:
        found = await store.collection("counters").find_one({"_id": "c"}, session=session)
        seen.append(found["n"])
        await store.collection("counters").update_one({"_id": "c"}, {"$inc": {"n": 10}},
                                                      session=session)

    failing = asyncio.create_task(store.transaction(first))
    await first_wrote.wait()
    await store.transaction(second)
    with pytest.raises(RuntimeError):
        await failing
    # The second read what the first left once rolled back, and its write was not undone.
    assert seen == [0]
    assert (await store.collection("counters").find_one({"_id": "c"}))["n"] == 10


async def test_two_transactions_changing_one_document_both_commit_and_every_rerun_is_counted(
        store: Store):
    if store.embedded:
        pytest.skip("on the embedded store transactions take turns (the test above)")
    await store.collection("counters").insert_one({"_id": "c", "n": 0})
    first_wrote, second_tried = asyncio.Event(), asyncio.Event()
    runs = {"first": 0, "second": 0}
    before = (store.transactions_run, store.transactions_retried)

    async def first(session: Any) -> None:
        runs["first"] += 1
        await store.collection("counters").update_one({"_id": "c"}, {"$inc": {"n": 1}},
                                                      session=session)
        first_wrote.set()
        # Hold the uncommitted write until the second has tried its own: on MongoDB that try
        # meets a write conflict, is aborted and runs again once this one has committed.
        await second_tried.wait()

    async def second(session: Any) -> None:
        runs["second"] += 1
        await first_wrote.wait()
        try:
            await store.collection("counters").update_one({"_id": "c"}, {"$inc": {"n": 10}},
                                                          session=session)
        finally:
            second_tried.set()

    await asyncio.wait_for(asyncio.gather(store.transaction(first), store.transaction(second)),
                           timeout=60)
    assert (await store.collection("counters").find_one({"_id": "c"}))["n"] == 11
    # Every run beyond each transaction's first is an abort, and each is counted.
    assert (store.transactions_run - before[0], store.transactions_retried - before[1]) == (
        2, runs["first"] + runs["second"] - 2)
