"""The embedded engine's `_id` fast paths (documents.embedded_engine) change nothing but speed.

The differential test runs generated operations against two embedded stores, one answering
through the fast paths and one through mongomock's own code, and compares every result,
exception, stored document and side effect on the caller's arguments. The inputs reach both
sides of the fast paths' boundary: supported updates on existing documents, and everything
around them (upserts that insert, unsupported operators, values and paths, projections). The
harness, shared with the insert tests, is tests/support/embedded_differential.py.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from bson import Int64
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mongomock.collection import Collection as MongomockCollection
from mongomock.collection import Cursor as MongomockCursor
from pymongo import ReturnDocument

from documents import activity, embedded_engine, error_outbox, visitors
from documents.store import Store, open_store
from tests.support.embedded_differential import (
    FIELDS,
    IDS,
    INDEXES,
    Scenario,
    Taken,
    differences,
    disagreeing_scenario,
    numbers,
    odd_values,
    one_in,
    outcome,
    run_now,
    stored_datetimes,
    stored_documents,
    stored_leaves,
    stored_values,
)

# Strategies --------------------------------------------------------------------------------------

#: Paths the fast paths handle (when the stored document agrees), and paths they leave alone.
GOOD_PATHS = [*FIELDS, "a.b", "a.c", "b.x", "n.x", "d.e.f", "a.b.c", "counts.pageviews",
              "counts.leads"]
BAD_PATHS = ["l.0", "_id", "_id.x", "a.$", "l.$[]", "", "a..b", "a.", "x\0y", "$bad"]
odd_numbers = st.sampled_from([True, "1", None, Int64(1), 2**70])


@dataclass(frozen=True)
class Vocabulary:
    """What updates are drawn from: TAME ones mostly stay inside the fast paths' subset."""

    paths: st.SearchStrategy[str]
    values: st.SearchStrategy[Any]
    numbers: st.SearchStrategy[Any]
    extremes: st.SearchStrategy[Any]


TAME = Vocabulary(st.sampled_from(GOOD_PATHS), stored_values, numbers,
                  st.one_of(stored_datetimes, numbers))
#: Tame paths with now and then a value the fast paths must leave to mongomock.
ODD = Vocabulary(st.sampled_from(GOOD_PATHS), st.one_of(stored_values, stored_values, odd_values),
                 st.one_of(numbers, numbers, odd_numbers),
                 st.one_of(stored_datetimes, numbers, st.sampled_from([None, "x"]), odd_values))
WILD = Vocabulary(st.sampled_from(GOOD_PATHS + BAD_PATHS), st.one_of(stored_values, odd_values),
                  st.one_of(numbers, odd_numbers),
                  st.one_of(stored_datetimes, numbers, st.sampled_from([None, "x"]), odd_values))


