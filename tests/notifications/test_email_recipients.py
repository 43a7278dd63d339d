"""E-mail channel addresses are single mail-header values: no control characters (issue 28).

A recipient holding U+001D was saved, after which every delivery raised while writing the
message and stayed pending for good.
"""

from __future__ import annotations

import uuid

import pytest

import server
from documents import notifications
from tests.support.app import Fetch, Tenant

CHANNEL = {"enabled": True, "recipients": ["owner@shop.example"], "from": "alerts@vs.example",
           "smtpHost": "127.0.0.1", "smtpPort": 9, "smtpSecurity": "none"}


@pytest.mark.parametrize("address", [
    "owner\u001d@shop.example", "owner@shop.example\u001d", "own\u0000er@shop.example",
    "owner@shop\u007f.example", "owner@shop.example\u0085", "ow\tner@shop.example",
    "owner@shop.example\u2028",
])
@pytest.mark.parametrize("field", ["recipients", "from"])
async def test_an_address_with_a_control_character_is_refused_when_saved(
        fetch: Fetch, deps: server.Deps, tenant: Tenant, address: str, field: str):
    channel = {**CHANNEL, field: [address] if field == "recipients" else address}
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications", "PUT",
                         token=tenant.token, json_body={"email": channel})

    assert answer.code == 422, answer
    assert answer.json()["error"]["field"].startswith("email")
    assert await notifications.channels_for_site(deps.store, tenant.site_id) is None


async def test_a_channel_saved_before_with_such_an_address_is_recorded_failed_not_pending(
        fetch: Fetch, deps: server.Deps, tenant: Tenant):
    site = await deps.store.collection("sites").find_one({"_id": tenant.site_id})
    await notifications.save_channels(deps.store, deps.sealer, site, {"email": {
        **CHANNEL, "recipients": ["owner\u001d@shop.example"]}})
    await deps.notifier.error_opened(tenant.site_id, {
        "_id": str(uuid.uuid4()), "fingerprint": "fp", "message": "boom", "occurrenceCount": 1,
        "status": "open"}, reopened=False)
    assert await deps.notifier.drain(within=30)

    log = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications/deliveries",
                      token=tenant.token)
    [entry] = log.json()["deliveries"]
    assert entry["status"] == "failed"
    assert "header" in entry["lastError"]


@pytest.fixture
def settings_env(settings_env: dict[str, str]) -> dict[str, str]:
    """One attempt, so that the refused delivery gives up at once."""
    return {**settings_env, "NOTIFY_MAX_ATTEMPTS": "1"}
