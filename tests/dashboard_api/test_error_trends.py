"""Errors over a date range (issue 21, point 1): ranked list with filters and trends, and one
error's breakdown by day, visitor, page, browser, system and device."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest, send_errors

FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
IPHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
          "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1")
TODAY = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)


def _report(message: str, visitor: str, days_ago: int, url: str, agent: str,
            source: str = "javascript") -> dict:
    return {"visitorId": visitor, "sessionId": f"{visitor}-s", "source": source,
            "type": "TypeError", "message": message, "url": url, "userAgent": agent,
            "stack": f"TypeError: {message}\n    at render (https://shop.example/app.js:10:5)",
            "context": {"release": "2.0", "cart": {"items": 3}},
            "occurredAt": (TODAY - timedelta(days=days_ago)).isoformat()}


async def _seed(ingest: Ingest, deps) -> None:
    await send_errors(ingest, deps, [
        # "price" hits three visitors once each; "basket" hits one visitor four times.
        _report("price is undefined", "v-ann", 1, "https://shop.example/cart?x=1", FIREFOX),
        _report("price is undefined", "v-bob", 2, "https://shop.example/cart", IPHONE),
        _report("price is undefined", "v-cy", 20, "https://shop.example/product/mug", IPHONE),
        *[_report("basket is null", "v-dee", 3, "https://shop.example/checkout", FIREFOX)
          for _ in range(4)],
        _report("db gone away", "v-dee", 0, "https://shop.example/checkout", FIREFOX, "php"),
    ])
    await deps.derivation.fold()


async def test_the_ranked_list_filters_sorts_and_trends_within_the_range(
        fetch: Fetch, tenant: Tenant, ingest: Ingest, deps, viewer_token: str):
    await _seed(ingest, deps)
    base = f"/api/v1/sites/{tenant.site_id}/error-trends"

    async def ranked(query: str) -> dict:
        answer = await fetch(f"{base}?{query}", token=viewer_token)
        assert answer.code == 200, answer
        return answer.json()

    by_occurrences = await ranked("sort=occurrences")
    assert [e["message"] for e in by_occurrences["items"]] == [
        "basket is null", "price is undefined", "db gone away"]
    assert len(by_occurrences["days"]) == 30
    basket = by_occurrences["items"][0]
    assert (basket["occurrencesInRange"], basket["visitorsAffected"]) == (4, 1)
    assert basket["trend"][-4] == 4 and sum(basket["trend"]) == 4
    by_visitors = await ranked("sort=visitors")
    assert by_visitors["items"][0]["message"] == "price is undefined"
    assert by_visitors["items"][0]["visitorsAffected"] == 3
    latest = await ranked("sort=lastSeen")
    assert latest["items"][0]["message"] == "db gone away"

    week = (TODAY - timedelta(days=6)).date().isoformat()
    in_week = await ranked(f"from={week}&sort=visitors")
    assert in_week["items"][0]["visitorsAffected"] == 2  # v-cy's is 20 days old
    assert [e["message"] for e in (await ranked("source=php"))["items"]] == ["db gone away"]
    assert [e["message"] for e in (await ranked("page=/cart"))["items"]] == [
        "price is undefined"]
    price = next(e for e in latest["items"] if e["message"] == "price is undefined")
    resolved = await fetch(f"/api/v1/sites/{tenant.site_id}/errors/{price['id']}", "PATCH",
                           token=tenant.token, json_body={"status": "resolved"})
    assert resolved.code == 200
    assert [e["message"] for e in (await ranked("status=resolved"))["items"]] == [
        "price is undefined"]

    for bad in ("sort=newest", "source=python", "limit=101", "from=yesterday", "page="):
        answer = await fetch(f"{base}?{bad}", token=viewer_token)
        assert answer.code == 422, (bad, answer)


async def test_the_breakdown_counts_visitors_pages_browsers_and_shows_the_latest_context(
        fetch: Fetch, tenant: Tenant, ingest: Ingest, deps):
    await _seed(ingest, deps)
    await ingest("visitors", {"visitorId": "v-ann", "userAgent": FIREFOX})
    listed = (await fetch(f"/api/v1/sites/{tenant.site_id}/error-trends?sort=visitors",
                          token=tenant.token)).json()
    price = listed["items"][0]
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/errors/{price['id']}/breakdown",
                         token=tenant.token)
    assert answer.code == 200, answer
    breakdown = answer.json()
    assert breakdown["occurrences"] == 3 and breakdown["visitorsAffected"] == 3
    assert sum(day["count"] for day in breakdown["days"]) == 3
    assert {v["visitorId"] for v in breakdown["visitors"]} == {"v-ann", "v-bob", "v-cy"}
    assert {(p["name"], p["count"]) for p in breakdown["pages"]} == {
        ("/cart", 2), ("/product/mug", 1)}
    devices = {d["name"]: d["share"] for d in breakdown["devices"]}
    assert devices == {"mobile": round(2 / 3, 4), "desktop": round(1 / 3, 4)}
    assert any(b["name"].startswith("Firefox") for b in breakdown["browsers"])
    assert any((s["name"] or "").startswith("iOS") for s in breakdown["systems"])
    newest = breakdown["latest"][0]
    assert newest["visitorId"] == "v-ann" and newest["page"] == "/cart"
    assert newest["context"] == {"release": "2.0", "cart": {"items": 3}}
    assert "userAgent" not in newest and "ip" not in newest

    stranger = await fetch(f"/api/v1/sites/{tenant.site_id}/errors/"
                           "0f0e0d0c-0b0a-4909-8807-060504030201/breakdown", token=tenant.token)
    assert stranger.code == 404
