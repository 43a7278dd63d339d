"""The erasure receipt names each category in a shop owner's words, from the server, so the
dashboard never shows "Pageview buckets" or "activeDays" (issue 28 point 10)."""

from __future__ import annotations

from privacy.subject_data import VISITOR_DATA
from tests.support.app import Fetch, Tenant
from tests.support.visitor_data import seed_visitor


async def test_the_erase_result_names_every_category_in_words_the_owner_reads(
        fetch: Fetch, tenant: Tenant, deps):
    seeded = await seed_visitor(fetch, tenant, deps)
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/{seeded.visitor_id}/data",
                         "DELETE", token=tenant.token)
    assert answer.code == 200, answer
    receipt = answer.json()
    assert set(receipt["labels"]) == set(receipt["counts"])
    assert receipt["labels"]["pageviews"] == "Pageview records"
    assert receipt["labels"]["activeDays"] == (
        "Days the visitor was active, as the overview counts visitors")
    for category, label in receipt["labels"].items():
        assert label != category and label[0].isupper() and "bucket" not in label.lower()


def test_every_category_the_server_can_erase_has_its_own_words():
    labels = [source.label for source in VISITOR_DATA]
    assert len(set(labels)) == len(labels)
    assert all(label and label != source.category
               for label, source in zip(labels, VISITOR_DATA, strict=True))


async def test_an_erasure_by_email_carries_the_words_too(fetch: Fetch, tenant: Tenant, deps):
    seeded = await seed_visitor(fetch, tenant, deps)
    answer = await fetch("/ingest/privacy/erase", "POST", headers={
        "X-Service-Key": tenant.api_key}, json_body={"email": seeded.email})
    assert answer.code == 200, answer
    body = answer.json()
    assert body["labels"]["visitorProfile"] == "Visitor profile"
    assert body["receipts"][0]["labels"]["leads"] == "Leads"
