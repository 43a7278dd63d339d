"""Key lookups keep the sites they found, and every change to a site still applies at once: in
the process that made it at its next request, in the others as soon as Redis brings the news,
and never from what is kept while that news may be missed (issue 30)."""

from __future__ import annotations

import asyncio
import secrets
import time
import types
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio

import server
from config import Settings
from documents import accounts
from documents import sites as site_documents
from documents.sites import KeyHasher, SiteKeyring
from privacy.sealing import SecretSealer
from privacy.statements import derive_statement_key
from realtime.site_changes import InProcessSiteChanges, RedisSiteChanges
from tests.support.app import Fetch, Tenant
from tests.support.faulty_store import FaultPlan
from tests.support.processes import free_port

SHOP = "https://shop.example"
SITE_READ = ("sites", "find_one")


class Unheard:
    """Changes as a subscription would carry them, except that nothing announced comes back:
    what a keyring does with its own change cannot lean on hearing it again."""

    def __init__(self) -> None:
        self.up = True
        self.announced: list[str] = []
        self._listeners: list[Callable[[str | None], None]] = []

    def live(self) -> bool:
        return self.up

    def listen(self, forget: Callable[[str | None], None]) -> None:
        self._listeners.append(forget)

    async def announce(self, site_id: str) -> None:
        self.announced.append(site_id)

    def resubscribed(self) -> None:
        """What a subscription made again tells its listeners."""
        for forget in self._listeners:
            forget(None)


def _keyring(settings: Settings, store: Any, changes: Any, *, cache_size: int = 16,
             max_age_seconds: float = 600.0) -> SiteKeyring:
    """A keyring over `store`: what one server process holds."""
    return SiteKeyring(store, KeyHasher(settings.secret_key), SecretSealer(settings.master_key),
                       derive_statement_key, changes=changes, cache_size=cache_size,
                       max_age_seconds=max_age_seconds)


async def _reads(faults: FaultPlan, lookup: Awaitable[Any]) -> tuple[Any, int]:
    """What the lookup found, and how many times it read `sites`."""
    faults.calls.clear()
    faults.record_calls = True
    try:
        found = await lookup
    finally:
        faults.record_calls = False
    return found, faults.calls.count(SITE_READ)


async def _owner(deps, tenant: Tenant) -> accounts.AuthenticatedUser:
    user = await accounts.load_authenticated_user(deps.store, tenant.user_id, "")
    assert user is not None
    return user


async def _eventually(check: Callable[[], Awaitable[bool]], seconds: float = 5.0) -> None:
    """Poll `check` until it holds, for at most `seconds`."""
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, f"not within {seconds} s"
        await asyncio.sleep(0.01)


# One process ---------------------------------------------------------------------------------


async def test_a_kept_site_is_found_again_without_reading_the_store(
        settings: Settings, deps, tenant: Tenant, faults: FaultPlan):
    keyring = _keyring(settings, deps.store, Unheard())
    first, reads = await _reads(faults, keyring.site_for_api_key(tenant.api_key))
    assert first["_id"] == tenant.site_id and reads == 1
    again, reads = await _reads(faults, keyring.site_for_api_key(tenant.api_key))
    assert again["_id"] == tenant.site_id and reads == 0
    await keyring.site_for_public_key(tenant.public_key)
    by_public_key, reads = await _reads(faults, keyring.site_for_public_key(tenant.public_key))
    assert by_public_key["_id"] == tenant.site_id and reads == 0


async def test_a_key_rotated_here_stops_at_the_next_lookup_and_is_announced_after_the_commit(
        settings: Settings, deps, tenant: Tenant, faults: FaultPlan):
    changes = Unheard()
    keyring = _keyring(settings, deps.store, changes)
    site = await keyring.site_for_api_key(tenant.api_key)

    async def rotate(session: Any) -> tuple[dict[str, Any], str]:
        rotated = await keyring.rotate_api_key(site, 0, session=session)
        assert changes.announced == []  # not before the other processes could read the change
        return rotated

    _, new_key = await deps.store.transaction(rotate)

    assert changes.announced == [tenant.site_id]
    assert await keyring.site_for_api_key(tenant.api_key) is None
    assert (await keyring.site_for_api_key(new_key))["_id"] == tenant.site_id


