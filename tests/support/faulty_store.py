"""Fault injection and call recording for tests: a wrapper around a `Store` that production
never sees.

`FaultyStore(store, plan)` hands out the wrapped store's collections, each operation first passing
through `plan`: recorded when `plan.record_calls` is on, held for a while or failed when the plan
says so. Buckets are
built over those collections, so a GridFS upload can fail half-way. Everything else
(`transaction()`, `write_once()`, the client, closing) is the wrapped store's own, so the session
rule and the embedded journal behave exactly as in production. Build an app on it by passing it
where `server.build_deps(settings, store=...)` takes a store; the `faults` fixture does that.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pymongo.errors import ConnectionFailure

from documents.store import Bucket, Collection, Store

#: The operations a plan sees: every read and write of `documents.store.Collection`.
OPERATIONS = frozenset({
    "find_one", "find", "count_documents", "aggregate", "distinct", "insert_one", "insert_many",
    "update_one", "update_many", "replace_one", "delete_one", "delete_many",
    "find_one_and_update", "find_one_and_delete",
})


class InjectedFault(ConnectionFailure):
    """A failure raised on purpose by a `FaultPlan`; looks like a dropped connection."""


@dataclass
class _Fault:
    collection: str | None
    operation: str | None
    skip: int
    times: int
    error: Callable[[], BaseException]


@dataclass
class _Pause:
    collection: str
    operation: str
    skip: int
    seconds: float
    #: Set once the paused operation is being held (a test waits on it).
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    done: bool = False


@dataclass
class FaultPlan:
    """Operations that should fail on purpose, matched by collection and operation name."""

    _faults: list[_Fault] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    #: The recorded calls that ran inside a transaction.
    transaction_calls: list[tuple[str, str]] = field(default_factory=list)
    record_calls: bool = False
    _pauses: list[_Pause] = field(default_factory=list)

    def pause(self, collection: str, operation: str, *, seconds: float,
              skip: int = 0) -> asyncio.Event:
        """Hold the matching operation `seconds` before it runs, once, after letting `skip`
        matches through (a folder stopped between its read and its commit, say); returns an
        event set when the operation is reached."""
        held = _Pause(collection, operation, skip, seconds)
        self._pauses.append(held)
        return held.reached

    async def hold(self, collection: str, operation: str) -> None:
        """Wait here if this call is the one a pause names."""
        for held in self._pauses:
            if held.done or (held.collection, held.operation) != (collection, operation):
                continue
            if held.skip > 0:
                held.skip -= 1
                return
            held.done = True
            held.reached.set()
            await asyncio.sleep(held.seconds)
            return

    def fail(
        self,
        collection: str | None = None,
        operation: str | None = None,
        *,
        skip: int = 0,
        times: int = 1,
        error: Callable[[], BaseException] | None = None,
    ) -> None:
        """Fail the matching operation `times` times, after letting `skip` matches through."""
        self._faults.append(
            _Fault(
                collection,
                operation,
                skip,
                times,
                error or (lambda: InjectedFault(f"injected fault on {collection}.{operation}")),
            )
        )

    def clear(self) -> None:
        """Forget every planned fault and recorded call."""
        self._faults.clear()
        self._pauses.clear()
        self.calls.clear()
        self.transaction_calls.clear()

    def check(self, collection: str, operation: str, *, in_transaction: bool = False) -> None:
        """Raise the planned error if this call is one that should fail."""
        if self.record_calls:
            self.calls.append((collection, operation))
            if in_transaction:
                self.transaction_calls.append((collection, operation))
        for fault in self._faults:
            if fault.collection not in (None, collection):
                continue
            if fault.operation not in (None, operation):
                continue
            if fault.skip > 0:
                fault.skip -= 1
                return
            if fault.times > 0:
                fault.times -= 1
                raise fault.error()
            return


class FaultyCollection:
    """A store collection whose operations pass through a fault plan first."""

    def __init__(self, collection: Collection, plan: FaultPlan) -> None:
        self._collection = collection
        self._plan = plan
        self.name = collection.name

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._collection, name)
        if name not in OPERATIONS:
            return attribute
        collection, plan = self.name, self._plan
        # Inside a transaction every operation carries its session (the store refuses one that
        # does not), so a session is what says the call is part of a transaction.
        if inspect.iscoroutinefunction(attribute):
            @functools.wraps(attribute)
            async def checked_async(*args: Any, session: Any = None, **kwargs: Any) -> Any:
                await plan.hold(collection, name)
                plan.check(collection, name, in_transaction=session is not None)
                return await attribute(*args, session=session, **kwargs)
            return checked_async

        @functools.wraps(attribute)
        def checked(*args: Any, session: Any = None, **kwargs: Any) -> Any:
            plan.check(collection, name, in_transaction=session is not None)
            return attribute(*args, session=session, **kwargs)
        return checked


class FaultyStore:
    """`store` with every collection operation passing through `faults` first."""

    def __init__(self, store: Store, faults: FaultPlan | None = None) -> None:
        self.wrapped = store
        self.faults = faults or FaultPlan()

    def collection(self, name: str) -> FaultyCollection:
        """The wrapped store's collection `name`, behind the fault plan."""
        return FaultyCollection(self.wrapped.collection(name), self.faults)

    def bucket(self, name: str) -> Bucket:
        """The GridFS bucket `name`, over this wrapper's collections."""
        return Bucket(self, name)  # type: ignore[arg-type]  # a store in all but name

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)
