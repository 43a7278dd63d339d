"""The differential harness for the embedded engine's fast paths (documents.embedded_engine).

`differences` runs a scenario against two embedded stores, one answering through the fast paths
and one through mongomock's own code, and lists where results, exceptions, stored documents or
the caller's arguments disagree. The strategies draw values and documents as the tests store
them, plus values the fast paths must leave to mongomock.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import re
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from bson import Decimal128, Int64, ObjectId, Timestamp
from bson.tz_util import FixedOffset
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from mongomock.collection import Collection as MongomockCollection
from mongomock_motor import AsyncMongoMockClient

from documents.store import Store, open_store

# Building blocks -------------------------------------------------------------------------------


class OddZone(tzinfo):
    """A time zone of a class the fast paths do not know (they must leave it to mongomock)."""

    def utcoffset(self, dt: datetime | None) -> timedelta:
        return timedelta(minutes=7)

    def dst(self, dt: datetime | None) -> timedelta:
        return timedelta(0)

    def __repr__(self) -> str:
        return "OddZone()"


def run_now(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """The result of a mongomock-motor coroutine, which never suspends: one step finishes it."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    raise AssertionError("a mongomock-motor coroutine suspended")


@contextlib.contextmanager
def generic_engine() -> Iterator[None]:
    """Make every call inside take mongomock's own code (the fast paths' reference)."""
    previous = MongomockCollection._visitor_service_fast_paths
    MongomockCollection._visitor_service_fast_paths = False
    try:
        yield
    finally:
        MongomockCollection._visitor_service_fast_paths = previous


