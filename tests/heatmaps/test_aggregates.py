"""Heatmap counts kept as interactions arrive: per page, width class, day and element cell."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from documents import heatmaps
from documents.store import ASCENDING
from tests.support.app import Fetch, Tenant

SHOP = "https://shop.example"
#: Yesterday: a client time older than 30 days is taken as the time of receipt (issue 28).
DAY = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()


def click(kind: str = "click", *, selector: str = "button#buy", ox: float = 0.5,
          oy: float = 0.5, vw: int = 1280, url: str = f"{SHOP}/cart", at: str = "10:00:00",
          **extra) -> dict:
    return {"kind": kind, "at": f"{DAY}T{at}Z", "url": url, "selector": selector,
            "x": 300, "y": 400, "ox": ox, "oy": oy, "vw": vw, **extra}


def scroll(depth: float, start: float = 0, *, vw: int = 1280, fold: float = 40,
           url: str = f"{SHOP}/cart") -> dict:
    return {"kind": "scroll_depth", "at": f"{DAY}T10:00:05Z", "url": url, "depth": depth,
            "from": start, "fold": fold, "vw": vw}


async def send(fetch: Fetch, tenant: Tenant, visitor: str, items: list[dict], **fields):
    answer = await fetch("/ingest/recordings/interactions", "POST",
                         headers={"X-Service-Key": tenant.api_key},
                         json_body={"visitorId": visitor, "url": f"{SHOP}/cart",
                                    "interactions": items, **fields})
    assert answer.code == 200, answer
    return answer.json()


async def counts(deps, tenant: Tenant, page: str = "/cart", width: str = "desktop",
                 kind: str = "click") -> dict[tuple[str, int], int]:
    """The cells' counts once the derivation has folded what was sent."""
    await deps.derivation.fold()
    rows = await heatmaps.read_heatmap(deps.store, tenant.site_id, page, width, kind, DAY, DAY)
    return {(row["target"], row["cell"]): row["n"] for row in rows if row.get("n")}


async def test_clicks_are_counted_on_their_element_and_the_cell_inside_it(
        fetch: Fetch, tenant: Tenant, deps):
    await send(fetch, tenant, "v1", [click(ox=0.05, oy=0.95), click(ox=0.07, oy=0.91),
                                     click(selector="a#next", ox=0.5, oy=0.5),
                                     click("rage_click", count=3), click("dead_click")])

    assert await counts(deps, tenant) == {("button#buy", 9): 2, ("a#next", 55): 1}
    assert await counts(deps, tenant, kind="rage_click") == {("button#buy", 55): 1}
    assert await counts(deps, tenant, kind="dead_click") == {("button#buy", 55): 1}


async def test_each_width_class_has_its_own_counts(fetch: Fetch, tenant: Tenant, deps):
    await send(fetch, tenant, "v1", [click(vw=390), click(vw=390), click(vw=800),
                                     click(vw=1440)])

    assert await counts(deps, tenant, width="phone") == {("button#buy", 55): 2}
    assert await counts(deps, tenant, width="tablet") == {("button#buy", 55): 1}
    assert await counts(deps, tenant, width="desktop") == {("button#buy", 55): 1}


async def test_scroll_reach_counts_each_view_once_however_often_it_reports(
        fetch: Fetch, tenant: Tenant, deps):
    # One view reports 30 %, then 80 % (from 30); another view stops at 30 %.
    await send(fetch, tenant, "v1", [scroll(30), scroll(80, 30)])
    await send(fetch, tenant, "v2", [scroll(30, fold=50)])

    await deps.derivation.fold()
    [row] = await heatmaps.read_heatmap(deps.store, tenant.site_id, "/cart", "desktop",
                                        "scroll", DAY, DAY)
    assert row["views"] == 2 and row["foldSum"] == 90
    assert row["reach"]["30"] == 2 and row["reach"]["35"] == 1 and row["reach"]["80"] == 1
    assert "85" not in row["reach"]


