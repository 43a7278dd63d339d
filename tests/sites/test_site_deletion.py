"""Deleting a site (issue 43 point 3): an owner types its name, every document of it goes from
every collection (GridFS files with their chunks), another site's data stays as it was, the
deletion is audited, and its keys are dead at once, here and in another process."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from demo import seed_demo_activity
from derived import store_setup
from documents.sites import KeyHasher, SiteKeyring
from privacy.sealing import SecretSealer
from privacy.site_deletion import KEPT, SITE_OWN, delete_site
from privacy.statements import derive_statement_key
from privacy.subject_data import VISITOR_DATA
from realtime.site_changes import RedisSiteChanges
from tests.accounts.test_team import add_member
from tests.support.app import Fetch, Tenant

#: Collections that hold no site's data at all (accounts, sign-in, bookkeeping), and why.
NOT_A_SITES = {
    "accounts": "the paying customer",
    "organizations": "the customer's organizations",
    "users": "people who sign in",
    "memberships": "who belongs to which organization",
    "refresh_tokens": "sign-in sessions",
    "login_throttle": "failed sign-ins, keyed by HMAC",
    "account_links": "invitations and password resets",
    "account_mail_deliveries": "account mail's delivery log",
    "two_factor": "people's second factors",
    "two_factor_requirements": "organizations' sign-in rule",
    "migrations": "which data migrations ran",
    "segments.chunks": "bytes of segments.files, deleted with their file",
    "heatmaps.chunks": "bytes of heatmaps.files, deleted with their file",
}


def _naming(site_id: str) -> dict[str, Any]:
    return {"$or": [{"siteId": site_id}, {"metadata.siteId": site_id}, {"_id": site_id}]}


async def _documents_of(store: Any, site_id: str) -> dict[str, int]:
    """How many documents of every collection name the site, or mention its id anywhere."""
    found: dict[str, int] = {}
    for name in await store.collection_names():
        count = sum([1 async for doc in store.collection(name).find({}) if site_id in repr(doc)])
        if count:
            found[name] = count
    return found


async def _orphan_chunks(store: Any) -> int:
    orphans = 0
    for bucket in ("segments", "heatmaps"):
        files = {doc["_id"] async for doc in store.collection(f"{bucket}.files").find({})}
        orphans += sum([1 async for chunk in store.collection(f"{bucket}.chunks").find({})
                        if chunk["files_id"] not in files])
    return orphans


def test_every_collection_is_walked_kept_with_a_reason_or_holds_no_sites_data():
    walked = {source.collection for source in VISITOR_DATA} | {own.collection
                                                               for own in SITE_OWN}
    placed = walked | set(KEPT) | set(NOT_A_SITES)
    assert set(store_setup.declared_collections()) - placed == set()
    assert walked & set(KEPT) == set()


async def test_deleting_a_site_leaves_no_document_of_it_and_its_keys_answer_401(
        fetch: Fetch, tenant: Tenant, make_tenant, deps):
    bystander = await make_tenant("bystander")
    await seed_demo_activity(deps, tenant.site_id)
    await seed_demo_activity(deps, bystander.site_id)
    before = await _documents_of(deps.store, tenant.site_id)
    for collection in ("visitors", "pageview_buckets", "recordings", "segments.files",
                       "orders", "errors", "site_days", "visit_sessions"):
        assert before.get(collection), collection
    bystanders = await _documents_of(deps.store, bystander.site_id)
    path = f"/api/v1/sites/{tenant.site_id}/deletion"

    wrong = await fetch(path, "POST", token=tenant.token, json_body={"confirmName": "shop"})
    assert wrong.code == 422 and wrong.error_code == "name_mismatch"
    admin = await add_member(fetch, tenant, "admin@example.com", "admin")
    refused = await fetch(path, "POST", token=admin["accessToken"],
                          json_body={"confirmName": "shop site"})
    assert refused.code == 403 and refused.error_code == "owner_required"
    intruder = await fetch(f"/api/v1/sites/{bystander.site_id}/deletion", "POST",
                           token=tenant.token, json_body={"confirmName": "bystander site"})
    assert intruder.code == 404
    assert (await fetch("/ingest/pageviews", "POST", json_body={},
                        headers={"X-Service-Key": tenant.api_key})).code != 401

    deleted = await fetch(path, "POST", token=tenant.token,
                          json_body={"confirmName": "shop site"})
    assert deleted.code == 200, deleted
    assert deleted.json()["removed"]["segments.files"] == before["segments.files"]

    left = await _documents_of(deps.store, tenant.site_id)
    # Only the audit trail names the site now: who deleted it, and how much went.
    assert set(left) == {"audit_log"}, left
    assert await _orphan_chunks(deps.store) == 0
    assert await _documents_of(deps.store, bystander.site_id) == bystanders

    answer = await fetch("/ingest/pageviews", "POST", json_body={},
                         headers={"X-Service-Key": tenant.api_key})
    assert answer.code == 401
    assert await deps.keyring.site_for_public_key(tenant.public_key) is None
    assert (await fetch(f"/api/v1/sites/{tenant.site_id}", token=tenant.token)).code == 404
    export = (await fetch("/auth/me/export.json", token=tenant.token)).json()
    entry = next(e for e in export["auditTrail"] if e["action"] == "site.deleted")
    assert entry["details"]["name"] == "shop site"
    assert entry["details"]["removed"]["visitors"] == before["visitors"]


@pytest.fixture
async def channel_of_changes(redis_url: str) -> AsyncIterator[list[RedisSiteChanges]]:
    opened: list[RedisSiteChanges] = []
    yield opened
    for changes in opened:
        await changes.close()


async def test_a_deleted_sites_keys_are_dead_at_once_in_another_process(
        settings, deps, tenant: Tenant, redis_url: str,
        channel_of_changes: list[RedisSiteChanges]):
    channel = f"test:sites-changed:{secrets.token_hex(6)}"

    async def process() -> SiteKeyring:
        changes = RedisSiteChanges(redis_url, channel=channel)
        channel_of_changes.append(changes)
        await changes.start()
        await asyncio.wait_for(changes.subscribed.wait(), 5)
        return SiteKeyring(deps.store, KeyHasher(settings.secret_key),
                           SecretSealer(settings.master_key), derive_statement_key,
                           changes=changes, cache_size=16, max_age_seconds=600.0)

    here, there = await process(), await process()
    # The other process keeps the site it found by each key.
    assert (await there.site_for_api_key(tenant.api_key))["_id"] == tenant.site_id
    assert (await there.site_for_public_key(tenant.public_key))["_id"] == tenant.site_id

    owner = await deps.auth.authenticate(tenant.token)
    site = await here.site_for_api_key(tenant.api_key)
    await delete_site(deps.store, here, owner, site, "shop site")

    deadline = time.monotonic() + 2
    while await there.site_for_api_key(tenant.api_key) is not None:
        assert time.monotonic() < deadline, "the other process still knows the key"
        await asyncio.sleep(0.01)
    assert await there.site_for_public_key(tenant.public_key) is None
