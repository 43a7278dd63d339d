"""What mongod would refuse, checked here because a laxer server (or mongomock) accepts it.

SecantusDB and mongomock both accept index options, and index builds inside transactions, that
a production MongoDB refuses. These tests hold every declared index to MongoDB's documented
rules, and keep index builds and collection creation out of transactions.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from typing import Any

import pytest

from derived import store_setup
from documents import accounts
from documents.recordings import SEGMENTS_BUCKET, reject_segment, replace_segment
from documents.store import IndexBuildInTransaction, Store
from tests.support.app import Fetch, Tenant
from tests.support.visitor_data import seed_visitor

DECLARED = store_setup.declared_indexes()
#: Largest compound index MongoDB builds.
MAX_INDEX_FIELDS = 32
#: Most indexes MongoDB keeps on one collection, `_id` included.
MAX_INDEXES_PER_COLLECTION = 64
#: The operators a partialFilterExpression may use (MongoDB 7.0 documentation).
PARTIAL_FILTER_OPERATORS = {"$eq", "$exists", "$gt", "$gte", "$lt", "$lte", "$type", "$and",
                            "$or", "$in"}
#: Largest expireAfterSeconds (a 32-bit signed integer).
MAX_EXPIRE_AFTER_SECONDS = 2**31 - 1
#: Writes that create the collection when it does not exist yet.
CREATING_WRITES = {"insert_one", "insert_many", "update_one", "update_many", "replace_one",
                   "find_one_and_update", "find_one_and_replace"}


def _default_name(keys: tuple[tuple[str, int], ...]) -> str:
    return "_".join(f"{field}_{direction}" for field, direction in keys)


def _operators(expression: Any) -> set[str]:
    if isinstance(expression, dict):
        found = {key for key in expression if key.startswith("$")}
        for value in expression.values():
            found |= _operators(value)
        return found
    if isinstance(expression, list):
        return set().union(*(_operators(item) for item in expression)) if expression else set()
    return set()


@pytest.mark.parametrize("index", DECLARED, ids=lambda i: f"{i.collection}:{_default_name(i.keys)}")
def test_every_declared_index_is_one_mongod_builds(index):
    assert index.collection and not index.collection.startswith("system.")
    assert 0 < len(index.keys) <= MAX_INDEX_FIELDS
    fields = [field for field, _ in index.keys]
    assert len(set(fields)) == len(fields), "a field twice in one index"
    for field, direction in index.keys:
        assert field and not field.startswith("$") and ".." not in field
        assert direction in (1, -1)
    if index.expire_after_seconds is not None:
        # TTL indexes: one date field, never `_id`, within range.
        assert len(index.keys) == 1 and index.keys[0][0] != "_id"
        assert 0 <= index.expire_after_seconds <= MAX_EXPIRE_AFTER_SECONDS
    if index.partial_filter is not None:
        assert _operators(index.partial_filter) <= PARTIAL_FILTER_OPERATORS
    if index.name is not None:
        assert re.fullmatch(r"[A-Za-z0-9_.-]+", index.name)
    if fields == ["_id"]:
        assert not index.unique, "the _id index exists already; options on it are refused"


def test_no_two_declared_indexes_clash_on_one_collection():
    """mongod refuses a second index with the same keys (IndexOptionsConflict) or with the same
    name and other keys (IndexKeySpecsConflict)."""
    keys = Counter((index.collection, index.keys) for index in DECLARED)
    assert [key for key, count in keys.items() if count > 1] == []
    names = Counter((index.collection, index.name or _default_name(index.keys))
                    for index in DECLARED)
    assert [name for name, count in names.items() if count > 1] == []
    per_collection = Counter(index.collection for index in DECLARED)
    assert max(per_collection.values()) < MAX_INDEXES_PER_COLLECTION


async def test_start_up_creates_every_declared_collection(store: Store):
    await store_setup.prepare_store(store)
    await store_setup.prepare_store(store)  # and again, as every process start does
    assert set(store_setup.declared_collections()) <= set(await store.collection_names())


async def test_an_index_build_inside_a_transaction_is_refused_on_every_back_end(store: Store):
    async def work(session: Any) -> None:
        await store.collection("things").insert_one({"_id": 1}, session=session)
        await store.collection("things").create_index([("n", 1)])

    with pytest.raises(IndexBuildInTransaction):
        await store.transaction(work)
    assert await store.collection("things").count_documents({}) == 0


async def test_every_collection_a_transaction_writes_is_created_at_start_up(
        fetch: Fetch, tenant: Tenant, deps, faults):
    """Start-up creates each declared collection; a transaction that wrote to any other one would
    create it inside the transaction, which mongod refuses on older servers and sharded ones."""
    store: Store = deps.store
    seeded = await seed_visitor(fetch, tenant, deps)
    bucket = store.bucket(SEGMENTS_BUCKET)
    segment = await bucket.find_file({"metadata.siteId": tenant.site_id})
    faults.record_calls = True

    await replace_segment(store, segment, str(uuid.uuid4()), b"stripped", console_removed=1)
    replaced = await bucket.find_file({"metadata.replaces": segment["_id"]})
    await reject_segment(store, replaced["_id"], "too large")
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/{seeded.visitor_id}/data",
                         "DELETE", token=tenant.token)
    assert answer.code == 200, answer
    channels = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications", "PUT",
                           token=tenant.token, json_body={"email": {
                               "enabled": True, "recipients": ["owner@shop.example"],
                               "from": "alerts@vs.example", "smtpHost": "127.0.0.1",
                               "smtpPort": 2525, "smtpSecurity": "none"}})
    assert channels.code == 200, channels
    await accounts.create_account(
        store, email=f"second-{uuid.uuid4().hex[:8]}@example.com", password_hash="x",
        display_name="second", account_name="second", organization_name="second org")

    written = {name for name, operation in faults.transaction_calls
               if operation in CREATING_WRITES}
    assert written, "no transaction ran"
    assert written <= set(store_setup.declared_collections())
