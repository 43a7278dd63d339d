"""On the embedded store a cached key lookup reads nothing, yet every write is seen at once.

The store keeps a write generation per collection; the keyring serves a cached site without a
read only while the generation of `sites` is the one it recorded. These tests check that every
way of writing moves it, and that lookups stay correct across rotations, transactions, several
wrappers over the same data, and writes still in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from config import Settings
from documents.accounts import AuthenticatedUser
from documents.sites import KeyHasher, SiteKeyring, new_api_key, update_site
from documents.store import ASCENDING, Bucket, Collection, Store
from privacy.sealing import SecretSealer

ORGANIZATION = "org-1"


@pytest.fixture
def embedded(store: Store) -> Store:
    """The test's store, when it is the embedded one (the generation exists only there)."""
    if not store.embedded:
        pytest.skip("write generations exist only on the embedded store")
    return store


@pytest.fixture
def hasher(settings: Settings) -> KeyHasher:
    """The API-key hasher the keyrings use."""
    return KeyHasher(settings.secret_key)


def _keyring(store: Store, settings: Settings) -> SiteKeyring:
    return SiteKeyring(store, KeyHasher(settings.secret_key), SecretSealer(settings.master_key))


@pytest.fixture
def keyring(embedded: Store, settings: Settings) -> SiteKeyring:
    """A keyring on the embedded store."""
    return _keyring(embedded, settings)


@pytest.fixture
async def site(keyring: SiteKeyring) -> tuple[dict[str, Any], str]:
    """A site (as stored) and its API key."""
    owner = AuthenticatedUser("user-1", "account-1", "owner@example.com",
                              {ORGANIZATION: "owner"}, "family-1")
    created, keys = await keyring.create_site(owner, ORGANIZATION, "shop",
                                              ["https://shop.example"], {})
    return created, keys.api_key


def _record_calls(store: Store) -> list[tuple[str, str]]:
    """Start recording the store's operations; returns the live list of (collection, op)."""
    store.faults.record_calls = True
    store.faults.calls.clear()
    return store.faults.calls


def _sites_calls(calls: list[tuple[str, str]]) -> list[str]:
    return [operation for collection, operation in calls if collection == "sites"]


# A cached lookup reads nothing -----------------------------------------------------------------


async def test_a_cached_key_lookup_on_the_embedded_store_reads_nothing(
        embedded: Store, keyring: SiteKeyring, site: tuple[dict[str, Any], str]):
    stored, api_key = site
    first = await keyring.site_for_api_key(api_key)
    first_public = await keyring.site_for_public_key(stored["publicKey"])
    calls = _record_calls(embedded)

    again = await keyring.site_for_api_key(api_key)
    again_public = await keyring.site_for_public_key(stored["publicKey"])
    # Writes to other collections do not make the cached sites doubtful.
    await embedded.collection("visitors").insert_one({"_id": "v-1"})
    third = await keyring.site_for_api_key(api_key)

    assert first is not None and first["_id"] == stored["_id"]
    assert again is first and third is first and again_public is first_public
    assert _sites_calls(calls) == []


async def test_an_unknown_key_is_still_looked_up_every_time(
        embedded: Store, keyring: SiteKeyring, site: tuple[dict[str, Any], str]):
    calls = _record_calls(embedded)
    for _ in range(3):
        assert await keyring.site_for_api_key(new_api_key()) is None
    assert _sites_calls(calls) == ["find_one"] * 3


# Every write to a site is seen at once ---------------------------------------------------------


async def test_a_rotated_key_is_refused_and_the_new_one_accepted_at_once(
        keyring: SiteKeyring, site: tuple[dict[str, Any], str]):
    stored, old_key = site
    cached = await keyring.site_for_api_key(old_key)
    assert await keyring.site_for_public_key(stored["publicKey"]) is not None

    rotated, new_key = await keyring.rotate_api_key(cached, grace_seconds=60)

    assert await keyring.site_for_api_key(old_key) is None
    renewed = await keyring.site_for_api_key(new_key)
    assert renewed is not None and renewed["apiKeyHash"] == rotated["apiKeyHash"]
    by_public_key = await keyring.site_for_public_key(stored["publicKey"])
    assert by_public_key["apiKeyHash"] == rotated["apiKeyHash"]


