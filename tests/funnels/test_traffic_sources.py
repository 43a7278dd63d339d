"""Traffic sources and entry and exit pages on the overview (issue 31 point 5): where each
session came from is kept from its landing pageview (referrer domain, UTM tags), counted per
day like the other figures, and stays exact under erasure and restriction."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from derived import daily_figures, store_setup, visits
from documents import migrations
from tests.retention.conftest import make_purger
from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest

SHOP = "https://shop.example"


#: An hour ago: every pageview below is in the past, none older than the ingest accepts.
BASE = (datetime.now(UTC) - timedelta(hours=1)).replace(second=0, microsecond=0)


def _at(minute: int) -> str:
    return (BASE + timedelta(minutes=minute)).isoformat()


async def _traffic(ingest: Ingest, deps) -> None:
    """Five sessions of four visitors, hand-counted in the tests below."""
    views = [
        # ada: tagged newsletter link, three pages.
        ("ada", "a1", 0, "/?utm_source=Newsletter&utm_medium=email&utm_campaign=spring",
         "https://mail.example.com/inbox"),
        ("ada", "a1", 5, "/product/x", f"{SHOP}/"),
        ("ada", "a1", 10, "/cart", f"{SHOP}/product/x"),
        # ben: from a search engine, then a second session typed in.
        ("ben", "b1", 0, "/product/x", "https://www.google.com/search?q=x"),
        ("ben", "b1", 3, "/checkout", f"{SHOP}/product/x"),
        ("ben", "b2", 30, "/", None),
        # cy: the later pageview arrives first; the earlier one is the entry and the source.
        ("cy", "c1", 10, "/cart", f"{SHOP}/product/x"),
        ("cy", "c1", 0, "/product/x", "https://www.google.com/"),
        # dan: a referrer on an IP address keeps its domain, anonymised.
        ("dan", "d1", 0, "/", "http://203.0.113.77/links"),
    ]
    for n, (visitor, session, minute, page, referrer) in enumerate(views):
        body: dict[str, Any] = {"visitorId": visitor, "sessionId": session,
                                "pageviewId": f"pv{n}", "url": f"{SHOP}{page}",
                                "occurredAt": _at(minute)}
        if referrer:
            body["referrer"] = referrer
        await ingest("pageviews", body)
    await deps.derivation.fold()


async def _overview_traffic(fetch: Fetch, tenant: Tenant, token: str) -> dict[str, Any]:
    first = BASE.date().isoformat()
    today = datetime.now(UTC).date().isoformat()
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/overview?from={first}&to={today}",
                         token=token)
    assert answer.code == 200, answer
    return answer.json()["traffic"]


def _named(rows: list[dict[str, Any]]) -> dict[str, int]:
    return {row["name"]: row["count"] for row in rows}


async def _session_figures(store, site_id: str) -> dict[str, int]:
    return {f"{doc['day']} {doc['dimension']} {doc['value']}": doc["sessions"]
            async for doc in store.collection(daily_figures.SESSION_DAYS).find({"siteId": site_id})
            if doc["sessions"]}


async def test_the_overview_names_sources_referrers_campaigns_and_entry_and_exit_pages(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _traffic(ingest, deps)
    traffic = await _overview_traffic(fetch, tenant, viewer_token)
    assert traffic["sessions"] == 5
    # A session's source: its UTM source, else its referrer's domain, else "(direct)".
    assert traffic["sources"] == [
        {"name": "google.com", "count": 2, "share": 0.4},
        {"name": "(direct)", "count": 1, "share": 0.2},
        {"name": "203.0.113.0", "count": 1, "share": 0.2},
        {"name": "newsletter", "count": 1, "share": 0.2}]
    assert _named(traffic["referrers"]) == {"google.com": 2, "mail.example.com": 1,
                                            "203.0.113.0": 1, "(direct)": 1}
    assert _named(traffic["utmSources"]) == {"newsletter": 1}
    assert _named(traffic["utmMediums"]) == {"email": 1}
    assert _named(traffic["utmCampaigns"]) == {"spring": 1}
    assert _named(traffic["entryPages"]) == {"/": 3, "/product/x": 2}
    assert _named(traffic["exitPages"]) == {"/": 2, "/cart": 2, "/checkout": 1}
    # What the fold kept is what the stored pageviews add up to.
    kept = await _session_figures(deps.store, tenant.site_id)
    await daily_figures.rebuild_site(deps.store, tenant.site_id)
    assert await _session_figures(deps.store, tenant.site_id) == kept


async def test_the_landing_pageview_keeps_its_source_as_a_raw_fact(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest):
    await _traffic(ingest, deps)
    export = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/ada/export.json",
                         token=tenant.token)
    assert export.code == 200, export
    pageviews = export.json()["pageviews"]
    assert pageviews[0]["source"] == {"referrerDomain": "mail.example.com",
                                      "utmSource": "newsletter", "utmMedium": "email",
                                      "utmCampaign": "spring"}
    # A pageview reached from the shop's own page came from nowhere outside it.
    assert [view.get("source") for view in pageviews[1:]] == [None, None]
    assert [(visit["entry"], visit["exit"]) for visit in export.json()["visits"]] == [
        ("/", "/cart")]


async def test_erasure_takes_the_visitors_sessions_out_exactly(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _traffic(ingest, deps)
    # One more pageview of cy's, not folded yet when the erasure comes.
    await ingest("pageviews", {"visitorId": "cy", "sessionId": "c1", "pageviewId": "late",
                               "url": f"{SHOP}/checkout", "occurredAt": _at(20)})
    erased = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/cy/data", "DELETE",
                         token=tenant.token)
    assert erased.code == 200, erased
    assert erased.json()["counts"]["visits"] == 1
    await deps.derivation.fold()
    traffic = await _overview_traffic(fetch, tenant, viewer_token)
    assert traffic["sessions"] == 4
    assert _named(traffic["sources"]) == {"google.com": 1, "(direct)": 1, "203.0.113.0": 1,
                                          "newsletter": 1}
    assert _named(traffic["entryPages"]) == {"/": 3, "/product/x": 1}
    assert _named(traffic["exitPages"]) == {"/": 2, "/cart": 1, "/checkout": 1}
    kept = await _session_figures(deps.store, tenant.site_id)
    assert "cy" not in repr(kept)
    await daily_figures.rebuild_site(deps.store, tenant.site_id)
    assert await _session_figures(deps.store, tenant.site_id) == kept


async def test_a_restriction_takes_the_sessions_out_until_it_is_lifted(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _traffic(ingest, deps)
    before = await _session_figures(deps.store, tenant.site_id)
    switch = f"/api/v1/sites/{tenant.site_id}/visitors/ben/restriction"
    answer = await fetch(switch, "PUT", json_body={"on": True}, token=tenant.token)
    assert answer.code == 200, answer
    traffic = await _overview_traffic(fetch, tenant, viewer_token)
    assert traffic["sessions"] == 3
    assert _named(traffic["sources"]) == {"google.com": 1, "203.0.113.0": 1, "newsletter": 1}
    answer = await fetch(switch, "PUT", json_body={"on": False}, token=tenant.token)
    assert answer.code == 200, answer
    assert await _session_figures(deps.store, tenant.site_id) == before


async def test_a_store_from_before_visits_gets_them_from_its_stored_pageviews(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _traffic(ingest, deps)
    kept = await _session_figures(deps.store, tenant.site_id)
    # As a store written by the version before: pageviews without their source, no visits,
    # no session figures, the migration never run.
    buckets = deps.store.collection("pageview_buckets")
    async for bucket in buckets.find({"siteId": tenant.site_id}):
        events = [{k: v for k, v in event.items() if k != "source"} for event in bucket["events"]]
        await buckets.update_one({"_id": bucket["_id"]}, {"$set": {"events": events}})
    for collection in (visits.COLLECTION, daily_figures.SESSION_DAYS, migrations.COLLECTION):
        await deps.store.collection(collection).delete_many({})
    await store_setup.prepare_store(deps.store)
    assert await _session_figures(deps.store, tenant.site_id) == kept
    traffic = await _overview_traffic(fetch, tenant, viewer_token)
    assert _named(traffic["utmCampaigns"]) == {"spring": 1}


async def test_visits_go_with_the_pageviews_past_their_retention_and_the_figures_stay(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest):
    await _traffic(ingest, deps)
    kept = await _session_figures(deps.store, tenant.site_id)
    changed = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", token=tenant.token,
                          json_body={"settings": {"retentionDays": {"activity": 30}}})
    assert changed.code == 200, changed
    report = await make_purger(deps.store).purge(datetime.now(UTC) + timedelta(days=31))
    assert report is not None
    assert await deps.store.collection(visits.COLLECTION).count_documents({}) == 0
    assert await deps.store.collection("pageview_buckets").count_documents({}) == 0
    assert await _session_figures(deps.store, tenant.site_id) == kept
