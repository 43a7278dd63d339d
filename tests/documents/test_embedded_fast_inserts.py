"""The `insert_one` fast path of documents.embedded_engine changes nothing but speed.

Generated inserts run against a store on the fast path and one on mongomock's own code, and
every result, exception (with its code and mongomock-motor's details), stored document and
change to the caller's document is compared. The inputs reach both sides of the boundary: plain
documents with a new or missing `_id`, and around them duplicate ids, odd ids, keys and values,
other mappings, sessions, validation bypass, and unique indexes, some created between inserts.
"""

from __future__ import annotations

import collections
import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from bson import Int64, ObjectId
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mongomock.collection import Collection as MongomockCollection
from pymongo.errors import DuplicateKeyError

from documents import embedded_engine, error_outbox
from tests.support import embedded_differential as harness

# Strategies --------------------------------------------------------------------------------------


@dataclass
class FakeSession:
    """A truthy stand-in for a driver session (mongomock refuses any truthy session)."""


#: `_id` values mongomock hashes, refuses or converts: the fast path leaves them to it.
ODD_IDS = [True, 7.0, None, [1], {"x": 1}, (1, 2), 2**70, Int64(5),
           datetime(2026, 1, 1, 10, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))]
#: Top-level keys mongomock refuses, and ones it stores as they are.
ODD_KEYS = ["$k", "k\0", 1, "a.b", "", "x.$y", "\ud800"]
OPTIONS = [{}, {}, {}, {}, {"session": None}, {"bypass_document_validation": False},
           {"bypass_document_validation": True}, {"session": FakeSession()}]


@st.composite
def inserted_documents(draw: st.DrawFn) -> Any:
    """A document to insert: mostly plain, with a new, taken or missing `_id` anywhere in it;
    now and then an odd `_id`, key or value, or a mapping that is not a dict."""
    items = list(draw(harness.stored_documents).items())
    kind = draw(st.sampled_from(range(10)))
    if kind >= 3:
        doc_id = draw(st.sampled_from(ODD_IDS if kind == 9 else harness.IDS))
        items.insert(draw(st.integers(0, len(items))), ("_id", doc_id))
    if draw(harness.one_in(4)):
        items.append((draw(st.sampled_from(ODD_KEYS)), draw(harness.stored_leaves)))
    if draw(harness.one_in(4)):
        items.append((draw(st.sampled_from(harness.FIELDS)), draw(harness.odd_values)))
    document = dict(items)
    if draw(harness.one_in(15)):
        return draw(st.sampled_from([collections.OrderedDict(document), [document]]))
    return document


@st.composite
def operations(draw: st.DrawFn) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """Mostly an insert; sometimes a read of one id, or a unique index created in between."""
    kind = draw(st.sampled_from(range(12)))
    if kind == 0:
        return "create_index", (draw(st.sampled_from(["n", "a.b"])),), {
            "unique": True, "sparse": draw(st.booleans())}
    if kind == 1:
        return "find_one", ({"_id": draw(st.sampled_from(harness.IDS))},), {}
    return "insert_one", (draw(inserted_documents()),), dict(draw(st.sampled_from(OPTIONS)))


@st.composite
def scenarios(draw: st.DrawFn) -> harness.Scenario:
    """Maybe an index, up to two stored documents, then up to five operations."""
    ids = draw(st.lists(st.sampled_from(harness.IDS), max_size=2, unique=True))
    documents = [{"_id": doc_id, **draw(harness.stored_documents)} for doc_id in ids]
    indexes = draw(st.sampled_from([*harness.INDEXES,
                                    [("create_index", ("n",), {"unique": True})]]))
    return harness.Scenario(documents, draw(st.lists(operations(), min_size=1, max_size=5)),
                            indexes, tz_aware=not draw(harness.one_in(5)))


# The differential test ------------------------------------------------------------------------

#: mongomock's generic insert; an insert that does not reach it was fast.
GENERIC_INSERT = (MongomockCollection, "_insert")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_the_insert_fast_path_agrees_with_mongomock_on_every_generated_scenario(
        scenario: harness.Scenario):
    assert harness.differences(scenario) == []