def _fields(words: Vocabulary, values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.dictionaries(words.paths, values, min_size=1, max_size=3 if words is WILD else 2)


def _operator_fields(words: Vocabulary, operator: str) -> st.SearchStrategy[Any]:
    """The fields of one operator drawn from `words`."""
    if operator in ("$set", "$setOnInsert"):
        return _fields(words, words.values)
    if operator == "$unset":
        return _fields(words, st.sampled_from(["", 1]))
    if operator == "$inc":
        return _fields(words, words.numbers)
    if operator in ("$min", "$max"):
        return _fields(words, words.extremes)
    each = st.lists(words.values, max_size=3)
    if operator == "$addToSet":
        return _fields(words, st.one_of(
            words.values, st.sampled_from(["x", 1]),
            st.fixed_dictionaries({"$each": each}, optional={"$slice": st.just(1)})))
    slices = st.integers(-3, 3)
    modifiers: dict[str, st.SearchStrategy[Any]] = {"$slice": slices}
    if words is WILD:
        modifiers = {"$slice": st.one_of(slices, st.sampled_from([None, 1.0, True])),
                     "$position": st.just(0), "$sort": st.just(1)}
    pushes = st.one_of(words.values, st.fixed_dictionaries({"$each": each}, optional=modifiers))
    if words is WILD:
        pushes = st.one_of(pushes, st.sampled_from([{"$each": "ab"}, {"$slice": 2}]))
    return _fields(words, pushes)


OPERATORS = ["$set", "$unset", "$inc", "$min", "$max", "$push", "$addToSet", "$setOnInsert"]
unsupported = st.sampled_from([
    {"$rename": {"a": "z"}}, {"$pop": {"l": 1}}, {"$mul": {"n": 2}}, {"$pull": {"l": 1}},
    {"$bogus": {"a": 1}}, {"$set": {}}, {"$set": 5}, {"a": 1}, {}])


def _without_conflicts(update: dict[str, Any]) -> dict[str, Any]:
    """`update` without fields that repeat, or sit inside, an earlier field (never empty)."""
    taken: list[str] = []
    kept: dict[str, Any] = {}
    for name, fields in update.items():
        for path, value in fields.items():
            if not any(path == old or path.startswith(old + ".") or old.startswith(path + ".")
                       for old in taken):
                taken.append(path)
                kept.setdefault(name, {})[path] = value
    return kept


@st.composite
def updates(draw: st.DrawFn) -> dict[str, Any]:
    """An update document: tame or wild operators, sometimes with one of anything else."""
    words = draw(st.sampled_from([TAME, TAME, ODD, WILD]))
    chosen = draw(st.lists(st.sampled_from(OPERATORS), min_size=1, max_size=4, unique=True))
    update = {name: draw(_operator_fields(words, name)) for name in chosen}
    if words is not WILD:
        update = _without_conflicts(update)
    if words is WILD and draw(one_in(5)):
        extra = draw(unsupported)
        update = {**extra, **update} if draw(st.booleans()) else {**update, **extra}
    return update


@st.composite
def filters(draw: st.DrawFn, stored_ids: list[Any]) -> tuple[dict[str, Any], bool]:
    """A filter, mostly for a stored document, and whether an upsert with it inserts a
    predictable document."""
    if stored_ids and not draw(one_in(5)):
        doc_id = draw(st.sampled_from(stored_ids))
    else:
        doc_id = draw(st.sampled_from(IDS))
    kind = draw(st.sampled_from(range(20)))
    if kind <= 13:
        return {"_id": doc_id}, True
    if kind <= 15:
        return {"_id": doc_id, draw(st.sampled_from(["a", "n", "a.b"])): draw(stored_leaves)}, True
    if kind <= 17:
        return {"_id": doc_id, "l": {"$ne": draw(stored_leaves)}}, True
    return draw(st.sampled_from([{"_id": True}, {"_id": 7.0}, {"_id": {"$in": IDS[:2]}},
                                 {"n": {"$gt": 0}}, {"_id": (1, 2)}])), False


projections = st.sampled_from([
    None, {}, {"a": 1}, {"a": True, "n": 1}, {"counts": 1}, {"_id": 0}, {"_id": 1},
    {"_id": False, "n": 1}, {"_id": 1, "l": 1}, {"restricted": 1, "objected": 1}, {"a": 0},
    {"a.b": 1}, {"a": 1, "b": 0}, ["a"], {"l": {"$slice": 1}}, {"zz": 1, "_id": 0}])


@st.composite
def operations(draw: st.DrawFn, stored_ids: list[Any]
               ) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    """One find_one, update_one or find_one_and_update call."""
    method = draw(st.sampled_from(["find_one", "update_one", "update_one",
                                   "find_one_and_update", "find_one_and_update"]))
    filter_, predictable = draw(filters(stored_ids))
    projection = draw(projections)
    if method == "find_one":
        if draw(st.booleans()):
            return method, (filter_, projection), {}
        return method, (filter_,), {"projection": projection, "session": None}
    upsert = predictable and draw(st.booleans())
    if method == "update_one":
        return method, (filter_, draw(updates())), {"upsert": upsert}
    kwargs: dict[str, Any] = {
        "projection": projection, "upsert": upsert,
        "return_document": draw(st.sampled_from(
            [ReturnDocument.BEFORE, ReturnDocument.AFTER, 1]))}
    if draw(one_in(10)):
        kwargs["sort"] = [("n", 1)]
    return method, (filter_, draw(updates())), kwargs


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    """Maybe an index, up to three stored documents, then up to four operations on them."""
    ids = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique=True))
    documents = [{"_id": doc_id, **draw(stored_documents)} for doc_id in ids]
    return Scenario(documents, draw(st.lists(operations(ids), min_size=1, max_size=4)),
                    draw(st.sampled_from(INDEXES)), tz_aware=not draw(one_in(5)))