async def test_a_settings_or_origin_change_made_here_applies_to_the_next_lookup(
        settings: Settings, deps, tenant: Tenant):
    changes = Unheard()
    keyring = _keyring(settings, deps.store, changes)
    site = await keyring.site_for_public_key(tenant.public_key)
    assert site["allowedOrigins"] == [SHOP] and site["settings"]["recordings"] is True
    await keyring.site_for_api_key(tenant.api_key)

    user = await _owner(deps, tenant)
    await deps.store.transaction(lambda session: keyring.update_site(
        user, site, {"allowedOrigins": ["https://moved.example"],
                     "settings": {"recordings": False}}, session=session))

    assert changes.announced == [tenant.site_id]
    moved = await keyring.site_for_public_key(tenant.public_key)
    assert moved["allowedOrigins"] == ["https://moved.example"]
    assert (await keyring.site_for_api_key(tenant.api_key))["settings"]["recordings"] is False


async def test_a_site_deleted_outside_the_keyring_is_found_no_more_once_announced(
        settings: Settings, deps, tenant: Tenant):
    changes = Unheard()
    keyring = _keyring(settings, deps.store, changes)
    assert await keyring.site_for_api_key(tenant.api_key) is not None
    await deps.store.collection(site_documents.COLLECTION).delete_one({"_id": tenant.site_id})

    await keyring.site_changed(tenant.site_id)

    assert changes.announced == [tenant.site_id]
    assert await keyring.site_for_api_key(tenant.api_key) is None
    assert await keyring.site_for_public_key(tenant.public_key) is None


