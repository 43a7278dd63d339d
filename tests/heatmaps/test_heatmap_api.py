"""The heatmaps of the dashboard API: pages list, one page's heatmap, the reason for no image."""

from __future__ import annotations

from datetime import UTC, datetime

from documents import heatmaps
from tests.heatmaps.test_aggregates import DAY, SHOP, click, scroll, send
from tests.support.app import Fetch, Tenant


def _path(tenant: Tenant, tail: str = "") -> str:
    return f"/api/v1/sites/{tenant.site_id}/heatmaps{tail}"


async def _pageview(fetch: Fetch, tenant: Tenant, visitor: str, url: str) -> None:
    answer = await fetch("/ingest/pageviews", "POST", headers={"X-Service-Key": tenant.api_key},
                         json_body={"visitorId": visitor, "url": url,
                                    "occurredAt": f"{DAY}T09:59:00Z"})
    assert answer.code == 200, answer


async def test_the_pages_list_shows_views_and_counts_per_page(fetch: Fetch, tenant: Tenant,
                                                              deps):
    await _pageview(fetch, tenant, "v1", f"{SHOP}/cart")
    await _pageview(fetch, tenant, "v2", f"{SHOP}/cart?coupon=1")
    await send(fetch, tenant, "v1", [click(), click("rage_click"), click("dead_click"),
                                     scroll(50), click(url=f"{SHOP}/about")])
    await send(fetch, tenant, "v2", [scroll(90)])
    await deps.derivation.fold()

    answer = await fetch(_path(tenant, f"?from={DAY}&to={DAY}"), token=tenant.token)

    assert answer.code == 200, answer
    assert answer.json()["pages"] == [
        {"page": "/cart", "views": 2, "clicks": 1, "rageClicks": 1, "deadClicks": 1},
        {"page": "/about", "views": 0, "clicks": 1, "rageClicks": 0, "deadClicks": 0}]


async def test_the_heatmaps_list_counts_a_page_seen_twice_by_one_visitor_twice_as_the_overview(
        fetch: Fetch, tenant: Tenant, deps):
    # One visitor opens /cart twice; the loader measured scrolling on the first view only.
    await _pageview(fetch, tenant, "v1", f"{SHOP}/cart")
    await _pageview(fetch, tenant, "v1", f"{SHOP}/cart")
    await send(fetch, tenant, "v1", [scroll(60), click()])
    await deps.derivation.fold()

    listed = (await fetch(_path(tenant, f"?from={DAY}&to={DAY}"), token=tenant.token)).json()
    overview = (await fetch(f"/api/v1/sites/{tenant.site_id}/overview?from={DAY}&to={DAY}",
                            token=tenant.token)).json()

    # Two pageviews of /cart, in both places.
    assert [(page["page"], page["views"]) for page in listed["pages"]] == [("/cart", 2)]
    assert [(page["name"], page["count"]) for page in overview["topPages"]] == [("/cart", 2)]


async def test_a_pages_heatmap_places_clicks_on_their_element_and_says_why_there_is_no_image(
        fetch: Fetch, tenant: Tenant, deps):
    await send(fetch, tenant, "v1", [click(ox=0.12, oy=0.87), click(ox=0.14, oy=0.81),
                                     click(vw=390)])
    await deps.derivation.fold()

    answer = await fetch(_path(tenant, f"/page?page=/cart&kind=click&width=desktop"
                                       f"&from={DAY}&to={DAY}"), token=tenant.token)

    assert answer.code == 200, answer
    view = answer.json()
    assert view["total"] == 2 and view["image"] is None
    assert view["noImage"] == "no_recording_rendered"
    [point] = view["points"]
    assert point["selector"] == "button#buy" and point["count"] == 2
    assert (point["ox"], point["oy"]) == (0.15, 0.85)


async def test_the_scroll_heatmap_answers_the_share_of_views_reaching_each_depth(
        fetch: Fetch, tenant: Tenant, deps):
    await send(fetch, tenant, "v1", [scroll(100, fold=40)])
    await send(fetch, tenant, "v2", [scroll(50, fold=60)])
    await deps.derivation.fold()

    view = (await fetch(_path(tenant, f"/page?page=/cart&kind=scroll&from={DAY}&to={DAY}"),
                        token=tenant.token)).json()

    assert view["views"] == 2 and view["fold"] == 50
    shares = {row["depth"]: row["share"] for row in view["reach"]}
    assert shares[50] == 1 and shares[55] == 0.5 and shares[100] == 0.5


async def test_a_page_excluded_from_replay_never_has_an_image(
        fetch: Fetch, make_tenant, deps):
    tenant = await make_tenant("excluding", settings={
        "excludedUrls": [{"pattern": "/cart*", "scope": "replay"}]})
    await heatmaps.store_heatmap(deps.store, tenant.site_id, "/cart", b"\x89PNG", [],
                                 details={"width": "desktop",
                                          "renderedAt": datetime.now(UTC)})

    view = (await fetch(_path(tenant, "/page?page=/cart"), token=tenant.token)).json()

    assert view["image"] is None and view["noImage"] == "excluded_from_replay"


async def test_the_image_is_served_to_the_sites_members_only(
        fetch: Fetch, tenant: Tenant, make_tenant, deps):
    file_id = await heatmaps.store_heatmap(
        deps.store, tenant.site_id, "/cart", b"\x89PNG image", [],
        details={"width": "desktop", "viewportWidth": 1280, "height": 900,
                 "boxes": {"button#buy": [10, 20, 100, 40]}, "renderedAt": datetime.now(UTC)})
    stranger = await make_tenant("stranger")

    view = (await fetch(_path(tenant, "/page?page=/cart"), token=tenant.token)).json()
    mine = await fetch(_path(tenant, f"/images/{file_id}"), token=tenant.token)
    theirs = await fetch(f"/api/v1/sites/{tenant.site_id}/heatmaps/images/{file_id}",
                         token=stranger.token)

    assert view["image"]["id"] == file_id and view["image"]["boxes"] == {
        "button#buy": [10, 20, 100, 40]}
    assert mine.code == 200 and mine.body == b"\x89PNG image"
    assert mine.headers["Content-Type"] == "image/png"
    assert theirs.code == 404


async def test_an_unknown_kind_or_width_is_refused(fetch: Fetch, tenant: Tenant):
    for query in ("page=/cart&kind=hover", "page=/cart&width=watch", "kind=click"):
        answer = await fetch(_path(tenant, f"/page?{query}"), token=tenant.token)
        assert answer.code == 422, query
