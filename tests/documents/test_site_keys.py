"""Key lookups see every change made by any process at once."""

from __future__ import annotations

from config import Settings
from documents.sites import KeyHasher, SiteKeyring
from privacy.sealing import SecretSealer
from privacy.statements import derive_statement_key
from tests.support.app import Fetch, Tenant


def _other_process(settings: Settings, deps) -> SiteKeyring:
    """A second keyring on the same database: what another server process would hold."""
    return SiteKeyring(deps.store, KeyHasher(settings.secret_key),
                       SecretSealer(settings.master_key), derive_statement_key)


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
    # The public key did not change, but the site did: the lookup sees the new one.
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
