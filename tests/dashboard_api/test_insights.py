"""Issue 21's reads in the data API, on data sent through the real ingest endpoints: a
recording's timeline and the recording of an error's moment, recordings and visitors filtered
by what happened, and the overview of a date range against the previous period."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest, send_errors

SHOP = "https://shop.example"
DESKTOP = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
PHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
         "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1")
#: Addresses the packaged country database places in Great Britain and Germany.
GB_IP, DE_IP = "81.2.69.160", "85.214.132.117"


def _site(tenant: Tenant, rest: str) -> str:
    return f"/api/v1/sites/{tenant.site_id}{rest}"


async def _session(ingest: Ingest, deps, visitor: str, *, ip: str, agent: str, page: str,
                   error: bool = False, rage: bool = False, lead: bool = False) -> str:
    """A recorded visit: the recording, a pageview, clicks, and what else is asked for."""
    context = {"visitorId": visitor, "sessionId": f"{visitor}-s", "ip": ip, "userAgent": agent,
               "url": f"{SHOP}{page}"}
    recording_id = str(uuid.uuid4())
    await ingest("recordings/start", {**context, "recordingId": recording_id})
    await ingest("pageviews", context)
    clicks = [{"kind": "click", "selector": "#buy"}, {"kind": "dead_click", "selector": "h1"}]
    if rage:
        clicks.append({"kind": "rage_click", "selector": "#coupon", "count": 5})
    await ingest("recordings/interactions", {**context, "recordingId": recording_id,
                                             "interactions": clicks})
    if lead:
        await ingest("leads", {**context, "email": f"{visitor}@example.com", "name": visitor})
    if error:
        await send_errors(ingest, deps, [{
            **context, "source": "javascript", "type": "TypeError",
            "message": "coupon.rules is undefined"}])
    await deps.derivation.fold()
    return recording_id


async def test_a_recording_lists_what_happened_during_it_and_an_error_leads_to_it(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    recording_id = await _session(ingest, deps, "ada", ip=GB_IP, agent=DESKTOP, page="/cart",
                                  error=True, rage=True, lead=True)
    timeline = await fetch(_site(tenant, f"/recordings/{recording_id}/timeline"),
                           token=viewer_token)
    assert timeline.code == 200, timeline
    events = timeline.json()["events"]
    assert sorted({event["kind"] for event in events}) == [
        "dead_click", "error", "lead", "page", "rage_click"]  # a plain click is no marker
    assert [event["at"] for event in events] == sorted(event["at"] for event in events)
    labels = {event["kind"]: event["label"] for event in events}
    assert labels["error"] == "TypeError: coupon.rules is undefined"
    assert labels["rage_click"] == "Rage click (5×) on #coupon"
    assert labels["page"] == "/cart"

    error_id = next(event["errorId"] for event in events if event["kind"] == "error")
    replays = (await fetch(_site(tenant, f"/errors/{error_id}/replays"),
                           token=viewer_token)).json()
    assert [item["recordingId"] for item in replays["items"]] == [recording_id]
    assert replays["items"][0]["visitorId"] == "ada"
    unknown = await fetch(_site(tenant, f"/recordings/{uuid.uuid4()}/timeline"),
                          token=viewer_token)
    assert unknown.code == 404


async def test_an_error_outside_any_recording_has_nothing_to_replay(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _session(ingest, deps, "ada", ip=GB_IP, agent=DESKTOP, page="/cart")
    earlier = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    await send_errors(ingest, deps, [{
        "visitorId": "ada", "sessionId": "ada-s", "source": "php", "type": "E_WARNING",
        "message": "Undefined index: shipping", "occurredAt": earlier}])
    trends = (await fetch(_site(tenant, "/error-trends"), token=viewer_token)).json()
    error_id = trends["items"][0]["id"]
    replays = (await fetch(_site(tenant, f"/errors/{error_id}/replays"),
                           token=viewer_token)).json()
    assert replays["items"] == []


async def test_recordings_filter_by_marks_device_country_page_and_date(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    troubled = await _session(ingest, deps, "ada", ip=GB_IP, agent=DESKTOP, page="/checkout",
                              error=True, rage=True)
    calm = await _session(ingest, deps, "ben", ip=DE_IP, agent=PHONE, page="/blog", lead=True)

    async def ids(query: str) -> list[str]:
        answer = await fetch(_site(tenant, f"/recordings?{query}"), token=viewer_token)
        assert answer.code == 200, answer
        return [item["id"] for item in answer.json()["items"]]

    assert await ids("") == [calm, troubled]
    assert await ids("has=error") == [troubled]
    assert await ids("has=rage_click,error") == [troubled]
    assert await ids("has=lead") == [calm]
    assert await ids("has=dead_click") == [calm, troubled]
    assert await ids("device=mobile") == [calm]
    assert await ids("country=gb") == [troubled]
    assert await ids("page=checkout") == [troubled]
    assert await ids("maxDuration=3600&minDuration=0") == [calm, troubled]
    assert await ids("minDuration=3600") == []
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    assert await ids(f"from={tomorrow}") == []
    today = datetime.now(UTC).date().isoformat()
    assert await ids(f"from={today}&to={today}") == [calm, troubled]
    row = (await fetch(_site(tenant, "/recordings?has=error"), token=viewer_token)).json()
    assert row["items"][0]["marks"] == {"error": 1, "rage_click": 1, "dead_click": 1, "lead": 0}
    assert row["items"][0]["country"] == "GB" and row["items"][0]["device"] == "desktop"
    for wrong in ("has=coffee", "device=toaster", "country=GBR", "minDuration=-1",
                  "from=yesterday"):
        assert (await fetch(_site(tenant, f"/recordings?{wrong}"),
                            token=viewer_token)).code == 422, wrong


async def test_a_filtered_recordings_page_is_full_and_read_from_the_recordings_alone(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str, faults):
    older = await _session(ingest, deps, "ada", ip=GB_IP, agent=DESKTOP, page="/cart",
                           rage=True)
    await _session(ingest, deps, "ben", ip=DE_IP, agent=PHONE, page="/blog")
    newer = await _session(ingest, deps, "cy", ip=GB_IP, agent=DESKTOP, page="/cart", rage=True)
    faults.record_calls = True

    first = (await fetch(_site(tenant, "/recordings?has=rage_click&country=GB&limit=1"),
                         token=viewer_token)).json()

    read = {collection for collection, _ in faults.calls}
    assert not read & {"error_occurrences", "interaction_buckets", "leads"}, read
    # One read: the page's recordings all started within the newest window (a day).
    assert [call for call in faults.calls if call[0] == "recordings"] == [
        ("recordings", "aggregate")]
    assert [item["id"] for item in first["items"]] == [newer] and "searchedTo" not in first
    assert first["items"][0]["visitorName"] == "Visitor #cy"
    second = (await fetch(_site(tenant, "/recordings?has=rage_click&country=GB&limit=1&cursor="
                                f"{first['nextCursor']}"), token=viewer_token)).json()
    assert [item["id"] for item in second["items"]] == [older]
    assert second["nextCursor"] is None


async def test_visitors_are_searched_and_filtered_by_what_is_known_of_them(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _session(ingest, deps, "ada", ip=GB_IP, agent=DESKTOP, page="/cart", error=True)
    await _session(ingest, deps, "ben", ip=DE_IP, agent=PHONE, page="/blog", lead=True)
    await ingest("visitors", {"visitorId": "cy", "wpUserId": 12, "ip": DE_IP,
                              "userAgent": DESKTOP})

    async def ids(query: str) -> list[str]:
        answer = await fetch(_site(tenant, f"/visitors?{query}"), token=viewer_token)
        assert answer.code == 200, answer
        return sorted(item["visitorId"] for item in answer.json()["items"])

    assert await ids("") == ["ada", "ben", "cy"]
    assert await ids("country=DE") == ["ben", "cy"]
    assert await ids("device=mobile") == ["ben"]
    assert await ids("loggedIn=true") == ["cy"]
    assert await ids("loggedIn=false") == ["ada", "ben"]
    assert await ids("hasLead=true") == ["ben"]
    assert await ids("hasError=true") == ["ada"]
    assert await ids("hasError=false&country=DE") == ["ben", "cy"]
    assert await ids("q=be&hasLead=true") == ["ben"]
    today = datetime.now(UTC).date().isoformat()
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    assert await ids(f"firstSeenFrom={today}&lastSeenTo={today}") == ["ada", "ben", "cy"]
    assert await ids(f"lastSeenFrom={tomorrow}") == []
    flagged = (await fetch(_site(tenant, "/visitors?hasError=true"), token=viewer_token)).json()
    assert flagged["items"][0]["hasError"] is True
    assert (await fetch(_site(tenant, "/visitors?loggedIn=maybe"),
                        token=viewer_token)).code == 422


async def test_the_overview_compares_the_period_with_the_one_before(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    now = datetime.now(UTC)
    await _session(ingest, deps, "ada", ip=GB_IP, agent=DESKTOP, page="/cart", error=True,
                   rage=True, lead=True)
    await _session(ingest, deps, "ben", ip=DE_IP, agent=PHONE, page="/cart")
    await ingest("pageviews", {"visitorId": "ben", "url": f"{SHOP}/blog?page=2"})
    # The week before: one visitor, two pageviews and no lead.
    for hours in (200, 201):
        await ingest("pageviews", {"visitorId": "old", "url": f"{SHOP}/",
                                   "occurredAt": (now - timedelta(hours=hours)).isoformat()})
    await deps.derivation.fold()
    first = (now - timedelta(days=6)).date().isoformat()
    answer = await fetch(_site(tenant, f"/overview?from={first}&to={now.date().isoformat()}"),
                         token=viewer_token)
    assert answer.code == 200, answer
    overview = answer.json()
    figures = overview["figures"]
    assert figures["visitors"] == {"value": 2, "previous": 1, "change": 1.0}
    assert figures["pageviews"] == {"value": 3, "previous": 2, "change": 0.5}
    assert figures["errors"]["value"] == 1 and figures["errors"]["change"] is None
    assert figures["leads"]["value"] == 1
    assert figures["leadsPerVisitor"]["value"] == 0.5
    assert overview["topPages"][0] == {"name": "/cart", "count": 2, "share": round(2 / 3, 4)}
    assert overview["topErrors"][0]["message"] == "coupon.rules is undefined"
    assert overview["frustration"][0] == {"page": "/cart", "rageClicks": 1, "deadClicks": 2}
    assert {row["name"] for row in overview["countries"]} == {"GB", "DE"}
    assert {row["name"]: row["share"] for row in overview["devices"]} == {
        "desktop": 0.5, "mobile": 0.5}
    assert overview["previous"]["to"] == (now - timedelta(days=7)).date().isoformat()
    too_long = await fetch(_site(tenant, "/overview?from=2020-01-01&to=2026-01-01"),
                           token=viewer_token)
    assert too_long.code == 422