async def _renamed_by_update_site(store: Store, site_id: str) -> None:
    owner = AuthenticatedUser("user-1", "account-1", "owner@example.com",
                              {ORGANIZATION: "owner"}, "family-1")
    current = await store.collection("sites").find_one({"_id": site_id})
    await update_site(store, owner, current, {"name": "renamed"})


async def _renamed_by_update_one(store: Store, site_id: str) -> None:
    await store.collection("sites").update_one(
        {"_id": site_id}, {"$set": {"name": "renamed"}, "$inc": {"revision": 1}})


async def _renamed_by_update_many(store: Store, site_id: str) -> None:
    await store.collection("sites").update_many(
        {"organizationId": ORGANIZATION}, {"$set": {"name": "renamed"}, "$inc": {"revision": 1}})


async def _renamed_by_find_one_and_update(store: Store, site_id: str) -> None:
    await store.collection("sites").find_one_and_update(
        {"_id": site_id}, {"$set": {"name": "renamed"}, "$inc": {"revision": 1}})


async def _renamed_by_replace_one(store: Store, site_id: str) -> None:
    sites = store.collection("sites")
    current = await sites.find_one({"_id": site_id})
    await sites.replace_one({"_id": site_id}, {**current, "name": "renamed",
                                               "revision": current["revision"] + 1})


async def _renamed_by_aggregate_out(store: Store, site_id: str) -> None:
    current = await store.collection("sites").find_one({"_id": site_id})
    await store.collection("drafts").insert_one({**current, "name": "renamed",
                                                 "revision": current["revision"] + 1})
    await store.collection("drafts").aggregate([{"$match": {}}, {"$out": "sites"}]).to_list(None)


async def _deleted_by_delete_one(store: Store, site_id: str) -> None:
    await store.collection("sites").delete_one({"_id": site_id})


async def _deleted_by_delete_many(store: Store, site_id: str) -> None:
    await store.collection("sites").delete_many({"organizationId": ORGANIZATION})


async def _deleted_by_find_one_and_delete(store: Store, site_id: str) -> None:
    await store.collection("sites").find_one_and_delete({"_id": site_id})


SITE_WRITES: dict[str, tuple[Callable[[Store, str], Awaitable[None]], str | None]] = {
    "update_site": (_renamed_by_update_site, "renamed"),
    "update_one": (_renamed_by_update_one, "renamed"),
    "update_many": (_renamed_by_update_many, "renamed"),
    "find_one_and_update": (_renamed_by_find_one_and_update, "renamed"),
    "replace_one": (_renamed_by_replace_one, "renamed"),
    "aggregate $out": (_renamed_by_aggregate_out, "renamed"),
    "delete_one": (_deleted_by_delete_one, None),
    "delete_many": (_deleted_by_delete_many, None),
    "find_one_and_delete": (_deleted_by_find_one_and_delete, None),
}


@pytest.mark.parametrize("write", list(SITE_WRITES))
async def test_any_write_to_a_site_is_seen_by_the_next_lookup(
        embedded: Store, keyring: SiteKeyring, site: tuple[dict[str, Any], str], write: str):
    stored, api_key = site
    assert (await keyring.site_for_api_key(api_key))["name"] == "shop"
    assert await keyring.site_for_public_key(stored["publicKey"]) is not None
    change, expected_name = SITE_WRITES[write]

    await change(embedded, stored["_id"])

    by_api_key = await keyring.site_for_api_key(api_key)
    by_public_key = await keyring.site_for_public_key(stored["publicKey"])
    if expected_name is None:
        assert by_api_key is None and by_public_key is None
    else:
        assert by_api_key["name"] == by_public_key["name"] == expected_name


# Transactions ----------------------------------------------------------------------------------


