"""What one pageview costs the store (issue 30): the calls a returning visitor's pageview makes,
each a round trip on MongoDB, plus the transaction's commit. Four in all: its site is kept from
the visitor's first request, so the key lookup is not one of them."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.app import Fetch, Tenant
from tests.support.faulty_store import FaultPlan

SHOP = "https://shop.example"

#: In one transaction: the profile update (whose pre-image also says whether the visitor is
#: restricted or objects), the bucket append and the unfolded fact; then the commit.
THE_WRITES = [("visitors", "find_one_and_update"), ("pageview_buckets", "update_one"),
              ("unfolded_facts", "insert_one")]


async def _calls_of_two_pageviews(fetch: Fetch, tenant: Tenant, faults: FaultPlan
                                  ) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The store calls of a new visitor's pageview, then of the same visitor's next one."""
    headers = {"X-Service-Key": tenant.api_key}
    calls = []
    for page in ("/", "/cart"):
        faults.clear()
        faults.record_calls = True
        answer = await fetch("/ingest/pageviews", "POST", headers=headers,
                             json_body={"visitorId": "ada", "url": f"{SHOP}{page}"})
        faults.record_calls = False
        assert answer.code == 200 and "id" in answer.json()
        calls.append(list(faults.calls))
    assert faults.transaction_calls == THE_WRITES
    return calls[0], calls[1]


class TestOnTheProductionPath:
    """MongoDB (or the embedded store) with REDIS_URL, where changes to sites are announced."""

    @pytest.fixture
    def settings_env(self, settings_env: dict[str, str], redis_url: str) -> dict[str, str]:
        return {**settings_env, "REDIS_URL": redis_url}

    async def test_a_returning_visitors_pageview_is_three_writes_and_the_commit(
            self, fetch: Fetch, tenant: Tenant, faults: FaultPlan, deps):
        # Sites are kept only once the subscription that announces their changes is up.
        await asyncio.wait_for(deps.site_changes.subscribed.wait(), 5)
        first, again = await _calls_of_two_pageviews(fetch, tenant, faults)
        # The first request reads its site by key; the next finds it kept.
        assert first[0] == ("sites", "find_one")
        assert again == THE_WRITES


@pytest.mark.embedded_only("MongoDB without Redis keeps no sites (documents/sites.py)")
async def test_on_the_embedded_default_the_site_is_kept_too(
        fetch: Fetch, tenant: Tenant, faults: FaultPlan):
    first, again = await _calls_of_two_pageviews(fetch, tenant, faults)
    assert first[0] == ("sites", "find_one")
    assert again == THE_WRITES


async def test_metrics_count_the_transactions_run_and_those_mongodb_aborted(
        fetch: Fetch, tenant: Tenant, deps):
    headers = {"X-Service-Key": tenant.api_key}
    before = deps.store.transactions_run
    for page in ("/", "/cart"):
        answer = await fetch("/ingest/pageviews", "POST", headers=headers,
                             json_body={"visitorId": "ada", "url": f"{SHOP}{page}"})
        assert "id" in answer.json()
    assert deps.store.transactions_run - before == 2
    lines = (await fetch("/metrics")).body.decode().splitlines()
    assert "# TYPE store_transactions_total counter" in lines
    assert f"store_transactions_total {deps.store.transactions_run}" in lines
    assert f"store_transaction_retries_total {deps.store.transactions_retried}" in lines