# The differential test ------------------------------------------------------------------------

#: mongomock's generic code for reads and updates; a call that reaches none of it was fast.
GENERIC_MACHINERY = ((MongomockCollection, "_update"), (MongomockCollection, "_find_and_modify"),
                     (MongomockCursor, "_compute_results"))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_the_fast_paths_agree_with_mongomock_on_every_generated_scenario(scenario: Scenario):
    assert differences(scenario) == []


def test_the_generated_scenarios_reach_both_sides_of_the_boundary(
        monkeypatch: pytest.MonkeyPatch):
    """Without fast and generic calls of each kind among the examples, agreement proves little."""
    taken = Taken(monkeypatch, *GENERIC_MACHINERY)
    generic_markers = {"find_one": "_compute_results", "update_one": "_update",
                       "find_one_and_update": "_find_and_modify"}
    seen: set[tuple[str, bool]] = set()

    @settings(max_examples=150, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(scenarios())
    def collect(scenario: Scenario) -> None:
        store = open_store("", "reach")
        for document in scenario.documents:
            run_now(store.database["items"].insert_one(copy.deepcopy(document)))
        for method, args, kwargs in scenario.operations:
            taken.take()
            outcome(store.database["items"], method, *copy.deepcopy((args, kwargs)))
            seen.add((method, taken.take()[generic_markers[method]] == 0))

    collect()
    assert seen == {(method, fast) for method in generic_markers for fast in (True, False)}


# The test can fail ----------------------------------------------------------------------------

INC_SCENARIO = Scenario(
    [{"_id": "a", "counts": {"pageviews": 1}}],
    [("update_one", ({"_id": "a"}, {"$inc": {"counts.pageviews": 1}}), {}),
     ("find_one_and_update", ({"_id": "a"}, {"$inc": {"counts.pageviews": 2}}),
      {"projection": {"counts": 1}, "return_document": ReturnDocument.AFTER})])


def test_a_broken_fast_path_is_caught_by_the_differential_check(
        monkeypatch: pytest.MonkeyPatch):
    assert differences(INC_SCENARIO) == []
    monkeypatch.setitem(embedded_engine._APPLIERS, "$inc", lambda node, leaf, value: None)
    found = differences(INC_SCENARIO)
    assert any(line.startswith("step 0") and ": stored " in line for line in found), found
    assert any(line.startswith("step 1") and ": result " in line for line in found), found
    # The generated scenarios find the breakage too.
    failing = disagreeing_scenario(scenarios())
    assert any("$inc" in repr(operation) for operation in failing.operations)


async def test_an_update_that_changes_nothing_reports_it_as_mongomock_does(store: Store):
    """The fast path leaves "did it change?" to mongomock unless the answer is certain."""
    items = store.collection("items")
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    await items.insert_one({"_id": "a", "n": 1, "at": moment, "l": [1, 2]})
    assert (await items.update_one({"_id": "a"}, {"$max": {"at": moment}})).modified_count == 0
    assert (await items.update_one({"_id": "a"}, {"$set": {"n": 1.0}})).modified_count == 0
    sliced = {"$push": {"l": {"$each": [2], "$slice": -2}}}
    assert (await items.update_one({"_id": "a"}, sliced)).modified_count == 1
    assert (await items.update_one({"_id": "a"}, {"$addToSet": {"l": 2}})).modified_count == 0
    result = await items.update_one({"_id": "a"}, {"$inc": {"n": 1}})
    assert result.raw_result["nModified"] == 1
    assert await items.find_one({"_id": "a"}) == {"_id": "a", "n": 2.0, "at": moment,
                                                  "l": [2, 2]}


# The hot calls take the fast path ---------------------------------------------------------


async def test_the_hot_ingest_calls_skip_mongomocks_generic_machinery(
        store: Store, monkeypatch: pytest.MonkeyPatch):
    taken = Taken(monkeypatch, *GENERIC_MACHINERY)
    seen_at = datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=UTC)
    facts = visitors.VisitorFacts(country="DE", browser="Firefox", device_type="desktop")

    async def touch(minutes: int) -> dict[str, Any]:
        return await visitors.touch(
            store, "site", "v1", seen_at=seen_at + timedelta(minutes=minutes), facts=facts,
            activity={"kind": "pageview", "at": seen_at, "url": "https://shop.example/"},
            counts={"pageviews": 1}, email="v@example.com")

    assert await touch(0) == {"pageviews": 1}
    assert taken.take()["_find_and_modify"] == 1  # the upsert that inserts: mongomock's code
    assert await touch(1) == {"pageviews": 2}
    assert taken.take() == {}

    assert await visitors.privacy_flags(store, "site", "v1") == visitors.PrivacyFlags()
    assert taken.take() == {}

    for ordinal, may_repeat in ((1, True), (2, True), (3, False)):
        event = {"id": f"pv-{ordinal}", "at": seen_at, "url": "https://shop.example/"}
        assert await activity.append_pageview(store, "site", "v1", event, ordinal=ordinal,
                                              may_repeat=may_repeat)
        assert taken.take()["_update"] == (1 if ordinal == 1 else 0)

    await store.collection(error_outbox.OUTBOX).insert_one({"_id": "job-1", "job": {}})
    assert await error_outbox.holds_job(store, "job-1")
    assert not await error_outbox.holds_job(store, "job-2")
    assert taken.take() == {}

    profile = await visitors.find_profile(store, "site", "v1")
    assert profile is not None and profile["counts"] == {"pageviews": 2}
    assert profile["lastSeen"] == (seen_at + timedelta(minutes=1)).replace(microsecond=123000)
    assert profile["emails"] == ["v@example.com"] and len(profile["recent"]) == 2


