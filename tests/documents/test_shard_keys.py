"""Ready to shard (issue 30 point 5): every collection has an intended shard key or a reason to
stay unsharded, every unique index of a sharded collection starts with its key, and every
dashboard query shape names the key or says why it may scatter (documents/sharding.py for the
raw families, derived/store_setup.py for the derived layer)."""

from __future__ import annotations

import pytest

import documents
from derived import store_setup
from documents import sharding
from tests.dashboard_api.test_query_indexes import SHAPES

SHARD_KEYS = store_setup.shard_keys()
SCATTERS = store_setup.scatters()


def test_each_layer_places_its_own_collections():
    raw = set(documents.declared_collections())
    assert set(sharding.SHARD_KEYS) == raw
    assert set(store_setup.SHARD_KEYS) == set(store_setup.declared_collections()) - raw
    assert not set(sharding.SCATTERS) & set(store_setup.SCATTERS)


def test_every_collection_has_a_placement_and_every_placement_a_collection():
    declared = set(store_setup.declared_collections())
    assert declared - set(SHARD_KEYS) == set(), "collections without an intended shard key"
    assert set(SHARD_KEYS) - declared == set(), "placements of collections no one declares"
    assert all(placement.why for placement in SHARD_KEYS.values())


@pytest.mark.parametrize("index", [index for index in store_setup.declared_indexes()
                                   if index.unique and SHARD_KEYS[index.collection].key],
                         ids=lambda index: f"{index.collection}:{index.name or index.keys}")
def test_a_sharded_collections_unique_index_starts_with_its_shard_key(index):
    key = SHARD_KEYS[index.collection].key
    assert tuple(field for field, _ in index.keys[:len(key)]) == key


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}:{'+'.join(sorted(s[1]))}:{s[2]}")
def test_a_dashboard_query_names_its_shard_key_or_says_why_it_scatters(shape):
    collection, equal, _then = shape
    key = SHARD_KEYS[collection].key
    if key is None or key[0] in equal:
        return  # unsharded, or sent to the shards holding the key's prefix
    assert (collection, frozenset(equal)) in SCATTERS, f"{shape} scatters over every shard"


def test_every_reason_to_scatter_is_for_a_shape_that_is_issued():
    issued = {(collection, frozenset(equal)) for collection, equal, _ in SHAPES}
    assert set(SCATTERS) <= issued


@pytest.mark.parametrize("collection", [name for name, placement in SHARD_KEYS.items()
                                        if placement.key])
def test_a_shard_key_is_the_prefix_of_a_declared_index(collection):
    """MongoDB shards a collection only on the prefix of an existing index."""
    key = SHARD_KEYS[collection].key
    assert any(tuple(field for field, _ in index.keys[:len(key)]) == key
               for index in store_setup.declared_indexes() if index.collection == collection)
