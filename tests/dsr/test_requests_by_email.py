"""Data-subject requests by e-mail address with the site API key (the shop's privacy tools)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.support.app import Answer, Fetch, Tenant, all_documents_text
from tests.support.visitor_data import seed_visitor


async def _by_email(fetch: Fetch, tenant: Tenant, what: str, body: dict[str, Any], *,
                    key: str | None = None) -> Answer:
    return await fetch(f"/ingest/privacy/{what}", "POST", json_body=body,
                       headers={"X-Service-Key": tenant.api_key if key is None else key})


async def _request_log(fetch: Fetch, tenant: Tenant) -> list[dict[str, Any]]:
    answer = await fetch("/api/v1/requests", token=tenant.token)
    assert answer.code == 200, answer
    return answer.json()


async def test_the_lookup_finds_the_visitors_of_an_address_and_their_linked_profiles(
        fetch: Fetch, tenant: Tenant, deps):
    await seed_visitor(fetch, tenant, deps)  # ada-1, wpUserId 7, ada@example.com
    # The same customer on a second browser, known only by the CMS user id.
    await fetch("/ingest/visitors", "POST", json_body={"visitorId": "ada-2", "wpUserId": 7},
                headers={"X-Service-Key": tenant.api_key})
    await seed_visitor(fetch, tenant, deps, "bob-2", email="bob@example.com", wp_user_id=None)
    answer = await _by_email(fetch, tenant, "lookup", {"email": "ADA@Example.com"})
    assert answer.code == 200, answer
    found = answer.json()
    assert found["count"] == 2
    assert [v["visitorId"] for v in found["visitors"]] == ["ada-1", "ada-2"]
    assert all(v["profileHeld"] for v in found["visitors"])
    # A lookup is not a data-subject request: nothing is logged.
    assert await _request_log(fetch, tenant) == []


async def test_the_export_pages_through_the_visitors_with_the_dashboards_document(
        fetch: Fetch, tenant: Tenant, deps):
    seeded = await seed_visitor(fetch, tenant, deps)
    await fetch("/ingest/visitors", "POST", json_body={"visitorId": "ada-2", "wpUserId": 7},
                headers={"X-Service-Key": tenant.api_key})
    first = await _by_email(fetch, tenant, "export", {"email": seeded.email})
    assert first.code == 200, first
    page = first.json()
    assert (page["page"], page["pages"], page["done"]) == (1, 2, False)
    [export] = page["visitors"]
    assert export["format"] == "visitor-service/access-export/v1"
    assert export["visitor"]["visitorId"] == seeded.visitor_id
    assert export["leads"][0]["email"] == seeded.email
    assert [p["visitorId"] for p in export["linkedProfiles"]] == ["ada-2"]
    second = (await _by_email(fetch, tenant, "export", {"email": seeded.email, "page": 2})).json()
    assert (second["page"], second["done"]) == (2, True)
    assert second["visitors"][0]["visitor"]["visitorId"] == "ada-2"

    log = await _request_log(fetch, tenant)
    assert [(e["type"], e["status"], e["actorUserId"]) for e in log] == [
        ("access", "completed", "site-api-key")] * 2
    assert all(e["dueAt"] > e["receivedAt"] and e["completedAt"] for e in log)
    audit = await deps.store.collection("audit_log").find(
        {"action": "visitor.exported", "siteId": tenant.site_id}).to_list(None)
    assert len(audit) == 2 and {a["actorUserId"] for a in audit} == {"site-api-key"}
    assert {a["details"]["requestId"] for a in audit} == {e["id"] for e in log}


async def test_the_erasure_removes_every_visitor_of_the_address_and_answers_the_receipts(
        fetch: Fetch, tenant: Tenant, deps):
    seeded = await seed_visitor(fetch, tenant, deps)
    await fetch("/ingest/visitors", "POST", json_body={"visitorId": "ada-2", "wpUserId": 7},
                headers={"X-Service-Key": tenant.api_key})
    other = await seed_visitor(fetch, tenant, deps, "bob-2", email="bob@example.com",
                               name="Bob Builder", phone="+44 20 7946 1111", wp_user_id=None)
    answer = await _by_email(fetch, tenant, "erase", {"email": seeded.email})
    assert answer.code == 200, answer
    erased = answer.json()
    assert erased["visitors"] == 2 and len(erased["receipts"]) == 2
    assert erased["counts"]["visitorProfile"] == 2 and erased["counts"]["leads"] == 1
    assert erased["itemsRemoved"] == sum(erased["counts"].values()) - erased["itemsAnonymised"]
    assert seeded.email not in answer.body.decode()

    text = await all_documents_text(deps.store)
    for value in (seeded.visitor_id, "ada-2", seeded.session_id, seeded.email,
                  seeded.recording_id, "Ada Lovelace"):
        assert value not in text, value
    assert other.visitor_id in text and other.email in text

    log = await _request_log(fetch, tenant)
    assert [(e["type"], e["status"], e["actorUserId"]) for e in log] == [
        ("erasure", "completed", "site-api-key")] * 2
    assert {e["id"] for e in log} == {r["requestId"] for r in erased["receipts"]}
    audit = await deps.store.collection("audit_log").count_documents(
        {"action": "visitor.erased", "actorUserId": "site-api-key", "siteId": tenant.site_id})
    assert audit == 2
    again = (await _by_email(fetch, tenant, "erase", {"email": seeded.email})).json()
    assert again == {"visitors": 0, "counts": {}, "labels": {}, "itemsRemoved": 0,
                     "itemsAnonymised": 0, "receipts": []}


async def test_an_unknown_address_gets_a_clean_empty_answer_and_logs_nothing(
        fetch: Fetch, tenant: Tenant):
    lookup = await _by_email(fetch, tenant, "lookup", {"email": "nobody@example.com"})
    assert lookup.code == 200 and lookup.json() == {"count": 0, "visitors": []}
    export = await _by_email(fetch, tenant, "export", {"email": "nobody@example.com"})
    assert export.code == 200
    assert export.json() == {"page": 1, "pages": 0, "done": True, "visitors": []}
    erase = await _by_email(fetch, tenant, "erase", {"email": "nobody@example.com"})
    assert erase.code == 200 and erase.json()["visitors"] == 0
    assert await _request_log(fetch, tenant) == []


@pytest.mark.parametrize(("what", "body", "field"), [
    ("erase", {}, "email"), ("erase", {"email": "not-an-address"}, "email"),
    ("lookup", {"email": 7}, "email"), ("export", {"email": "a b@c.example"}, "email"),
    ("export", {"email": "a@b.example", "page": 0}, "page"),
    ("erase", {"email": "a@b.example", "extra": 1}, "extra")])
async def test_a_missing_or_invalid_address_is_a_422_naming_the_field(
        fetch: Fetch, tenant: Tenant, what: str, body: dict[str, Any], field: str):
    answer = await _by_email(fetch, tenant, what, body)
    assert answer.code == 422, answer
    assert answer.json()["error"]["field"] == field


async def test_an_address_belongs_to_one_site_and_needs_that_sites_key(
        fetch: Fetch, tenant: Tenant, make_tenant, deps):
    seeded = await seed_visitor(fetch, tenant, deps)
    stranger = await make_tenant("other")
    for what in ("lookup", "export", "erase"):
        assert (await _by_email(fetch, tenant, what, {"email": seeded.email},
                                key="")).code == 401
        assert (await _by_email(fetch, tenant, what, {"email": seeded.email},
                                key="wrong-key")).code == 401
        other = await _by_email(fetch, stranger, what, {"email": seeded.email})
        assert other.code == 200
        assert other.json().get("visitors") in ([], 0)
    assert seeded.visitor_id in await all_documents_text(deps.store)


@pytest.fixture
def slow_refill_env(settings_env: dict[str, str]) -> dict[str, str]:
    """A site bucket that refills one request per 100 s, so a drained one stays drained while
    the next request travels, however busy the machine."""
    settings_env["SITE_RATE_PER_SECOND"] = "0.01"
    return settings_env


async def test_the_site_rate_limit_applies(slow_refill_env, fetch: Fetch, tenant: Tenant, deps):
    while await deps.rate_limiter.take(tenant.site_id) is None:
        pass
    answer = await _by_email(fetch, tenant, "erase", {"email": "ada@example.com"})
    assert answer.code == 429
    assert int(answer.headers["Retry-After"]) >= 1


async def test_the_logs_never_hold_the_address(fetch: Fetch, tenant: Tenant, deps,
                                               caplog: pytest.LogCaptureFixture):
    seeded = await seed_visitor(fetch, tenant, deps)
    caplog.set_level(logging.DEBUG)
    for what in ("lookup", "export", "erase"):
        assert (await _by_email(fetch, tenant, what, {"email": seeded.email})).code == 200
    assert caplog.records
    assert seeded.email not in caplog.text
    requests = await deps.store.collection("dsr_requests").find({}).to_list(None)
    assert seeded.email not in repr(requests)
