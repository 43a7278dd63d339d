"""Webhooks cannot be aimed inside our network (SSRF) unless WEBHOOK_ALLOW_PRIVATE_ADDRESSES."""

from __future__ import annotations

import uuid

import pytest

import server
from documents import notifications
from tests.support.app import Fetch, Tenant

SECRET = "whsec-" + uuid.uuid4().hex


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8080/hook",
    "http://localhost/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.1.2.3/hook",
    "http://[::1]/hook",
    "http://[::ffff:192.168.1.1]/hook",
    "http://100.100.100.200/hook",
    "http://[64:ff9b::7f00:1]/hook",  # NAT64 of 127.0.0.1
    "http://[2002:7f00:1::1]/hook",  # 6to4 of 127.0.0.1
    "http://[2002:a9fe:a9fe::1]/hook",  # 6to4 of the metadata address
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://[::ffff:7f00:1]/hook",
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook",  # Teredo
    "http://[64:ff9b:1::a00:1]/hook",  # local-use NAT64
    "http://0.0.0.0/hook",
])
async def test_a_webhook_url_on_a_private_address_is_refused_naming_the_field(
        fetch: Fetch, tenant: Tenant, url: str):
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications", "PUT",
                         token=tenant.token,
                         json_body={"webhook": {"enabled": True, "url": url, "secret": SECRET}})
    assert answer.code == 422, answer
    assert answer.json()["error"]["field"] == "webhook.url"


async def test_a_webhook_url_on_a_public_address_is_accepted(fetch: Fetch, tenant: Tenant):
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications", "PUT",
                         token=tenant.token,
                         json_body={"webhook": {"enabled": True, "url": "https://93.184.215.14/x",
                                                "secret": SECRET}})
    assert answer.code == 200, answer


async def test_a_webhook_host_that_turns_private_after_saving_is_refused_at_delivery(
        fetch: Fetch, deps: server.Deps, tenant: Tenant):
    site = await deps.store.collection("sites").find_one({"_id": tenant.site_id})
    # Saved while allowed: the same as a name whose DNS answer changed after it was checked.
    await notifications.save_channels(
        deps.store, deps.sealer, site,
        {"webhook": {"enabled": True, "url": "http://127.0.0.1:9/hook", "secret": SECRET}})
    await deps.notifier.error_opened(tenant.site_id, {
        "_id": str(uuid.uuid4()), "fingerprint": "fp", "message": "boom", "occurrenceCount": 1,
        "status": "open"}, reopened=False)
    assert await deps.notifier.drain(within=60)
    log = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications/deliveries?status=failed",
                      token=tenant.token)
    [entry] = log.json()["deliveries"]
    assert entry["lastError"].startswith("DeliveryFailed: refused")


@pytest.fixture
def settings_env(settings_env: dict[str, str]) -> dict[str, str]:
    """Fast retries, so that the refused delivery gives up within the test."""
    return {**settings_env, "NOTIFY_MAX_ATTEMPTS": "2", "NOTIFY_RETRY_SECONDS": "0.02"}