def canon(value: Any) -> Any:
    """A comparable form of `value` that keeps types, key order and NaN (which != itself)."""
    if isinstance(value, dict):
        return (type(value).__name__, [(canon(k), canon(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [canon(v) for v in value])
    if isinstance(value, float) and value != value:
        return ("float", "nan")
    if isinstance(value, ObjectId) and value not in IDS:
        return ("ObjectId", "generated")  # a new document's _id: fresh on each side
    if type(value).__name__ == "UpdateResult":
        raw = dict(value.raw_result)
        raw.pop("connectionId")  # each client numbers its own connection
        return ("UpdateResult", canon(raw), value.acknowledged, value.matched_count,
                value.modified_count, canon(value.upserted_id))
    if type(value).__name__ == "InsertOneResult":
        return ("InsertOneResult", canon(value.inserted_id), value.acknowledged)
    return (type(value).__name__, repr(value))


def outcome(collection: Any, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What calling `method` returned or raised, in comparable form (with an error's code and
    details, which mongomock-motor enriches for duplicate keys)."""
    try:
        return ("returned", canon(run_now(getattr(collection, method)(*args, **kwargs))))
    except Exception as exc:  # the same exceptions are expected on both sides
        return ("raised", type(exc).__name__, str(exc), canon(getattr(exc, "code", None)),
                canon(getattr(exc, "details", None)))


def stored_state(store: Store) -> Any:
    """Every stored document of collection `items` exactly as mongomock keeps it, in order."""
    documents = store.client._store[store.database.name]["items"]._documents
    return canon(list(documents.items()))


@dataclass
class Scenario:
    """Indexes and documents to start with, then operations on collection `items`; each index
    and operation is (method, args, kwargs)."""

    documents: list[dict[str, Any]]
    operations: list[tuple[str, tuple[Any, ...], dict[str, Any]]]
    indexes: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)
    tz_aware: bool = True  # the service's stores are; mongomock's default is not


def embedded_store(name: str, tz_aware: bool = True) -> Store:
    """A fresh embedded store, with the engine's speed-ups installed."""
    open_store("", name)  # installs the embedded engine's speed-ups once per process
    return Store(AsyncMongoMockClient(tz_aware=tz_aware), name, embedded=True)


def differences(scenario: Scenario) -> list[str]:
    """Where the fast paths and mongomock's own code disagree on `scenario` (empty: nowhere)."""
    fast = embedded_store("fast", scenario.tz_aware)
    generic = embedded_store("generic", scenario.tz_aware)
    found: list[str] = []
    setup = [*scenario.indexes, *(("insert_one", (document,), {})
                                  for document in scenario.documents)]
    for method, args, kwargs in setup:
        got = outcome(fast.database["items"], method, *copy.deepcopy((args, kwargs)))
        expected = outcome(generic.database["items"], method, *copy.deepcopy((args, kwargs)))
        if got != expected:
            found.append(f"setup {method}{args!r}: {got!r} != {expected!r}")
    for step, (method, args, kwargs) in enumerate(scenario.operations):
        fast_args = copy.deepcopy((args, kwargs))
        generic_args = copy.deepcopy((args, kwargs))
        with generic_engine():
            expected = outcome(generic.database["items"], method, *generic_args)
        got = outcome(fast.database["items"], method, *fast_args)
        where = f"step {step}: {method}{args!r} {kwargs!r}"
        if got != expected:
            found.append(f"{where}: result {got!r} != {expected!r}")
        if canon(fast_args) != canon(generic_args):
            found.append(f"{where}: arguments left {fast_args!r} != {generic_args!r}")
        if stored_state(fast) != stored_state(generic):
            found.append(f"{where}: stored {stored_state(fast)!r} != {stored_state(generic)!r}")
    return found


def disagreeing_scenario(scenarios: st.SearchStrategy[Scenario]) -> Scenario:
    """A scenario from `scenarios` on which the two engines disagree (hypothesis raises
    NoSuchExample when 2,000 draws hold none): proof that the generated inputs reach a bug."""
    return find(scenarios, lambda scenario: bool(differences(scenario)),
                settings=settings(max_examples=2000, deadline=None, database=None,
                                  phases=[Phase.generate],
                                  suppress_health_check=list(HealthCheck)))


class Taken:
    """Counts calls that went through mongomock's generic machinery (the methods named)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *methods: tuple[Any, str]) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        for owner, name in methods:
            original = getattr(owner, name)
            monkeypatch.setattr(owner, name, self._counting(name, original))

    def _counting(self, name: str, original: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return original(*args, **kwargs)

        return counted

    def take(self) -> collections.Counter[str]:
        """The counts since the last `take`."""
        calls, self.calls = self.calls, collections.Counter()
        return calls


# Strategies --------------------------------------------------------------------------------------

IDS = ["a", "b", 7, ObjectId("0123456789abcdef01234567")]
FIELDS = ["a", "b", "c", "n", "l", "d", "counts"]
ZONES = [None, UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-5, minutes=-30)),
         timezone(timedelta(microseconds=1500)), ZoneInfo("Europe/Berlin"),
         FixedOffset(90, "ninety")]

stored_datetimes = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2100, 1, 1),
                                timezones=st.sampled_from(ZONES))
stored_leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.sampled_from([0, 1, -1, 2]),
    st.floats(allow_nan=True), st.sampled_from([0.5, -0.0, 1.0]), st.text("xyz\u00e9", max_size=3),
    stored_datetimes, st.just(ObjectId("0123456789abcdef01234567")), st.binary(max_size=2))
stored_values = st.recursive(
    stored_leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(FIELDS), inner,
                                                                max_size=3),
    max_leaves=6)
numbers = st.one_of(st.integers(-3, 3), st.floats(-2, 2), st.sampled_from([2**62, float("nan")]))
#: Per field, the values it usually holds (so that more updates fit), or any stored value.
typical_fields = {
    "a": st.dictionaries(st.sampled_from(FIELDS), stored_values, max_size=3),
    "b": st.dictionaries(st.sampled_from(FIELDS), stored_values, max_size=2),
    "d": st.just({"e": {"f": 1}}),
    "c": stored_datetimes,
    "n": numbers,
    "l": st.lists(stored_leaves, max_size=4),
    "counts": st.dictionaries(st.sampled_from(["pageviews", "leads"]), st.integers(0, 9)),
}
stored_documents = st.fixed_dictionaries({}, optional={
    name: st.one_of(usual, usual, stored_values) for name, usual in typical_fields.items()})

odd_values = st.sampled_from([
    (1, 2), collections.OrderedDict(a=1), Int64(5), Decimal128("1.5"), Timestamp(5, 1), 2**70,
    "\ud800", {"k\0": 1}, {1: "int key"}, {"$k": 1, "k.j": [1]}, re.compile("x"),
    datetime(2026, 1, 1, tzinfo=OddZone()), datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=2))),
    [datetime(1, 1, 1, 0, 30)], frozenset({1}), True])

#: No index, a TTL index (documents whose `c` is over a day old expire), a unique index the
#: fast paths must leave to mongomock, and a plain one.
INDEXES: list[list[tuple[str, tuple[Any, ...], dict[str, Any]]]] = [
    [], [], [],
    [("create_index", ("c",), {"expireAfterSeconds": 86400})],
    [("create_index", ("n",), {"unique": True, "sparse": True})],
    [("create_index", ("a.b",), {})],
]


def one_in(n: int) -> st.SearchStrategy[bool]:
    """True about once in `n` draws (`st.integers` would favour its bounds)."""
    return st.sampled_from([False] * (n - 1) + [True])