# Copies ---------------------------------------------------------------------------------------


async def test_stored_and_returned_values_are_independent_copies(
        store: Store, monkeypatch: pytest.MonkeyPatch):
    """Nothing the fast paths store or return shares a mutable object with the caller."""
    items = store.collection("items")
    moment = datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    await items.insert_one({"_id": "a", "counts": {"n": 1}, "events": [], "tags": []})
    taken = Taken(monkeypatch, *GENERIC_MACHINERY)

    event = {"at": moment, "meta": {"k": ["v"]}}
    profile = {"name": "x", "langs": ["de"]}
    before = await items.find_one_and_update(
        {"_id": "a"}, {"$push": {"events": {"$each": [event], "$slice": -5}},
                       "$set": {"profile": profile, "list": profile["langs"]},
                       "$addToSet": {"tags": "t"}, "$inc": {"counts.n": 1}},
        projection={"counts": 1, "events": 1})
    event["meta"]["k"].append("mutated")
    profile["langs"].append("mutated")
    before["counts"]["n"] = 99

    stored = await items.find_one({"_id": "a"})
    expected_at = datetime(2026, 11, 22, 8, 0, 0, 123000, tzinfo=UTC)
    assert stored == {"_id": "a", "counts": {"n": 2},
                      "events": [{"at": expected_at, "meta": {"k": ["v"]}}], "tags": ["t"],
                      "profile": {"name": "x", "langs": ["de"]}, "list": ["de"]}
    assert before == {"counts": {"n": 99}, "events": [], "_id": "a"}

    stored["events"][0]["meta"]["k"].append("mutated")
    stored["profile"]["langs"].clear()
    after = await items.find_one_and_update({"_id": "a"}, {"$inc": {"counts.n": 1}},
                                            return_document=ReturnDocument.AFTER)
    after["events"].clear()
    result = await items.update_one({"_id": "a"}, {"$push": {"tags": "u"}})
    assert (result.matched_count, result.modified_count, result.upserted_id) == (1, 1, None)
    again = await items.find_one({"_id": "a"}, {"events": 1, "profile": 1, "counts": 1})
    assert again == {"counts": {"n": 3}, "events": [{"at": expected_at, "meta": {"k": ["v"]}}],
                     "profile": {"name": "x", "langs": ["de"]}, "_id": "a"}
    assert taken.take() == {}  # every call above took the fast paths
