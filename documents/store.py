"""The one place that talks to the MongoDB driver.

`Store` owns the client, the database, the GridFS buckets and `transaction()`. Every other
module reaches collections through `Store.collection()`, which hands out a `Collection` proxy:

* inside a transaction, every operation must carry that transaction's session; one that does not
  raises `TransactionSessionMissing` on both back-ends, so a forgotten ``session=`` is a loud test
  failure rather than a silent write outside the transaction on a real replica set;
* on the embedded store (mongomock-motor has no sessions) the proxy strips the session and keeps
  a journal of pre-images, so an aborted transaction restores every touched document;
* mongomock-motor computes every answer on the thread that awaits it, so the proxy runs its
  operations on a thread of their own (`EmbeddedEngine`), as a driver waits on a server: a long
  piece of work (a fold, a purge) over a large collection then never holds the event loop, and
  every request with it. Embedded transactions take turns (`Store.transaction`), so one whose
  operations suspend is still isolated from the others; a read outside a transaction may see
  one half-way, which a replica set never shows (decision "Issue 38: the embedded store off
  the event loop" in docs/decisions.md).

The embedded store is mongomock-motor as shipped: nothing here patches or reaches into it.

Moving from Motor to PyMongo's async client must stay a change inside this package.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import copy
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import pymongo
from bson import ObjectId
from pymongo.errors import (
    BulkWriteError,
    CollectionInvalid,
    ConnectionFailure,
    DuplicateKeyError,
    OperationFailure,
    PyMongoError,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = [
    "AlreadyStored",
    "Bucket",
    "Collection",
    "DuplicateKeyError",
    "Index",
    "IndexBuildInTransaction",
    "Store",
    "TransactionSessionMissing",
    "TemporaryStoreError",
    "is_temporary_store_error",
]

ASCENDING = pymongo.ASCENDING
DESCENDING = pymongo.DESCENDING


class TransactionSessionMissing(RuntimeError):
    """An operation ran inside `Store.transaction()` without passing its session."""


class IndexBuildInTransaction(RuntimeError):
    """An index was created inside `Store.transaction()`; indexes are built at start-up."""


class AlreadyStored(Exception):
    """An idempotent write inside a transaction found its key taken: an earlier attempt stored it.

    Outside a transaction such a write just reports False. Inside one, the colliding write has
    already aborted the transaction on the server, so nothing more may run in it: this exception
    unwinds it (undoing the request's earlier writes) and tells the caller after the abort.
    """


class TemporaryStoreError(ConnectionFailure):
    """The database could not be reached or timed out; the caller may retry."""


def is_temporary_store_error(exc: BaseException) -> bool:
    """True for failures worth retrying: connection loss, timeouts, transient transaction labels."""
    if isinstance(exc, ConnectionFailure):
        return True
    if isinstance(exc, PyMongoError) and hasattr(exc, "has_error_label"):
        return exc.has_error_label("TransientTransactionError") or exc.has_error_label(
            "RetryableWriteError"
        )
    return False


@dataclass(frozen=True)
class Index:
    """An index a collection family declares next to its queries."""

    collection: str
    keys: tuple[tuple[str, int], ...]
    unique: bool = False
    name: str | None = None
    expire_after_seconds: int | None = None
    partial_filter: dict[str, Any] | None = None

    def options(self) -> dict[str, Any]:
        """Keyword arguments for `create_index`."""
        options: dict[str, Any] = {"unique": self.unique}
        if self.name:
            options["name"] = self.name
        if self.expire_after_seconds is not None:
            options["expireAfterSeconds"] = self.expire_after_seconds
        if self.partial_filter is not None:
            options["partialFilterExpression"] = self.partial_filter
        return options


class EmbeddedEngine:
    """The thread the embedded store's operations run on, one after another.

    mongomock keeps its collections behind locks of its own, so the thread may share them with
    the process; running every operation here keeps the event loop that serves requests free
    while a large collection is scanned.
    """

    def __init__(self) -> None:
        self._thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="embedded-store")

    async def run(self, operation: Callable[[], Awaitable[T]]) -> T:
        """Await `operation()` on the engine's thread.

        mongomock-motor's coroutines compute their answer and return without suspending, so
        the thread runs each to its end in one step; one that suspended would be a bug here.
        """

        def complete() -> T:
            pending = operation()
            try:
                pending.send(None)  # type: ignore[attr-defined]
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            pending.close()  # type: ignore[attr-defined]
            raise RuntimeError("an embedded store operation suspended")

        return await asyncio.get_running_loop().run_in_executor(self._thread, complete)


_engine: EmbeddedEngine | None = None
_engine_started = threading.Lock()


def embedded_engine() -> EmbeddedEngine:
    """The process's one embedded engine, started on first use."""
    global _engine
    with _engine_started:
        if _engine is None:
            _engine = EmbeddedEngine()
        return _engine


class EmbeddedCursor:
    """A cursor of the embedded store: its chained options are kept, and its documents are
    read on the engine's thread all at once when first asked for."""

    def __init__(self, open_raw: Callable[[], Any]) -> None:
        self._open_raw = open_raw
        self._chained: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def _chain(self, name: str, *args: Any, **kwargs: Any) -> EmbeddedCursor:
        self._chained.append((name, args, kwargs))
        return self

    def sort(self, *args: Any, **kwargs: Any) -> EmbeddedCursor:
        return self._chain("sort", *args, **kwargs)

    def limit(self, *args: Any, **kwargs: Any) -> EmbeddedCursor:
        return self._chain("limit", *args, **kwargs)

    def skip(self, *args: Any, **kwargs: Any) -> EmbeddedCursor:
        return self._chain("skip", *args, **kwargs)

    def batch_size(self, *args: Any, **kwargs: Any) -> EmbeddedCursor:
        return self._chain("batch_size", *args, **kwargs)

    async def to_list(self, length: int | None = None) -> list[Any]:
        async def read() -> list[Any]:
            raw = self._open_raw()
            for name, args, kwargs in self._chained:
                getattr(raw, name)(*args, **kwargs)
            found = await raw.to_list(None)
            return found if length is None else found[:length]

        return await embedded_engine().run(read)

    async def __aiter__(self) -> AsyncIterator[Any]:
        for doc in await self.to_list(None):
            yield doc


class EmbeddedSession:
    """Stands in for a driver session on the embedded store: an undo journal of pre-images."""

    def __init__(self) -> None:
        self.active = True
        # (collection proxy, _id, pre-image or None when the document did not exist)
        self._undo: list[tuple[Collection, Any, dict[str, Any] | None]] = []
        self._seen: set[tuple[int, Any]] = set()

    def holds(self, collection: Collection, doc_id: Any) -> bool:
        """Whether the transaction has changed (or inserted) the document."""
        return (id(collection._raw), repr(doc_id)) in self._seen

    def remember(self, collection: Collection, doc_id: Any,
                 pre_image: dict[str, Any] | None) -> None:
        """Keep the first pre-image of a document; later changes restore to it."""
        key = (id(collection._raw), repr(doc_id))
        if key in self._seen:
            return
        self._seen.add(key)
        self._undo.append((collection, doc_id, copy.deepcopy(pre_image)))

    async def roll_back(self) -> None:
        """Put every touched document back as it was before the transaction."""
        engine = embedded_engine()
        for collection, doc_id, pre_image in reversed(self._undo):
            raw = collection._raw
            if pre_image is None:
                await engine.run(lambda raw=raw, doc_id=doc_id: raw.delete_one({"_id": doc_id}))
            else:
                await engine.run(lambda raw=raw, doc_id=doc_id, pre_image=pre_image:
                                 raw.replace_one({"_id": doc_id}, pre_image, upsert=True))
        self._undo.clear()


#: What runs once a transaction has ended (`Store.after_transaction`).
AfterTransaction = Callable[[], Awaitable[None]]

#: The running transaction of this context: its store, its session, and what runs once it ends.
_active_transaction: contextvars.ContextVar[
    tuple[Store, Any, list[AfterTransaction]] | None
] = contextvars.ContextVar("visitor_service_active_transaction", default=None)

_WRITE_MANY = {"update_many", "delete_many"}


class Collection:
    """A collection as the rest of the code sees it: session-checked and journaled."""

    def __init__(self, store: Store, raw: Any, name: str) -> None:
        self._store = store
        self._raw = raw
        self.name = name

    def _session_for(self, operation: str, session: Any) -> Any:
        """Check the session rule; return what to pass to the driver."""
        active = _active_transaction.get()
        if active is not None and active[0] is self._store and session is not active[1]:
            raise TransactionSessionMissing(
                f"{operation} on {self.name} ran inside a transaction without its session"
            )
        if session is not None and isinstance(session, EmbeddedSession) and not session.active:
            raise TransactionSessionMissing(f"{operation} on {self.name} used an ended session")
        if isinstance(session, EmbeddedSession):
            return None
        return session

    async def _call(self, operation: str, *args: Any, **kwargs: Any) -> Any:
        """Run one of the raw collection's operations (off the event loop when embedded)."""
        method = getattr(self._raw, operation)
        if self._store.embedded:
            return await embedded_engine().run(lambda: method(*args, **kwargs))
        return await method(*args, **kwargs)

    def _cursor(self, operation: str, *args: Any, **kwargs: Any) -> Any:
        """A cursor of the raw collection's (materialised off the event loop when embedded)."""
        method = getattr(self._raw, operation)
        if self._store.embedded:
            return EmbeddedCursor(lambda: method(*args, **kwargs))
        return method(*args, **kwargs)

    @staticmethod
    def _kw(session: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        if session is not None:
            kwargs["session"] = session
        return kwargs

    async def _journal(self, session: Any, filter_: dict[str, Any], many: bool,
                       sort: Any = None) -> None:
        if not isinstance(session, EmbeddedSession):
            return
        if many:
            for doc in await self._cursor("find", filter_).to_list(None):
                session.remember(self, doc["_id"], doc)
        else:
            doc = await self._call("find_one", filter_, sort=sort) if sort else await (
                self._call("find_one", filter_)
            )
            if doc is not None:
                session.remember(self, doc["_id"], doc)

    # Reads -----------------------------------------------------------------------------------

    async def find_one(self, filter_: dict[str, Any] | None = None, *args: Any,
                       session: Any = None, **kwargs: Any) -> dict[str, Any] | None:
        """Find one document."""
        s = self._session_for("find_one", session)
        return await self._call("find_one", filter_ or {}, *args, **self._kw(s, kwargs))

    def find(self, filter_: dict[str, Any] | None = None, *args: Any, session: Any = None,
             **kwargs: Any) -> Any:
        """A cursor over matching documents (async-iterable, `to_list`)."""
        s = self._session_for("find", session)
        return self._cursor("find", filter_ or {}, *args, **self._kw(s, kwargs))

    async def count_documents(self, filter_: dict[str, Any], *, session: Any = None,
                              **kwargs: Any) -> int:
        """Count matching documents."""
        s = self._session_for("count_documents", session)
        return await self._call("count_documents", filter_, **self._kw(s, kwargs))

    def aggregate(self, pipeline: list[dict[str, Any]], *, session: Any = None,
                  **kwargs: Any) -> Any:
        """An aggregation cursor."""
        s = self._session_for("aggregate", session)
        return self._cursor("aggregate", pipeline, **self._kw(s, kwargs))

    async def distinct(self, key: str, filter_: dict[str, Any] | None = None, *,
                       session: Any = None) -> list[Any]:
        """Distinct values of `key` among matching documents."""
        s = self._session_for("distinct", session)
        return await self._call("distinct", key, filter_ or {}, **self._kw(s, {}))

    # Writes ----------------------------------------------------------------------------------

    async def insert_one(self, document: dict[str, Any], *, session: Any = None) -> Any:
        """Insert one document."""
        s = self._session_for("insert_one", session)
        result = await self._call("insert_one", document, **self._kw(s, {}))
        if isinstance(session, EmbeddedSession):
            session.remember(self, result.inserted_id, None)
        return result

    async def insert_many(self, documents: Sequence[dict[str, Any]], *, ordered: bool = True,
                          session: Any = None) -> Any:
        """Insert several documents."""
        s = self._session_for("insert_many", session)
        if isinstance(session, EmbeddedSession):
            for doc in documents:
                doc.setdefault("_id", ObjectId())
                session.remember(self, doc["_id"], None)
        return await self._call("insert_many", list(documents), ordered=ordered,
                                **self._kw(s, {}))

    async def _held_by_a_transaction(self, filter_: dict[str, Any]) -> bool:
        """Whether the running embedded transaction has changed a document this write outside
        it would change: on a replica set such a write waits for that transaction to end."""
        running = self._store.running_embedded_session
        if running is None:
            return False
        if "_id" in filter_ and not isinstance(filter_["_id"], dict):
            return running.holds(self, filter_["_id"])
        found = await self._cursor("find", filter_, {"_id": 1}).to_list(None)
        return any(running.holds(self, doc["_id"]) for doc in found)

    async def _write(self, operation: str, filter_: dict[str, Any], *args: Any,
                     session: Any = None, **kwargs: Any) -> Any:
        if (self._store.embedded and session is None and _active_transaction.get() is None
                and await self._held_by_a_transaction(filter_)):
            # Wait for it, or its roll-back would put back what this write changes.
            async with self._store.embedded_turn():
                return await self._write_now(operation, filter_, *args, session=session,
                                             **kwargs)
        return await self._write_now(operation, filter_, *args, session=session, **kwargs)

    async def _write_now(self, operation: str, filter_: dict[str, Any], *args: Any,
                         session: Any = None, **kwargs: Any) -> Any:
        s = self._session_for(operation, session)
        await self._journal(session, filter_, operation in _WRITE_MANY, kwargs.get("sort"))
        result = await self._call(operation, filter_, *args, **self._kw(s, kwargs))
        if isinstance(session, EmbeddedSession):
            upserted = getattr(result, "upserted_id", None)
            if upserted is not None:
                session.remember(self, upserted, None)
            elif operation.startswith("find_one_and_") and kwargs.get("upsert"):
                # find_one_and_* does not report an upsert; a document now matching that was
                # not journaled before must be new.
                doc = await self._call("find_one", filter_)
                if doc is not None:
                    session.remember(self, doc["_id"], None)
        return result

    async def update_one(self, filter_: dict[str, Any], update: Any, *, upsert: bool = False,
                         session: Any = None, **kwargs: Any) -> Any:
        """Update the first matching document."""
        return await self._write("update_one", filter_, update, upsert=upsert, session=session,
                                 **kwargs)

    async def update_many(self, filter_: dict[str, Any], update: Any, *, upsert: bool = False,
                          session: Any = None, **kwargs: Any) -> Any:
        """Update every matching document."""
        return await self._write("update_many", filter_, update, upsert=upsert, session=session,
                                 **kwargs)

    async def replace_one(self, filter_: dict[str, Any], replacement: dict[str, Any], *,
                          upsert: bool = False, session: Any = None) -> Any:
        """Replace the first matching document."""
        return await self._write("replace_one", filter_, replacement, upsert=upsert,
                                 session=session)

    async def delete_one(self, filter_: dict[str, Any], *, session: Any = None) -> Any:
        """Delete the first matching document."""
        return await self._write("delete_one", filter_, session=session)

    async def delete_many(self, filter_: dict[str, Any], *, session: Any = None) -> Any:
        """Delete every matching document."""
        return await self._write("delete_many", filter_, session=session)

    async def find_one_and_update(self, filter_: dict[str, Any], update: Any, *,
                                  session: Any = None, **kwargs: Any) -> Any:
        """Update one document and return it (before or after, per `return_document`)."""
        return await self._write("find_one_and_update", filter_, update, session=session,
                                 **kwargs)

    async def find_one_and_delete(self, filter_: dict[str, Any], *, session: Any = None,
                                  **kwargs: Any) -> Any:
        """Delete one document and return it."""
        return await self._write("find_one_and_delete", filter_, session=session, **kwargs)

    # Indexes ---------------------------------------------------------------------------------

    async def create_index(self, keys: Sequence[tuple[str, int]], **options: Any) -> str:
        """Create an index if it does not exist (never outside start-up code)."""
        if _active_transaction.get() is not None:
            # mongod refuses most index builds in a transaction; some servers accept them, so
            # the rule is kept here, where every back-end sees it.
            raise IndexBuildInTransaction(f"index on {self.name} built inside a transaction")
        return await self._call("create_index", list(keys), **options)

    async def index_information(self) -> dict[str, Any]:
        """The indexes this collection has."""
        return await self._call("index_information")


class Bucket:
    """A GridFS bucket written in GridFS's own layout (`<name>.files`, `<name>.chunks`).

    Writing the documents directly, instead of through the driver's GridFS API, lets uploads and
    deletes take part in transactions (the driver's API refuses sessions in transactions) and
    works on the embedded store; any GridFS tool still reads the files.
    """

    CHUNK_SIZE = 255 * 1024

    def __init__(self, store: Store, name: str) -> None:
        self.name = name
        self.files = store.collection(f"{name}.files")
        self.chunks = store.collection(f"{name}.chunks")

    def indexes(self) -> list[Index]:
        """The indexes GridFS drivers expect on the two collections."""
        return [
            Index(f"{self.name}.files", (("filename", ASCENDING), ("uploadDate", ASCENDING))),
            Index(f"{self.name}.chunks", (("files_id", ASCENDING), ("n", ASCENDING)), unique=True),
        ]

    async def upload(self, file_id: Any, filename: str, data: bytes, metadata: dict[str, Any],
                     *, session: Any = None) -> None:
        """Store `data` as one file; the files document goes last so readers never see a part.

        Raises DuplicateKeyError when the id is taken, or (after removing its own chunks) when
        the files document collides with a unique index on its metadata, which is how callers
        make uploads idempotent.
        """
        chunks = [
            {"files_id": file_id, "n": n, "data": data[offset:offset + self.CHUNK_SIZE]}
            for n, offset in enumerate(range(0, max(len(data), 1), self.CHUNK_SIZE))
        ]
        if not data:
            chunks = []
        if chunks:
            # A reused file id collides on the unique (files_id, n) index before anything of the
            # existing file is touched; callers give every upload a fresh id.
            try:
                await self.chunks.insert_many(chunks, session=session)
            except BulkWriteError as exc:
                raise DuplicateKeyError(f"file id {file_id!r} is taken", 11000) from exc
        try:
            await self.files.insert_one(
                {
                    "_id": file_id,
                    "length": len(data),
                    "chunkSize": self.CHUNK_SIZE,
                    "uploadDate": datetime.now(UTC),
                    "filename": filename,
                    "metadata": metadata,
                },
                session=session,
            )
        except DuplicateKeyError:
            # Inside a transaction the failed write has already aborted it on the server, and
            # the abort removes the chunks; a clean-up there would only fail (NoSuchTransaction,
            # labelled transient) and make the driver run the whole transaction again.
            if chunks and session is None:
                await self.chunks.delete_many({"files_id": file_id})
            raise

    async def find_file(self, filter_: dict[str, Any], *, session: Any = None
                        ) -> dict[str, Any] | None:
        """The files document matching `filter_`, or None."""
        return await self.files.find_one(filter_, session=session)

    async def read_chunks(self, file_id: Any) -> AsyncIterator[bytes]:
        """Yield the file's bytes chunk by chunk, in order, without holding the whole file."""
        cursor = self.chunks.find({"files_id": file_id}).sort("n", ASCENDING)
        async for chunk in cursor:
            yield bytes(chunk["data"])

    async def read(self, file_id: Any) -> bytes:
        """The whole file (only for small files and tests)."""
        return b"".join([part async for part in self.read_chunks(file_id)])

    async def delete_where(self, filter_: dict[str, Any], *, session: Any = None) -> int:
        """Delete every file matching `filter_` with its chunks; returns how many files."""
        ids = [doc["_id"] async for doc in self.files.find(filter_, {"_id": 1}, session=session)]
        if not ids:
            return 0
        await self.chunks.delete_many({"files_id": {"$in": ids}}, session=session)
        await self.files.delete_many({"_id": {"$in": ids}}, session=session)
        return len(ids)


class Store:
    """The client, the database, the buckets and transactions. Build with `open_store`."""

    def __init__(self, client: Any, database_name: str, *, embedded: bool) -> None:
        self.client = client
        self.database = client[database_name]
        self.embedded = embedded
        self._collections: dict[str, Collection] = {}
        self._buckets: dict[str, Bucket] = {}
        #: Transactions running now; shutdown waits for them (`settle`).
        self._running_transactions = 0
        #: Transactions run, and the times one ran its work again because MongoDB aborted it
        #: (a write conflict or another transient error): the aborts /metrics shows.
        self.transactions_run = 0
        self.transactions_retried = 0
        #: Embedded transactions take turns: their operations suspend (`EmbeddedEngine`), and
        #: without a replica set's isolation two of them would undo each other's writes.
        self._embedded_turns = asyncio.Lock()
        #: The embedded transaction that has the turn, if any.
        self.running_embedded_session: EmbeddedSession | None = None

    def collection(self, name: str) -> Collection:
        """The session-checked proxy for collection `name`."""
        proxy = self._collections.get(name)
        if proxy is None:
            proxy = Collection(self, self.database[name], name)
            self._collections[name] = proxy
        return proxy

    def bucket(self, name: str) -> Bucket:
        """The GridFS bucket `name`."""
        bucket = self._buckets.get(name)
        if bucket is None:
            bucket = Bucket(self, name)
            self._buckets[name] = bucket
        return bucket

    async def transaction(self, work: Callable[[Any], Awaitable[T]]) -> T:
        """Run `work(session)` all-or-nothing; every operation in it must pass `session`.

        On a replica set this is the driver's `with_transaction`, which also retries transient
        errors. On the embedded store the journal restores pre-images on any exception.
        """
        if _active_transaction.get() is not None:
            raise RuntimeError("transactions do not nest")
        after: list[AfterTransaction] = []
        self._running_transactions += 1
        try:
            return await self._transaction(work, after)
        finally:
            self._running_transactions -= 1
            self.transactions_run += 1
            for action in after:
                await action()

    def embedded_turn(self) -> asyncio.Lock:
        """The turn embedded transactions take (a write waiting for one holds it too)."""
        return self._embedded_turns

    async def after_transaction(self, session: Any, action: AfterTransaction) -> None:
        """Run `action` once the transaction `session` belongs to has ended, or now when
        `session` is None (the write it follows is already final).

        For what must come after a write is visible to every reader, such as telling other
        processes about it: until the commit, readers outside the transaction see the old data.
        It runs after a roll-back too (and once for each attempt the driver made), so it must
        be harmless when nothing changed, and it must not raise.
        """
        active = _active_transaction.get()
        if session is None:
            if active is not None and active[0] is self:
                raise TransactionSessionMissing(
                    "after_transaction ran inside a transaction without its session")
            await action()
            return
        if active is None or active[0] is not self or active[1] is not session:
            raise TransactionSessionMissing(
                "after_transaction was given a session that is not the running transaction's")
        active[2].append(action)

    async def settle(self) -> None:
        """Wait, up to ten seconds, until no transaction of this store is running.

        A request still being served when the server stops keeps its transaction open; closing
        the client or dropping data under it would leave that transaction holding its locks.
        """
        for _ in range(1000):
            if not self._running_transactions:
                return
            await asyncio.sleep(0.01)

    async def _transaction(self, work: Callable[[Any], Awaitable[T]],
                           after: list[AfterTransaction]) -> T:
        if self.embedded:
            async with self._embedded_turns:
                session = EmbeddedSession()
                self.running_embedded_session = session
                token = _active_transaction.set((self, session, after))
                try:
                    result = await work(session)
                except BaseException:
                    session.active = False
                    _active_transaction.reset(token)
                    await session.roll_back()
                    raise
                finally:
                    self.running_embedded_session = None
                # A commit changes nothing: the writes are already in place.
                session.active = False
                _active_transaction.reset(token)
                return result
        attempts = 0

        async def attempt(session: Any) -> T:
            nonlocal attempts
            attempts += 1
            return await work(session)

        async with await self.client.start_session() as session:
            token = _active_transaction.set((self, session, after))
            try:
                return await session.with_transaction(attempt)
            finally:
                _active_transaction.reset(token)
                self.transactions_retried += max(attempts - 1, 0)

    async def write_once(self, work: Callable[[Any], Awaitable[Any]]) -> bool:
        """Run a request's writes all-or-nothing; False when they were stored before.

        `work(session)` raises `AlreadyStored` when its idempotency key is taken, which leaves
        nothing of this attempt behind.
        """
        try:
            await self.transaction(work)
        except AlreadyStored:
            return False
        return True

    async def ensure_collections(self, names: Iterable[str]) -> None:
        """Create the collections that do not exist yet (a transaction must never create one)."""
        existing = set(await self.database.list_collection_names())
        for name in names:
            if name in existing:
                continue
            try:
                await self.database.create_collection(name)
            except CollectionInvalid:
                pass  # another process created it meanwhile

    async def ensure_indexes(self, indexes: Iterable[Index]) -> None:
        """Create every declared index; idempotent, and never drops one."""
        for index in indexes:
            await self.collection(index.collection).create_index(index.keys, **index.options())

    async def ping(self) -> None:
        """Raise when the database does not answer."""
        await self.client.admin.command("ping")

    async def collection_names(self) -> list[str]:
        """Every collection that holds documents."""
        return sorted(await self.database.list_collection_names())

    def close(self) -> None:
        """Close the client."""
        self.client.close()


def open_store(mongodb_uri: str, database_name: str) -> Store:
    """A store on MongoDB when a URI is given, otherwise on the embedded in-memory engine."""
    if mongodb_uri:
        from motor.motor_asyncio import AsyncIOMotorClient

        # The driver's DEBUG records carry whole commands, documents and filters included:
        # visitor data. Logs outlive erasure, so they never get them, whatever LOG_LEVEL says.
        driver_log = logging.getLogger("pymongo")
        driver_log.setLevel(max(driver_log.level, logging.INFO))

        client = AsyncIOMotorClient(
            mongodb_uri, tz_aware=True, serverSelectionTimeoutMS=5000, uuidRepresentation="standard"
        )
        return Store(client, database_name, embedded=False)
    from mongomock_motor import AsyncMongoMockClient

    return Store(AsyncMongoMockClient(tz_aware=True), database_name, embedded=True)


async def retry_temporary(work: Callable[[], Awaitable[T]], attempts: int = 3,
                          first_delay: float = 0.05) -> T:
    """Run `work`, retrying temporary store errors with exponential backoff."""
    delay = first_delay
    for attempt in range(1, attempts + 1):
        try:
            return await work()
        except (ConnectionFailure, OperationFailure) as exc:
            if attempt == attempts or not is_temporary_store_error(exc):
                raise
            await asyncio.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")
