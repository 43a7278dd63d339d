"""What one pageview costs the store (issue 30): the calls a returning visitor's pageview makes,
each a round trip on MongoDB, plus the transaction's commit."""

from __future__ import annotations

from tests.support.app import Fetch, Tenant
from tests.support.faulty_store import FaultPlan

SHOP = "https://shop.example"


async def test_a_returning_visitors_pageview_is_the_key_lookup_three_writes_and_the_commit(
        fetch: Fetch, tenant: Tenant, faults: FaultPlan):
    headers = {"X-Service-Key": tenant.api_key}
    first = await fetch("/ingest/pageviews", "POST", headers=headers,
                        json_body={"visitorId": "ada", "url": f"{SHOP}/"})
    assert first.code == 200 and "id" in first.json()
    faults.clear()
    faults.record_calls = True
    again = await fetch("/ingest/pageviews", "POST", headers=headers,
                        json_body={"visitorId": "ada", "url": f"{SHOP}/cart"})
    faults.record_calls = False
    assert again.code == 200 and "id" in again.json()
    # The key lookup; then, in one transaction, the profile update (whose pre-image also says
    # whether the visitor is restricted or objects), the bucket append and the unfolded fact.
    assert faults.calls == [("sites", "find_one"), ("visitors", "find_one_and_update"),
                            ("pageview_buckets", "update_one"),
                            ("unfolded_facts", "insert_one")]
    assert faults.transaction_calls == faults.calls[1:]


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