async def _lookups_while_a_transaction_rotates_the_key(
        store: Store, keyring: SiteKeyring, hasher: KeyHasher, site_id: str, old_key: str,
        *, abort: bool) -> str:
    """Rotate the key inside a transaction; look both keys up while it is open.

    The lookups run in a task started before the transaction, as another request would: the
    embedded store has no isolation, so they see (and cache) the uncommitted rotation.
    """
    new_key = new_api_key()
    rotated, looked_up = asyncio.Event(), asyncio.Event()

    async def lookups_of_another_request() -> tuple[Any, Any]:
        await rotated.wait()
        seen = (await keyring.site_for_api_key(old_key), await keyring.site_for_api_key(new_key))
        looked_up.set()
        return seen

    other_request = asyncio.create_task(lookups_of_another_request())

    async def work(session: Any) -> None:
        await store.collection("sites").update_one(
            {"_id": site_id}, {"$set": {"apiKeyHash": hasher.digest(new_key)},
                               "$inc": {"revision": 1}}, session=session)
        rotated.set()
        await looked_up.wait()
        if abort:
            raise RuntimeError("abort on purpose")

    if abort:
        with pytest.raises(RuntimeError, match="abort on purpose"):
            await store.transaction(work)
    else:
        await store.transaction(work)
    during = await other_request
    assert during[0] is None and during[1] is not None  # the open rotation was seen and cached
    return new_key


async def test_a_key_seen_inside_an_aborted_transaction_is_refused_after_the_roll_back(
        embedded: Store, keyring: SiteKeyring, hasher: KeyHasher,
        site: tuple[dict[str, Any], str]):
    stored, old_key = site
    assert await keyring.site_for_api_key(old_key) is not None

    new_key = await _lookups_while_a_transaction_rotates_the_key(
        embedded, keyring, hasher, stored["_id"], old_key, abort=True)

    assert await keyring.site_for_api_key(new_key) is None
    restored = await keyring.site_for_api_key(old_key)
    assert restored is not None and restored["revision"] == stored["revision"]


async def test_a_key_rotated_by_a_committed_transaction_is_kept(
        embedded: Store, keyring: SiteKeyring, hasher: KeyHasher,
        site: tuple[dict[str, Any], str]):
    stored, old_key = site
    assert await keyring.site_for_api_key(old_key) is not None

    new_key = await _lookups_while_a_transaction_rotates_the_key(
        embedded, keyring, hasher, stored["_id"], old_key, abort=False)

    assert await keyring.site_for_api_key(old_key) is None
    assert (await keyring.site_for_api_key(new_key))["_id"] == stored["_id"]


async def test_an_aborted_transaction_deleting_a_cached_site_leaves_it_found(
        embedded: Store, keyring: SiteKeyring, site: tuple[dict[str, Any], str]):
    stored, api_key = site
    assert await keyring.site_for_api_key(api_key) is not None

    async def work(session: Any) -> None:
        await embedded.collection("sites").delete_one({"_id": stored["_id"]}, session=session)
        raise RuntimeError("abort on purpose")

    with pytest.raises(RuntimeError):
        await embedded.transaction(work)
    assert (await keyring.site_for_api_key(api_key))["_id"] == stored["_id"]


# Several wrappers over one in-memory database --------------------------------------------------


async def test_a_write_through_another_store_wrapper_is_seen_by_lookups_through_this_one(
        embedded: Store, settings: Settings, site: tuple[dict[str, Any], str]):
    stored, api_key = site
    other = Store(embedded.client, embedded.database.name, embedded=True)
    other_keyring = _keyring(other, settings)
    assert await other_keyring.site_for_api_key(api_key) is not None
    calls = _record_calls(other)
    assert await other_keyring.site_for_api_key(api_key) is not None
    assert _sites_calls(calls) == []  # cached, and nothing read

    await embedded.collection("sites").delete_one({"_id": stored["_id"]})

    assert other.write_generation("sites") == embedded.write_generation("sites")
    assert await other_keyring.site_for_api_key(api_key) is None


# A write still in flight -----------------------------------------------------------------------


async def test_a_lookup_during_a_write_in_flight_does_not_keep_the_old_copy_afterwards(
        embedded: Store, keyring: SiteKeyring, site: tuple[dict[str, Any], str],
        monkeypatch: pytest.MonkeyPatch):
    """A lookup that reads the site while a write has started but not yet changed it caches
    the old copy; once the write finishes, that copy must not be served."""
    stored, api_key = site
    assert await keyring.site_for_api_key(api_key) is not None
    raw_class = type(embedded.collection("sites")._raw)
    update = raw_class.update_one
    release = asyncio.Event()

    async def update_one_after_a_delay(self: Any, *args: Any, **kwargs: Any) -> Any:
        await release.wait()  # as a write queued behind others would
        return await update(self, *args, **kwargs)

    monkeypatch.setattr(raw_class, "update_one", update_one_after_a_delay)
    write = asyncio.create_task(embedded.collection("sites").update_one(
        {"_id": stored["_id"]}, {"$set": {"name": "renamed"}, "$inc": {"revision": 1}}))
    await asyncio.sleep(0)

    during = await keyring.site_for_api_key(api_key)
    release.set()
    await write

    assert during["name"] == "shop"
    assert (await keyring.site_for_api_key(api_key))["name"] == "renamed"


