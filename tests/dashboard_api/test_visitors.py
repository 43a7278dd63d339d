"""The visitors list and the visitor profile of the dashboard data API."""

from __future__ import annotations

from tests.support.app import Fetch, Tenant
from tests.support.visitor_data import seed_visitor


def _visitors(tenant: Tenant, query: str = "") -> str:
    return f"/api/v1/sites/{tenant.site_id}/visitors{query}"


async def _seed_five(ingest) -> None:
    for n in range(5):
        await ingest("pageviews", {"visitorId": f"v-{n}", "url": f"https://shop.example/{n}",
                                   "occurredAt": f"2026-01-0{n + 1}T10:00:00Z"})


async def test_visitors_are_listed_newest_first_across_pages(fetch: Fetch, tenant: Tenant,
                                                             ingest, viewer_token: str):
    await _seed_five(ingest)
    seen: list[str] = []
    cursor = None
    for _ in range(4):
        query = "?limit=2" + (f"&cursor={cursor}" if cursor else "")
        answer = await fetch(_visitors(tenant, query), token=viewer_token)
        assert answer.code == 200, answer
        page = answer.json()
        seen.extend(item["visitorId"] for item in page["items"])
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == ["v-4", "v-3", "v-2", "v-1", "v-0"]


async def test_a_page_after_new_arrivals_neither_repeats_nor_skips(fetch: Fetch, tenant: Tenant,
                                                                  ingest):
    await _seed_five(ingest)
    first = (await fetch(_visitors(tenant, "?limit=2"), token=tenant.token)).json()
    await ingest("pageviews", {"visitorId": "newcomer", "url": "https://shop.example/"})
    second = (await fetch(_visitors(tenant, f"?limit=2&cursor={first['nextCursor']}"),
                          token=tenant.token)).json()
    assert [item["visitorId"] for item in second["items"]] == ["v-2", "v-1"]


async def test_search_finds_visitors_by_id_prefix_name_and_email(fetch: Fetch, tenant: Tenant,
                                                                 ingest):
    await _seed_five(ingest)
    await ingest("leads", {"visitorId": "v-2", "email": "Grace.Hopper@Example.com",
                           "name": "Grace Hopper"})

    async def search(q: str) -> list[str]:
        answer = await fetch(_visitors(tenant, f"?q={q}"), token=tenant.token)
        assert answer.code == 200, answer
        return [item["visitorId"] for item in answer.json()["items"]]

    assert await search("v-3") == ["v-3"]
    assert await search("v-") == ["v-2", "v-4", "v-3", "v-1", "v-0"]
    assert await search("hopper") == ["v-2"]
    assert await search("GRACE.HOPPER%40example") == ["v-2"]
    assert await search(".%2A") == []  # regex characters are matched literally


async def test_a_cursor_not_made_by_the_api_is_refused(fetch: Fetch, tenant: Tenant):
    answer = await fetch(_visitors(tenant, "?cursor=bm90LWEtY3Vyc29y"), token=tenant.token)
    assert answer.code == 422
    assert answer.json()["error"]["field"] == "cursor"
    assert (await fetch(_visitors(tenant, "?limit=101"), token=tenant.token)).code == 422


async def test_restricted_visitors_are_hidden_from_list_and_profile(fetch: Fetch, tenant: Tenant,
                                                                    ingest):
    await _seed_five(ingest)
    restrict = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/v-1/restriction", "PUT",
                           token=tenant.token, json_body={"on": True})
    assert restrict.code == 200, restrict
    listed = (await fetch(_visitors(tenant), token=tenant.token)).json()["items"]
    assert "v-1" not in [item["visitorId"] for item in listed]
    assert (await fetch(_visitors(tenant, "/v-1"), token=tenant.token)).code == 404
    assert (await fetch(_visitors(tenant, "/v-2"), token=tenant.token)).code == 200


async def test_the_profile_shows_activity_errors_recordings_leads_and_linked_profiles(
        fetch: Fetch, tenant: Tenant, deps, ingest, viewer_token: str):
    seeded = await seed_visitor(fetch, tenant, deps)
    await ingest("visitors", {"visitorId": "ada-phone", "wpUserId": 7})
    answer = await fetch(_visitors(tenant, f"/{seeded.visitor_id}"), token=viewer_token)
    assert answer.code == 200, answer
    profile = answer.json()
    assert profile["displayName"] == "Ada Lovelace"
    assert profile["counts"]["pageviews"] == 2
    kinds = [entry["kind"] for entry in profile["recent"]]
    assert kinds.index("lead") < kinds.index("pageview")  # newest first
    assert profile["errors"][0]["what"] == "TypeError: cart is undefined"
    assert profile["errors"][0]["when"]
    assert seeded.recording_id in [r["id"] for r in profile["recordings"]]
    assert profile["leads"][0]["email"] == seeded.email
    assert [p["visitorId"] for p in profile["linkedProfiles"]] == ["ada-phone"]
    assert "ipAddress" not in profile["location"]


async def test_an_unknown_visitor_is_not_found(fetch: Fetch, tenant: Tenant):
    assert (await fetch(_visitors(tenant, "/nobody"), token=tenant.token)).code == 404