class _ChangedDuringRead:
    """The store, with `during()` run after the next read of `sites` has read and before it
    returns: a change that lands while a lookup's round trip is on its way back."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.during: Callable[[], Awaitable[Any]] | None = None

    def collection(self, name: str) -> Any:
        collection, during = self._store.collection(name), self.during
        if name != site_documents.COLLECTION or during is None:
            return collection
        self.during = None

        async def find_one(*args: Any, **kwargs: Any) -> Any:
            found = await collection.find_one(*args, **kwargs)
            await during()
            return found

        return types.SimpleNamespace(find_one=find_one)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_a_lookup_that_read_before_a_change_does_not_keep_what_it_read(
        settings: Settings, deps, tenant: Tenant):
    changes = InProcessSiteChanges()  # two keyrings of one process hear each other at once
    slow_store = _ChangedDuringRead(deps.store)
    reading, writing = _keyring(settings, slow_store, changes), _keyring(settings, deps.store,
                                                                         changes)
    site = await writing.site_for_api_key(tenant.api_key)
    slow_store.during = lambda: writing.rotate_api_key(site, 0)

    # Read before the rotation: this request still had the old site...
    assert (await reading.site_for_api_key(tenant.api_key))["_id"] == tenant.site_id
    # ...but it was not kept for the next one.
    assert await reading.site_for_api_key(tenant.api_key) is None


async def test_what_was_kept_is_not_used_while_changes_may_be_missed(
        settings: Settings, deps, tenant: Tenant, faults: FaultPlan):
    changes = Unheard()
    keyring = _keyring(settings, deps.store, changes)
    await keyring.site_for_api_key(tenant.api_key)
    changes.up = False
    for _ in range(3):
        found, reads = await _reads(faults, keyring.site_for_api_key(tenant.api_key))
        assert found["_id"] == tenant.site_id and reads == 1
    changes.up = True
    changes.resubscribed()
    _, reads = await _reads(faults, keyring.site_for_api_key(tenant.api_key))
    assert reads == 1  # forgotten when the subscription came back
    _, reads = await _reads(faults, keyring.site_for_api_key(tenant.api_key))
    assert reads == 0


async def test_a_kept_site_is_read_again_once_older_than_the_maximum_age(
        settings: Settings, deps, tenant: Tenant, faults: FaultPlan, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(site_documents, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    keyring = _keyring(settings, deps.store, Unheard(), max_age_seconds=30.0)
    await keyring.site_for_api_key(tenant.api_key)
    now[0] += 29.9
    assert (await _reads(faults, keyring.site_for_api_key(tenant.api_key)))[1] == 0
    now[0] += 0.2
    assert (await _reads(faults, keyring.site_for_api_key(tenant.api_key)))[1] == 1


async def test_the_kept_sites_are_bounded_least_recently_used_first(
        settings: Settings, deps, tenant: Tenant, faults: FaultPlan):
    keyring = _keyring(settings, deps.store, Unheard(), cache_size=1)
    await keyring.site_for_api_key(tenant.api_key)
    await keyring.site_for_public_key(tenant.public_key)  # pushes the API-key lookup out
    assert (await _reads(faults, keyring.site_for_public_key(tenant.public_key)))[1] == 0
    assert (await _reads(faults, keyring.site_for_api_key(tenant.api_key)))[1] == 1


async def test_a_key_that_finds_no_site_is_looked_up_every_time(
        settings: Settings, deps, tenant: Tenant, faults: FaultPlan):
    keyring = _keyring(settings, deps.store, Unheard())
    for _ in range(2):
        assert await _reads(faults, keyring.site_for_api_key("sk_" + "0" * 40)) == (None, 1)
        assert await _reads(faults, keyring.site_for_public_key("pk_unknown")) == (None, 1)
    assert await keyring.site_for_public_key("not-a-public-key") is None


async def test_what_tells_a_process_of_changes_depends_on_where_the_store_is():
    assert isinstance(server.open_site_changes(Settings()), InProcessSiteChanges)
    # MongoDB without Redis: another server or `rotate-key` could change a site unheard.
    assert server.open_site_changes(Settings(mongodb_uri="mongodb://db/?replicaSet=rs0")) is None
    with_redis = server.open_site_changes(Settings(redis_url="redis://127.0.0.1:1/0"))
    assert isinstance(with_redis, RedisSiteChanges)
    await with_redis.close()


# Several processes, over Redis ---------------------------------------------------------------


@pytest.fixture
async def subscribe(redis_url: str) -> AsyncIterator[Callable[..., Awaitable[RedisSiteChanges]]]:
    """Start a process's subscription to this test's own channel; closed afterwards."""
    channel = f"test:sites-changed:{secrets.token_hex(6)}"
    opened: list[RedisSiteChanges] = []

    async def start(url: str = redis_url, *, wait: bool = True) -> RedisSiteChanges:
        changes = RedisSiteChanges(url, channel=channel, min_backoff=0.02, max_backoff=0.1)
        opened.append(changes)
        await changes.start()
        if wait:
            await asyncio.wait_for(changes.subscribed.wait(), 5)
        return changes

    yield start
    for changes in opened:
        await changes.close()


async def test_a_change_made_through_one_process_reaches_another_over_redis(
        settings: Settings, deps, tenant: Tenant, faults: FaultPlan, subscribe):
    here = _keyring(settings, deps.store, await subscribe())
    there = _keyring(settings, deps.store, await subscribe())
    await there.site_for_api_key(tenant.api_key)
    await there.site_for_public_key(tenant.public_key)
    assert (await _reads(faults, there.site_for_api_key(tenant.api_key)))[1] == 0

    site = await here.site_for_api_key(tenant.api_key)
    _, new_key = await deps.store.transaction(
        lambda session: here.rotate_api_key(site, 0, session=session))

    async def old_key_refused() -> bool:
        return await there.site_for_api_key(tenant.api_key) is None

    await _eventually(old_key_refused)
    assert (await there.site_for_api_key(new_key))["_id"] == tenant.site_id

    user = await _owner(deps, tenant)
    site = await here.site_for_api_key(new_key)
    await deps.store.transaction(lambda session: here.update_site(
        user, site, {"allowedOrigins": ["https://moved.example"]}, session=session))

    async def origin_moved() -> bool:
        found = await there.site_for_public_key(tenant.public_key)
        return found["allowedOrigins"] == ["https://moved.example"]

    await _eventually(origin_moved)


async def test_a_keyring_whose_subscription_is_down_reads_the_store_every_time(
        settings: Settings, deps, tenant: Tenant, faults: FaultPlan, subscribe):
    nobody_listens = f"redis://127.0.0.1:{free_port()}/0"
    changes = await subscribe(nobody_listens, wait=False)
    keyring = _keyring(settings, deps.store, changes)
    for _ in range(3):
        found, reads = await _reads(faults, keyring.site_for_api_key(tenant.api_key))
        assert found["_id"] == tenant.site_id and reads == 1
    assert not changes.live()


async def test_a_subscription_made_again_forgets_what_was_kept_before(
        settings: Settings, deps, tenant: Tenant, faults: FaultPlan, subscribe, redis_url: str):
    changes = await subscribe()
    keyring = _keyring(settings, deps.store, changes)
    await keyring.site_for_api_key(tenant.api_key)
    assert (await _reads(faults, keyring.site_for_api_key(tenant.api_key)))[1] == 0

    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        await client.client_kill_filter(_type="pubsub")
    finally:
        await client.aclose()

    async def subscribed_again() -> bool:
        return changes.reconnects == 1 and changes.live()

    await _eventually(subscribed_again)
    # Announcements sent while it was down are lost: what was kept is read again.
    assert (await _reads(faults, keyring.site_for_api_key(tenant.api_key)))[1] == 1


# The service's own requests ------------------------------------------------------------------


class TestTheNextRequest:
    """Through the app, on the production path (REDIS_URL): each change applies to the next
    request, which before it was answered from the site kept by the request before."""

    @pytest.fixture
    def settings_env(self, settings_env: dict[str, str], redis_url: str) -> dict[str, str]:
        return {**settings_env, "REDIS_URL": redis_url}

    @pytest.fixture(autouse=True)
    async def subscribed(self, deps, base_url: str) -> None:
        """The server subscribes as it starts (`base_url`); keeping waits for that."""
        await asyncio.wait_for(deps.site_changes.subscribed.wait(), 5)

    @staticmethod
    async def _pageview(fetch: Fetch, key: str, page: str = "/") -> Any:
        return await fetch("/ingest/pageviews", "POST", headers={"X-Service-Key": key},
                           json_body={"visitorId": "ada", "url": f"{SHOP}{page}"})

    async def _kept(self, fetch: Fetch, tenant: Tenant, faults: FaultPlan) -> None:
        assert (await self._pageview(fetch, tenant.api_key)).code == 200
        answer, reads = await _reads(faults, self._pageview(fetch, tenant.api_key))
        assert answer.code == 200 and reads == 0

    async def test_a_rotated_key_is_refused_at_the_next_request(
            self, fetch: Fetch, tenant: Tenant, faults: FaultPlan):
        await self._kept(fetch, tenant, faults)
        rotated = await fetch(f"/api/v1/sites/{tenant.site_id}/api-key/rotate", "POST",
                              token=tenant.token)
        assert rotated.code == 200
        refused = await self._pageview(fetch, tenant.api_key)
        assert refused.code == 401 and refused.error_code == "invalid_key"
        assert (await self._pageview(fetch, rotated.json()["apiKey"])).code == 200

    async def test_a_deleted_site_is_refused_at_the_next_request(
            self, fetch: Fetch, tenant: Tenant, faults: FaultPlan, deps):
        await self._kept(fetch, tenant, faults)
        await deps.store.collection(site_documents.COLLECTION).delete_one({"_id": tenant.site_id})
        await deps.keyring.site_changed(tenant.site_id)
        assert (await self._pageview(fetch, tenant.api_key)).code == 401

    async def test_an_excluded_url_applies_to_the_next_pageview(
            self, fetch: Fetch, tenant: Tenant, faults: FaultPlan):
        await self._kept(fetch, tenant, faults)
        changed = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", token=tenant.token,
                              json_body={"settings": {"excludedUrls": [
                                  {"pattern": "/cart*", "scope": "all"}]}})
        assert changed.code == 200
        dropped = await self._pageview(fetch, tenant.api_key, "/cart")
        assert dropped.code == 200 and dropped.json()["dropped"] == "excluded_url"

    async def test_a_removed_origin_is_refused_at_the_next_browser_request(
            self, fetch: Fetch, tenant: Tenant, faults: FaultPlan):
        config = f"/sdk/v1/{tenant.public_key}/config"
        assert (await fetch(config, headers={"Origin": SHOP})).code == 200
        answer, reads = await _reads(faults, fetch(config, headers={"Origin": SHOP}))
        assert answer.code == 200 and reads == 0
        changed = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", token=tenant.token,
                              json_body={"allowedOrigins": ["https://moved.example"]})
        assert changed.code == 200
        refused = await fetch(config, headers={"Origin": SHOP})
        assert refused.code == 403 and refused.error_code == "origin_not_allowed"
        assert (await fetch(config, headers={"Origin": "https://moved.example"})).code == 200