# Every write path moves the generation ---------------------------------------------------------


async def _consume(cursor: Any) -> None:
    await cursor.to_list(None)


#: Every public method of `Collection` that can change a document, with a call of it on
#: "things" (holding _id 1 and 2). A new public method must be listed here or in READS.
WRITES: dict[str, Callable[[Collection], Awaitable[Any]]] = {
    "insert_one": lambda c: c.insert_one({"_id": 10}),
    "insert_many": lambda c: c.insert_many([{"_id": 11}, {"_id": 12}]),
    "update_one": lambda c: c.update_one({"_id": 1}, {"$set": {"n": 5}}),
    "update_many": lambda c: c.update_many({}, {"$set": {"n": 5}}),
    "replace_one": lambda c: c.replace_one({"_id": 1}, {"n": 7}),
    "delete_one": lambda c: c.delete_one({"_id": 1}),
    "delete_many": lambda c: c.delete_many({}),
    "find_one_and_update": lambda c: c.find_one_and_update({"_id": 1}, {"$set": {"n": 5}}),
    "find_one_and_delete": lambda c: c.find_one_and_delete({"_id": 1}),
    "create_index": lambda c: c.create_index([("n", ASCENDING)]),
    "aggregate": lambda c: _consume(c.aggregate([{"$match": {"_id": 1}}, {"$out": "things"}])),
}

#: Every public method of `Collection` that only reads, with a call of it.
READS: dict[str, Callable[[Collection], Awaitable[Any]]] = {
    "find_one": lambda c: c.find_one({"_id": 1}),
    "find": lambda c: _consume(c.find({})),
    "count_documents": lambda c: c.count_documents({}),
    "distinct": lambda c: c.distinct("n"),
    "index_information": lambda c: c.index_information(),
}


def _public_methods(cls: type) -> set[str]:
    return {name for name, value in vars(cls).items()
            if not name.startswith("_") and callable(value)}


def test_every_public_collection_method_is_listed_as_a_write_or_a_read():
    assert _public_methods(Collection) == set(WRITES) | set(READS)
    assert not set(WRITES) & set(READS)


class _GenerationSpy:
    """Stands in for a raw collection: notes the store's generation at each call to it."""

    def __init__(self, raw: Any, store: Store, name: str) -> None:
        self._raw, self._store, self._name = raw, store, name
        self.generations_at_calls: list[int | None] = []

    def __getattr__(self, attribute: str) -> Any:
        target = getattr(self._raw, attribute)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            self.generations_at_calls.append(self._store.write_generation(self._name))
            return target(*args, **kwargs)

        return call


@pytest.fixture
async def things(embedded: Store) -> Collection:
    """The collection "things" holding _id 1 and 2."""
    collection = embedded.collection("things")
    await collection.insert_many([{"_id": 1, "n": 1}, {"_id": 2, "n": 2}])
    return collection


@pytest.mark.parametrize("method", list(WRITES))
async def test_every_collection_write_moves_the_generation_before_and_after_it(
        embedded: Store, things: Collection, method: str, monkeypatch: pytest.MonkeyPatch):
    spy = _GenerationSpy(things._raw, embedded, "things")
    monkeypatch.setattr(things, "_raw", spy)
    before = embedded.write_generation("things")

    await WRITES[method](things)

    during = spy.generations_at_calls[-1]
    after = embedded.write_generation("things")
    assert None not in (before, during, after)
    assert before != during != after != before


@pytest.mark.parametrize("method", list(READS))
async def test_a_read_leaves_the_generation_as_it_was(
        embedded: Store, things: Collection, method: str):
    before = embedded.write_generation("things")
    await READS[method](things)
    await _consume(things.aggregate([{"$match": {}}, {"$sort": {"n": 1}}]))
    assert embedded.write_generation("things") == before