async def test_a_retried_batch_is_counted_once(fetch: Fetch, tenant: Tenant, deps):
    first = await send(fetch, tenant, "v1", [click()], batchId="batch-1")
    again = await send(fetch, tenant, "v1", [click()], batchId="batch-1")

    assert first["stored"] == 1 and again["stored"] == 1
    assert await counts(deps, tenant) == {("button#buy", 55): 1}


async def test_pages_are_grouped_without_query_or_fragment_and_by_the_sites_rules(
        fetch: Fetch, tenant: Tenant, deps):
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", token=tenant.token,
                         json_body={"settings": {"heatmapPageGroups": ["/product/*"]}})
    assert answer.code == 200, answer
    await send(fetch, tenant, "v1", [click(url=f"{SHOP}/cart?coupon=X#top"),
                                     click(url=f"{SHOP}/product/blue-mug"),
                                     click(url=f"{SHOP}/product/red-mug?size=l")])

    assert await counts(deps, tenant, page="/cart") == {("button#buy", 55): 1}
    assert await counts(deps, tenant, page="/product/*") == {("button#buy", 55): 2}


async def test_a_bad_grouping_rule_is_refused_with_its_field(fetch: Fetch, tenant: Tenant):
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", token=tenant.token,
                         json_body={"settings": {"heatmapPageGroups": ["/a b"]}})
    assert answer.code == 422
    assert answer.json()["error"]["field"] == "settings.heatmapPageGroups.0"


async def test_a_restricted_visitor_and_a_gpc_visitor_add_nothing(
        fetch: Fetch, tenant: Tenant, deps):
    await send(fetch, tenant, "kept", [click()])
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/kept/restriction", "PUT",
                         token=tenant.token, json_body={"on": True})
    assert answer.code == 200, answer
    refused = await send(fetch, tenant, "kept", [click(at="10:01:00")])
    gpc = await send(fetch, tenant, "private", [click()], gpc=True)

    assert refused["stored"] == 0 and gpc["stored"] == 0
    assert await counts(deps, tenant) == {("button#buy", 55): 1}


async def test_the_counts_hold_no_visitor_or_session_id(fetch: Fetch, tenant: Tenant, deps):
    await send(fetch, tenant, "visitor-secret", [click(), scroll(50)],
               sessionId="session-secret")

    text = str(await deps.store.collection(heatmaps.COUNTS).find({}).to_list(None))
    assert "visitor-secret" not in text and "session-secret" not in text


def test_the_heatmap_read_and_the_cell_upsert_share_one_unique_index():
    [unique] = [index for index in heatmaps.INDEXES
                if index.collection == heatmaps.COUNTS and index.unique]
    assert [name for name, _ in unique.keys] == ["siteId", "page", "width", "kind", "day",
                                                 "target", "cell"]
    assert {direction for _, direction in unique.keys} == {ASCENDING}


async def test_erasure_takes_the_visitors_share_out_of_the_counts_and_deletes_the_image(
        fetch: Fetch, tenant: Tenant, deps):
    await send(fetch, tenant, "ada", [click(), click(selector="a#only-ada"), scroll(60)],
               recordingId="0c8f4c1e-0000-4000-8000-000000000001")
    await send(fetch, tenant, "bob", [click(), scroll(20)])
    recording = {"_id": "0c8f4c1e-0000-4000-8000-000000000001", "siteId": tenant.site_id,
                 "visitorId": "ada"}
    await deps.store.collection("recordings").insert_one(recording)
    await heatmaps.store_heatmap(deps.store, tenant.site_id, "/cart", b"\x89PNG ada",
                                 [recording["_id"]])
    await deps.derivation.fold()  # counted before the erasure, which takes ada's share out

    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/ada/data", "DELETE",
                         token=tenant.token)

    assert answer.code == 200, answer
    assert answer.json()["counts"]["heatmapImages"] == 1
    assert await counts(deps, tenant) == {("button#buy", 55): 1}
    await deps.derivation.fold()
    [row] = await heatmaps.read_heatmap(deps.store, tenant.site_id, "/cart", "desktop",
                                        "scroll", DAY, DAY)
    assert row["views"] == 1 and row["reach"]["20"] == 1 and row["reach"]["25"] == 0
    assert await deps.store.bucket(heatmaps.BUCKET).files.count_documents({}) == 0