def test_the_generated_inserts_reach_both_sides_of_the_boundary(monkeypatch: pytest.MonkeyPatch):
    """Without fast and generic inserts among the examples, agreement proves little."""
    taken = harness.Taken(monkeypatch, GENERIC_INSERT)
    seen: set[tuple[bool, str]] = set()

    @settings(max_examples=150, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(scenarios())
    def collect(scenario: harness.Scenario) -> None:
        items = harness.embedded_store("reach").database["items"]
        for method, args, kwargs in scenario.operations:
            taken.take()
            result = harness.outcome(items, method, args, kwargs)
            if method == "insert_one":
                seen.add((taken.take()["_insert"] == 0, result[0]))

    collect()
    # Fast inserts always succeed; mongomock's `_insert` both stores and refuses. (Its
    # `insert_one` refuses a document that is no mapping before `_insert`.)
    assert {(True, "returned"), (False, "returned"), (False, "raised")} <= seen


# The test can fail ----------------------------------------------------------------------------

DUPLICATE_SCENARIO = harness.Scenario(
    [{"_id": "a", "n": 1}],
    [("insert_one", ({"_id": "a", "n": 2},), {}), ("insert_one", ({"n": 3},), {})])


def test_a_fast_path_that_skips_the_duplicate_check_is_caught(monkeypatch: pytest.MonkeyPatch):
    assert harness.differences(DUPLICATE_SCENARIO) == []

    def store_over(documents: Any, doc_id: Any, stored: dict[str, Any]) -> bool:
        documents._documents[doc_id] = stored
        return True

    monkeypatch.setattr(embedded_engine, "_store_new", store_over)
    found = harness.differences(DUPLICATE_SCENARIO)
    assert any(line.startswith("step 0") and ": result " in line for line in found), found
    assert any(line.startswith("step 0") and ": stored " in line for line in found), found
    # The generated scenarios find the breakage too.
    failing = harness.disagreeing_scenario(scenarios())
    assert any(method == "insert_one" for method, _, _ in failing.operations)


# What a caller notices --------------------------------------------------------------------------


async def test_a_missing_id_is_generated_set_on_the_document_and_stored_last(
        monkeypatch: pytest.MonkeyPatch):
    taken = harness.Taken(monkeypatch, GENERIC_INSERT)
    store = harness.embedded_store("inserts")
    moment = datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    document = {"job": {"jobId": "j", "tags": ["x"]}, "at": moment, "n": 0}

    result = await store.collection("items").insert_one(document)

    assert taken.take() == {}
    assert type(result.inserted_id) is ObjectId and result.acknowledged
    assert list(document) == ["job", "at", "n", "_id"]
    assert document["_id"] is result.inserted_id and document["at"] is moment
    stored = store.client._store[store.database.name]["items"]._documents[result.inserted_id]
    assert stored == {"job": {"jobId": "j", "tags": ["x"]},
                      "at": datetime(2026, 11, 22, 8, 0, 0, 123000), "n": 0,
                      "_id": result.inserted_id}
    assert list(stored) == list(document)
    document["job"]["tags"].append("mutated")
    assert stored["job"]["tags"] == ["x"]  # a copy, as mongomock stores


async def test_keep_job_is_fast_and_a_repeated_job_raises_mongomocks_duplicate_key_error(
        monkeypatch: pytest.MonkeyPatch):
    taken = harness.Taken(monkeypatch, GENERIC_INSERT)
    now = datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=UTC)
    job = {"jobId": "job-1", "siteId": "site", "event": {"message": "boom"}}
    errors = []
    for fast in (False, True):
        store = harness.embedded_store("outbox")
        await store.ensure_indexes(error_outbox.INDEXES)
        taken.take()
        with contextlib.nullcontext() if fast else harness.generic_engine():
            await error_outbox.keep_job(store, job, now=now, relay_after=now)
            assert taken.take()["_insert"] == (0 if fast else 1)
            with pytest.raises(DuplicateKeyError) as raised:
                await error_outbox.keep_job(store, job, now=now, relay_after=now)
        errors.append((str(raised.value), raised.value.code, raised.value.details))
        assert await error_outbox.holds_job(store, "job-1")
    assert errors[0] == errors[1] == ("E11000 Duplicate Key Error", 11000, None)


async def test_a_duplicate_on_another_unique_index_keeps_mongomock_motors_details():
    """mongomock-motor names the clashing key in the error; both engines keep that."""
    scenario = harness.Scenario([{"_id": "a", "n": 1}], [("insert_one", ({"n": 1},), {})],
                                [("create_index", ("n",), {"unique": True})])
    assert harness.differences(scenario) == []
    items = harness.embedded_store("details").database["items"]
    await items.create_index("n", unique=True)
    await items.insert_one({"_id": "a", "n": 1})
    with pytest.raises(DuplicateKeyError) as raised:
        await items.insert_one({"n": 1})
    assert raised.value.details == {"keyValue": {"n": 1}, "keyPattern": {"n": 1}}
    assert await items.count_documents({}) == 1