async def test_an_aggregation_writing_elsewhere_moves_that_collection_s_generation(
        embedded: Store, things: Collection):
    before = embedded.write_generation("copies")
    await _consume(things.aggregate([{"$match": {}}, {"$out": "copies"}]))
    assert embedded.write_generation("copies") != before


@pytest.mark.parametrize("abort", [True, False])
async def test_a_transaction_s_writes_and_its_roll_back_move_the_generation(
        embedded: Store, things: Collection, abort: bool):
    generations = [embedded.write_generation("things")]

    async def work(session: Any) -> None:
        await things.update_one({"_id": 1}, {"$set": {"n": 9}}, session=session)
        generations.append(embedded.write_generation("things"))
        if abort:
            raise RuntimeError("abort on purpose")

    if abort:
        with pytest.raises(RuntimeError):
            await embedded.transaction(work)
    else:
        await embedded.transaction(work)
    generations.append(embedded.write_generation("things"))

    assert generations[0] != generations[1]
    assert (generations[1] != generations[2]) is abort  # only a roll-back writes again
    assert (await things.find_one({"_id": 1}))["n"] == (1 if abort else 9)


#: Bucket methods that write, with the collections whose generation each must move.
BUCKET_WRITES: dict[str, Callable[[Bucket], Awaitable[Any]]] = {
    "upload": lambda b: b.upload("f-2", "two", b"more", {}),
    "delete_where": lambda b: b.delete_where({"_id": "f-1"}),
}
BUCKET_READS = {"indexes", "find_file", "read_chunks", "read"}


def test_every_public_bucket_method_is_listed_as_a_write_or_a_read():
    assert _public_methods(Bucket) == set(BUCKET_WRITES) | BUCKET_READS


@pytest.mark.parametrize("method", list(BUCKET_WRITES))
async def test_every_bucket_write_moves_its_collections_generations(embedded: Store,
                                                                    method: str):
    bucket = embedded.bucket("blobs")
    await bucket.upload("f-1", "one", b"data", {})
    before = [embedded.write_generation(f"blobs.{part}") for part in ("files", "chunks")]
    await BUCKET_WRITES[method](bucket)
    after = [embedded.write_generation(f"blobs.{part}") for part in ("files", "chunks")]
    assert before[0] != after[0] and before[1] != after[1]


# When the generation is unknown ----------------------------------------------------------------


async def test_without_a_generation_every_lookup_reads_the_revision(
        embedded: Store, keyring: SiteKeyring, site: tuple[dict[str, Any], str],
        monkeypatch: pytest.MonkeyPatch):
    """A real MongoDB server answers None: other processes write to it."""
    stored, api_key = site
    monkeypatch.setattr(embedded, "write_generation", lambda collection_name: None)
    first = await keyring.site_for_api_key(api_key)
    calls = _record_calls(embedded)

    for _ in range(3):
        assert await keyring.site_for_api_key(api_key) is first
    assert _sites_calls(calls) == ["find_one"] * 3

    # A change that moves no generation (as another process's would) is still seen.
    await embedded.database["sites"].update_one(
        {"_id": stored["_id"]}, {"$set": {"name": "renamed"}, "$inc": {"revision": 1}})
    assert (await keyring.site_for_api_key(api_key))["name"] == "renamed"


async def test_a_collection_with_a_ttl_index_has_no_generation(embedded: Store):
    """Its documents expire during reads, without a write to count."""
    sessions = embedded.collection("sessions")
    await sessions.insert_one({"_id": 1})
    assert embedded.write_generation("sessions") is not None
    await sessions.create_index([("expiresAt", ASCENDING)], expireAfterSeconds=0)
    assert embedded.write_generation("sessions") is None


async def test_a_real_server_store_has_no_generation(settings: Settings):
    """Built as `open_store` builds one for a MONGODB_URI (no connection is made)."""
    from motor.motor_asyncio import AsyncIOMotorClient

    client = AsyncIOMotorClient("mongodb://127.0.0.1:1", connect=False)
    try:
        real = Store(client, "db", embedded=False)
        assert real.write_generation("sites") is None
    finally:
        client.close()
