"""Key lookups keep sites per process, and still see every change made by any process at once."""

from __future__ import annotations

import asyncio

from config import Settings
from documents import store as store_module
from documents.sites import KeyHasher, SiteKeyring
from privacy.sealing import SecretSealer
from tests.support.app import Fetch, Tenant


def _other_process(settings: Settings, deps) -> SiteKeyring:
    """A second keyring on the same database: what another server process would hold."""
    return SiteKeyring(deps.store, KeyHasher(settings.secret_key),
                       SecretSealer(settings.master_key))


async def test_a_repeated_lookup_is_served_from_the_cache(settings: Settings, deps,
                                                          tenant: Tenant):
    keyring = _other_process(settings, deps)
    first = await keyring.site_for_api_key(tenant.api_key)
    again = await keyring.site_for_api_key(tenant.api_key)
    assert first is not None and first["_id"] == tenant.site_id
    assert again is first


async def test_a_key_rotated_by_another_process_stops_at_once(
        settings: Settings, deps, fetch: Fetch, tenant: Tenant):
    keyring = _other_process(settings, deps)
    public_key = (await keyring.site_for_api_key(tenant.api_key))["publicKey"]
    assert await keyring.site_for_public_key(public_key) is not None
    rotated = await fetch(f"/api/v1/sites/{tenant.site_id}/api-key/rotate", "POST",
                          token=tenant.token)
    assert rotated.code == 200
    assert await keyring.site_for_api_key(tenant.api_key) is None
    renewed = await keyring.site_for_api_key(rotated.json()["apiKey"])
    assert renewed is not None and renewed["_id"] == tenant.site_id
    # The public key did not change, but the site did: the cached copy is not served.
    assert (await keyring.site_for_public_key(public_key))["apiKeyHash"] == renewed["apiKeyHash"]


async def test_a_setting_changed_by_another_process_applies_to_the_next_request(
        settings: Settings, deps, fetch: Fetch, tenant: Tenant):
    keyring = _other_process(settings, deps)
    before = await keyring.site_for_api_key(tenant.api_key)
    assert before["settings"]["recordings"] is True
    changed = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", token=tenant.token,
                          json_body={"settings": {"recordings": False}})
    assert changed.code == 200
    after = await keyring.site_for_api_key(tenant.api_key)
    assert after["settings"]["recordings"] is False


async def test_an_unknown_key_finds_nothing(settings: Settings, deps,
                                                                  tenant: Tenant):
    keyring = _other_process(settings, deps)
    assert await keyring.site_for_api_key("sk_" + "0" * 40) is None
    assert await keyring.site_for_public_key("pk_unknown") is None
    assert await keyring.site_for_public_key("not-a-public-key") is None


async def test_the_cache_is_bounded(settings: Settings, deps, tenant: Tenant, monkeypatch):
    keyring = _other_process(settings, deps)
    monkeypatch.setattr(SiteKeyring, "CACHED_SITES", 1)
    site = await keyring.site_for_api_key(tenant.api_key)
    await keyring.site_for_public_key(site["publicKey"])
    # The public-key entry pushed out the API-key entry: the next lookup reads the site anew.
    assert await keyring.site_for_api_key(tenant.api_key) is not site


async def test_concurrent_lookups_of_a_stale_site_all_finish(
        settings: Settings, deps, fetch: Fetch, tenant: Tenant, monkeypatch):
    """On a real server every read yields to other requests; they must not trip over the cache."""
    keyring = _other_process(settings, deps)
    assert await keyring.site_for_api_key(tenant.api_key) is not None
    rotated = await fetch(f"/api/v1/sites/{tenant.site_id}/api-key/rotate", "POST",
                          token=tenant.token)
    new_key = rotated.json()["apiKey"]
    assert await keyring.site_for_api_key(new_key) is not None
    changed = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", token=tenant.token,
                          json_body={"settings": {"recordings": False}})
    assert changed.code == 200
    read = store_module.Collection.find_one

    async def find_one_yielding(self, *args, **kwargs):
        await asyncio.sleep(0)  # as a network round trip would
        return await read(self, *args, **kwargs)

    monkeypatch.setattr(store_module.Collection, "find_one", find_one_yielding)
    old_and_new = await asyncio.gather(*(keyring.site_for_api_key(key)
                                         for key in [tenant.api_key, new_key] * 5))
    assert old_and_new[::2] == [None] * 5
    assert all(site["settings"]["recordings"] is False for site in old_and_new[1::2])
