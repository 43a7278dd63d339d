"""An erased visitor's errors stay in the Errors list and the error count, as anyone's; the
erased visitor is no longer among the visitors affected (issue 28 point 9)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from derived import daily_figures
from tests.support.app import Fetch, Tenant, all_documents_text
from tests.support.ingest import Ingest, send_errors

NOON = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)


def _report(visitor: str, minutes: int) -> dict:
    return {"visitorId": visitor, "sessionId": f"{visitor}-session", "source": "javascript",
            "type": "TypeError", "message": "cart is undefined",
            "url": f"https://shop.example/cart?who={visitor}",
            "stack": "TypeError: cart is undefined\n    at add (https://shop.example/app.js:3:1)",
            "context": {"release": "2.0", "email": f"{visitor}@example.com"},
            "occurredAt": (NOON - timedelta(minutes=minutes)).isoformat()}


async def _read(fetch: Fetch, tenant: Tenant, path: str) -> dict:
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/{path}", token=tenant.token)
    assert answer.code == 200, answer
    return answer.json()


async def _what_the_owner_reads(fetch: Fetch, tenant: Tenant, deps) -> tuple:
    """(occurrences, visitors affected, the aggregate's count, the overview's error count, the
    top error's count, the visitors the breakdown names), all of today."""
    await deps.derivation.fold()
    today = NOON.date().isoformat()
    [error] = (await _read(fetch, tenant, f"error-trends?from={today}&to={today}"))["items"]
    overview = await _read(fetch, tenant, f"overview?from={today}&to={today}")
    breakdown = await _read(fetch, tenant,
                            f"errors/{error['id']}/breakdown?from={today}&to={today}")
    assert breakdown["occurrences"] == error["occurrencesInRange"]
    return (error["occurrencesInRange"], error["visitorsAffected"], error["occurrenceCount"],
            overview["figures"]["errors"]["value"], overview["topErrors"][0]["count"],
            [visitor["visitorId"] for visitor in breakdown["visitors"]])


async def _error_documents(deps, tenant: Tenant) -> dict[str, int]:
    """The error count of each of the site's day documents that has one."""
    return {doc["_id"]: doc["errors"] async for doc in deps.store.collection(
        daily_figures.SITE_DAYS).find({"siteId": tenant.site_id}) if doc.get("errors")}


@pytest.mark.parametrize("when", ["folded", "not folded", "restricted"])
async def test_an_erased_visitors_error_stays_listed_and_counted_without_them(
        fetch: Fetch, tenant: Tenant, ingest: Ingest, deps, when: str):
    for visitor in ("v-ann", "v-bob"):
        await ingest("pageviews", {"visitorId": visitor, "url": "https://shop.example/cart",
                                   "occurredAt": NOON.isoformat()})
    # Ann hits the fault twice, Bob once: one error, 3 occurrences, 2 visitors.
    await send_errors(ingest, deps, [_report("v-ann", 30), _report("v-ann", 20),
                                     _report("v-bob", 10)], fold=when != "not folded")
    if when == "not folded":
        pending = await deps.store.collection("unfolded_facts").count_documents(
            {"visitorId": "v-ann", "kind": daily_figures.ERROR})
        assert pending == 2
    else:
        assert await _what_the_owner_reads(fetch, tenant, deps) == (
            3, 2, 3, 3, 3, ["v-ann", "v-bob"])
    if when == "restricted":
        answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/v-ann/restriction",
                             "PUT", token=tenant.token, json_body={"on": True})
        assert answer.code == 200, answer
        # While restricted, Ann's occurrences are left out of the lists and the figures.
        assert await _what_the_owner_reads(fetch, tenant, deps) == (1, 1, 3, 1, 1, ["v-bob"])

    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/v-ann/data", "DELETE",
                         token=tenant.token)
    assert answer.code == 200, answer
    receipt = answer.json()
    assert receipt["counts"]["errorOccurrences"] == 2
    assert receipt["labels"]["errorOccurrences"] == (
        "Error occurrences kept without the visitor (anonymised)")

    # The error is still listed with its 3 occurrences, the overview still counts 3 errors
    # today, and only Bob is among the visitors affected.
    assert await _what_the_owner_reads(fetch, tenant, deps) == (3, 1, 3, 3, 3, ["v-bob"])
    # The figures are what a rebuild from the stored data makes of them, document for document.
    kept = await _error_documents(deps, tenant)
    assert sum(kept.values()) == 3
    await daily_figures.rebuild_site(deps.store, tenant.site_id)
    assert await _error_documents(deps, tenant) == kept
    # Nothing of Ann's is left: not her id, session, address in the URL or e-mail in a context.
    text = await all_documents_text(deps.store)
    for value in ("v-ann", "who=v-ann", "v-ann@example.com"):
        assert value not in text, value
