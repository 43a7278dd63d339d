"""Sessions by outcome and saved segments (issue 41 point 5), from sessions sent through the real
ingest (pageviews, commerce, errors, rage and dead clicks) and folded into visits. Expected lists
are worked out by hand below.

The shop reports in EUR. Days are UTC days before today; times are 08:00 plus minutes:

| s  | who | day       | device, country | pages, entry first            | from       | outcome   |
|----|-----|-----------|-----------------|-------------------------------|------------|-----------|
| s1 | ann | 5         | desktop, GB     | /?utm, /product/a, /checkout  | spring (+) | 40 EUR    |
| s2 | bob | 4         | phone, DE       | /product/b, /cart             | google.com | error     |
| s3 | cat | 3         | desktop, DE     | /?utm, /product/a, /pay       | summer (+) | 120 EUR * |
| s4 | dan | 2         | phone, GB       | /blog (a rage click)          | (direct)   | -         |
| s8 | hal | 2, 09:00  | desktop, GB     | /product/a                    | (direct)   | -         |
| s5 | eve | 1         | desktop, GB     | /product/b, /checkout         | (direct)   | 15 USD    |
| s6 | fay | 1         | phone, DE       | /cart                         | google.com | 60 EUR ** |

(+) utm_source newsletter and that utm_campaign. Outcomes are paid orders.
(*) 20 EUR of o3 refunded, so s3's value is 100 EUR; a dead click on /pay.
(**) fay is restricted.

Newest start first: s5, s8, s4, s3, s2, s1 (s6 is a restricted visitor's, never listed).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from derived import visits
from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest, send_errors

SHOP = "https://shop.example"
TODAY = datetime.now(UTC).date()
GB_IP, DE_IP = "81.2.69.160", "85.214.132.117"
PHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
         "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1")
DESKTOP = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
NEWEST_FIRST = ["s5", "s8", "s4", "s3", "s2", "s1"]


def _day(days_ago: int) -> date:
    return TODAY - timedelta(days=days_ago)


def _at(days_ago: int, minute: int = 0, hour: int = 8) -> str:
    day = _day(days_ago)
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC).isoformat()


async def _visit(ingest: Ingest, visitor: str, session: str, days_ago: int, agent: str, ip: str,
                 pages: list[tuple[int, str]], *, referrer: str | None = None,
                 hour: int = 8) -> None:
    for n, (minute, path) in enumerate(pages):
        body: dict[str, Any] = {"visitorId": visitor, "sessionId": session, "userAgent": agent,
                                "ip": ip, "url": f"{SHOP}{path}",
                                "occurredAt": _at(days_ago, minute, hour)}
        if path.startswith("/product/"):
            body["productId"] = path.rsplit("/", 1)[1]
        if referrer and n == 0:
            body["referrer"] = referrer
        await ingest("pageviews", body)


async def _paid(ingest: Ingest, order: str, visitor: str, session: str, total: str,
                currency: str, days_ago: int, minute: int, refunded: str | None = None) -> None:
    context = {"visitorId": visitor, "sessionId": session}
    await ingest("commerce", {"eventId": f"{order}-placed", "type": "order_placed", **context,
                              "orderId": order, "total": total, "currency": currency,
                              "occurredAt": _at(days_ago, minute)})
    await ingest("commerce", {"eventId": f"{order}-paid", "type": "order_paid", "orderId": order,
                              "occurredAt": _at(days_ago, minute + 1)})
    if refunded:
        await ingest("commerce", {"eventId": f"{order}-refund", "type": "order_refunded",
                                  "orderId": order, "amount": refunded, "currency": currency,
                                  "occurredAt": _at(days_ago, minute + 2)})


async def _click(ingest: Ingest, visitor: str, session: str, path: str, kind: str,
                 days_ago: int, minute: int) -> None:
    await ingest("recordings/interactions", {
        "visitorId": visitor, "sessionId": session, "url": f"{SHOP}{path}",
        "interactions": [{"kind": kind, "selector": "#pay", "count": 3 if kind == "rage_click"
                          else 1, "at": _at(days_ago, minute)}]})


async def _shop(fetch: Fetch, tenant: Tenant, ingest: Ingest, deps) -> str:
    """The sessions of the table above; returns the id of the error s2 met."""
    chosen = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH",
                         json_body={"settings": {"reportingCurrency": "EUR"}}, token=tenant.token)
    assert chosen.code == 200, chosen
    await _visit(ingest, "ann", "s1", 5, DESKTOP, GB_IP, [
        (0, "/?utm_source=Newsletter&utm_campaign=spring"), (1, "/product/a"), (3, "/checkout")])
    await _paid(ingest, "o1", "ann", "s1", "40.00", "EUR", 5, 4)
    await _visit(ingest, "bob", "s2", 4, PHONE, DE_IP, [(0, "/product/b"), (2, "/cart")],
                 referrer="https://www.google.com/")
    await send_errors(ingest, deps, [{
        "visitorId": "bob", "sessionId": "s2", "source": "javascript", "type": "TypeError",
        "message": "cart is undefined", "url": f"{SHOP}/cart", "occurredAt": _at(4, 2),
        "stack": "TypeError: cart is undefined\n    at add (https://shop.example/cart.js:1:1)"}])
    await _visit(ingest, "cat", "s3", 3, DESKTOP, DE_IP, [
        (0, "/?utm_source=newsletter&utm_campaign=summer"), (1, "/product/a"), (2, "/pay")])
    await _click(ingest, "cat", "s3", "/pay", "dead_click", 3, 3)
    await _paid(ingest, "o3", "cat", "s3", "120.00", "EUR", 3, 5, refunded="20.00")
    await _visit(ingest, "dan", "s4", 2, PHONE, GB_IP, [(0, "/blog")])
    await _click(ingest, "dan", "s4", "/blog", "rage_click", 2, 0)
    await _visit(ingest, "hal", "s8", 2, DESKTOP, GB_IP, [(0, "/product/a")], hour=9)
    await _visit(ingest, "eve", "s5", 1, DESKTOP, GB_IP, [(0, "/product/b"), (5, "/checkout")])
    await _paid(ingest, "o5", "eve", "s5", "15.00", "USD", 1, 6)
    await _visit(ingest, "fay", "s6", 1, PHONE, DE_IP, [(10, "/cart")],
                 referrer="https://google.com/")
    await _paid(ingest, "o6", "fay", "s6", "60.00", "EUR", 1, 11)
    await deps.derivation.fold()
    held = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/fay/restriction", "PUT",
                       json_body={"on": True}, token=tenant.token)
    assert held.code == 200, held
    error = await deps.store.collection("errors").find_one({"message": "cart is undefined"})
    return error["_id"]


@pytest.fixture
async def shop(fetch: Fetch, tenant: Tenant, ingest: Ingest, deps) -> str:
    return await _shop(fetch, tenant, ingest, deps)


async def _list(fetch: Fetch, tenant: Tenant, query: str = "", *, token: str | None = None
                ) -> dict[str, Any]:
    separator = "&" if "?" in query else "?"
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/sessions{query}{separator}"
                         f"from={_day(10)}", token=token or tenant.token)
    assert answer.code == 200, (query, answer)
    return answer.json()


async def _ids(fetch: Fetch, tenant: Tenant, query: str = "") -> list[str]:
    return [row["sessionId"] for row in (await _list(fetch, tenant, query))["items"]]


async def test_sessions_are_listed_newest_first_with_their_outcome_source_and_links(
        fetch: Fetch, tenant: Tenant, shop: str, viewer_token: str):
    page = await _list(fetch, tenant, token=viewer_token)
    assert [row["sessionId"] for row in page["items"]] == NEWEST_FIRST
    assert page["nextCursor"] is None
    rows = {row["sessionId"]: row for row in page["items"]}
    s1, s3, s5 = rows["s1"], rows["s3"], rows["s5"]
    assert (s1["visitorId"], s1["entry"], s1["exit"], s1["pageviews"], s1["duration"]) == (
        "ann", "/", "/checkout", 3, 180.0)
    assert (s1["source"], s1["utmCampaign"], s1["device"], s1["country"]) == (
        "newsletter", "spring", "desktop", "GB")
    assert s1["visitorLabel"] and s1["visitorLabel"] != "ann"
    assert s1["outcome"] == {"converted": True, "orders": 1, "currency": "EUR", "value": "40.00",
                             "otherCurrencies": []}
    # 120.00 less the 20.00 refunded.
    assert s3["outcome"]["value"] == "100.00" and s3["frustrated"] == 1
    # Paid in USD only: no value in the reporting currency, the USD apart.
    assert s5["outcome"] == {"converted": True, "orders": 1, "currency": "EUR", "value": None,
                             "otherCurrencies": [{"currency": "USD", "value": "15.00"}]}
    assert (rows["s2"]["errors"], rows["s2"]["outcome"]["converted"]) == (1, False)
    assert rows["s4"]["frustrated"] == 1 and rows["s8"]["errors"] == 0
    assert s1["links"] == {"visitor": f"/app/sites/{tenant.site_id}/visitors/ann",
                           "replay": None}
    assert s1["startedAt"] == _at(5).replace("+00:00", ".000Z")


async def test_each_filter_leaves_the_sessions_it_names(fetch: Fetch, tenant: Tenant, shop: str):
    expected = {
        "?converted=true": ["s5", "s3", "s1"],
        "?converted=false": ["s8", "s4", "s2"],
        # Values in EUR: s1 40.00, s3 100.00; s5 paid in USD only. Both ends included.
        "?minValue=50": ["s3"],
        "?maxValue=50": ["s1"],
        "?minValue=40&maxValue=100.00": ["s3", "s1"],
        "?minValue=100.01": [],
        "?utmCampaign=spring": ["s1"],
        "?utmCampaign=SUMMER": ["s3"],
        "?utmSource=newsletter": ["s3", "s1"],
        "?source=google.com": ["s2"],
        "?source=(direct)": ["s5", "s8", "s4"],
        "?entry=/": ["s3", "s1"],
        "?entry=/product/*": ["s5", "s8", "s2"],
        "?exit=/checkout": ["s5", "s1"],
        "?exit=/pay": ["s3"],
        "?page=/product/a": ["s8", "s3", "s1"],
        "?page=/cart": ["s2"],
        "?page=/product/*": NEWEST_FIRST[:2] + ["s3", "s2", "s1"],
        f"?error={shop}": ["s2"],
        "?frustration=/pay": ["s3"],
        "?frustration=/blog": ["s4"],
        "?device=mobile": ["s4", "s2"],
        "?device=desktop": ["s5", "s8", "s3", "s1"],
        "?country=DE": ["s3", "s2"],
        "?country=gb": ["s5", "s8", "s4", "s1"],
        # Combined, every one holds.
        "?converted=true&country=GB": ["s5", "s1"],
        "?utmSource=newsletter&minValue=50": ["s3"],
        "?page=/product/a&device=desktop&converted=false": ["s8"],
        "?entry=/product/*&exit=/checkout": ["s5"],
        "?country=DE&frustration=/blog": [],
    }
    found = {query: await _ids(fetch, tenant, query) for query in expected}
    assert found == expected


async def test_the_range_is_of_the_day_a_session_started(fetch: Fetch, tenant: Tenant,
                                                         shop: str):
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/sessions?from={_day(3)}&to={_day(2)}",
                         token=tenant.token)
    assert [row["sessionId"] for row in answer.json()["items"]] == ["s8", "s4", "s3"]
    # The last 30 days by default.
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/sessions?converted=true",
                         token=tenant.token)
    assert [row["sessionId"] for row in answer.json()["items"]] == ["s5", "s3", "s1"]


async def test_pages_by_cursor_without_gaps_or_repeats(fetch: Fetch, tenant: Tenant, shop: str):
    pages, cursor = [], None
    while True:
        page = await _list(fetch, tenant, "?limit=4" + (f"&cursor={cursor}" if cursor else ""))
        pages.append([row["sessionId"] for row in page["items"]])
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert pages == [NEWEST_FIRST[:4], NEWEST_FIRST[4:]]
    first = await _list(fetch, tenant, "?limit=1&converted=true")
    second = await _list(fetch, tenant, f"?limit=2&converted=true&cursor={first['nextCursor']}")
    assert [row["sessionId"] for row in second["items"]] == ["s3", "s1"]


async def test_visits_folded_before_their_filter_keys_get_them_at_start(
        fetch: Fetch, tenant: Tenant, shop: str, deps):
    await deps.store.collection(visits.COLLECTION).update_many(
        {"siteId": tenant.site_id}, {"$unset": {"filterKeys": "", "orderValues": ""}})
    assert await _ids(fetch, tenant, "?converted=true") == []
    await visits.add_filter_keys(deps.store)
    assert await _ids(fetch, tenant, "?converted=true") == ["s5", "s3", "s1"]
    assert await _ids(fetch, tenant, "?minValue=100") == ["s3"]


async def test_a_restricted_or_erased_visitors_sessions_are_left_out(
        fetch: Fetch, tenant: Tenant, shop: str):
    lifted = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/fay/restriction", "PUT",
                         json_body={"on": False}, token=tenant.token)
    assert lifted.code == 200, lifted
    assert await _ids(fetch, tenant, "?converted=true") == ["s6", "s5", "s3", "s1"]
    assert await _ids(fetch, tenant, "?minValue=60&maxValue=60") == ["s6"]
    erased = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/hal/data", "DELETE",
                         token=tenant.token)
    assert erased.code == 200, erased
    assert await _ids(fetch, tenant, "?page=/product/a") == ["s3", "s1"]


async def test_filters_that_cannot_be_answered_are_refused(fetch: Fetch, tenant: Tenant):
    for query, field in (("?converted=maybe", "converted"), ("?minValue=1.2345", "minValue"),
                         ("?minValue=50&maxValue=10", "minValue"),
                         ("?converted=false&minValue=10", "converted"),
                         ("?entry=cart", "entry"), ("?country=DEU", "country"),
                         ("?error=not-an-id", "error"), ("?cursor=bm90LWEtY3Vyc29y", "cursor"),
                         ("?segment=0f0e0d0c-0b0a-4909-8807-060504030201", "segment"),
                         # No reporting currency yet (no setting, no paid order).
                         ("?minValue=10", "minValue")):
        answer = await fetch(f"/api/v1/sites/{tenant.site_id}/sessions{query}",
                             token=tenant.token)
        assert answer.code == 422, (query, answer)
        assert answer.json()["error"]["field"] == field, query


async def test_another_organizations_user_sees_neither_sessions_nor_segments(
        fetch: Fetch, tenant: Tenant, shop: str, make_tenant):
    segment = await _save(fetch, tenant, "Buyers", {"converted": True})
    stranger = await make_tenant("stranger")
    base = f"/api/v1/sites/{tenant.site_id}"
    for path, method, body in ((f"{base}/sessions", "GET", None),
                               (f"{base}/saved-segments", "GET", None),
                               (f"{base}/saved-segments", "POST",
                                {"name": "Mine", "filters": {"converted": True}}),
                               (f"{base}/saved-segments/{segment['id']}", "GET", None),
                               (f"{base}/saved-segments/{segment['id']}", "DELETE", None)):
        answer = await fetch(path, method, json_body=body, token=stranger.token)
        assert answer.code == 404, (path, method, answer)
        assert "ann" not in answer.body.decode()
    # ...nor can a segment of another site be applied to their own.
    own = await fetch(f"/api/v1/sites/{stranger.site_id}/sessions?segment={segment['id']}",
                      token=stranger.token)
    assert own.code == 422 and own.json()["error"]["field"] == "segment"


# Saved segments -------------------------------------------------------------------------------


async def _save(fetch: Fetch, tenant: Tenant, name: str, filters: dict[str, Any]
                ) -> dict[str, Any]:
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/saved-segments", "POST",
                         json_body={"name": name, "filters": filters}, token=tenant.token)
    assert answer.code == 201, answer
    return answer.json()


async def _audit(deps, site_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(entry["action"], entry["details"]) async for entry in deps.store.collection(
        "audit_log").find({"siteId": site_id, "action": {"$regex": "^segment"}}).sort("at", 1)]


async def test_segments_are_saved_named_changed_and_deleted_by_admins_and_audited(
        fetch: Fetch, tenant: Tenant, deps, viewer_token: str):
    base = f"/api/v1/sites/{tenant.site_id}/saved-segments"
    created = await _save(fetch, tenant, "Newsletter buyers",
                          {"converted": True, "utmSource": "Newsletter", "country": "gb"})
    # Written one way, as the list reads them.
    assert created["filters"] == {"converted": True, "utmSource": "newsletter", "country": "GB"}
    await _save(fetch, tenant, "Checkout errors", {"exit": "/checkout", "page": "/cart"})
    listed = await fetch(base, token=viewer_token)
    assert [s["name"] for s in listed.json()] == ["Checkout errors", "Newsletter buyers"]
    # A name is the site's once, whatever its case.
    taken = await fetch(base, "POST", json_body={"name": "newsletter BUYERS",
                                                 "filters": {"device": "mobile"}},
                        token=tenant.token)
    assert taken.code == 409 and taken.json()["error"]["code"] == "segment_name_taken"
    for body, field in (({"name": "Empty", "filters": {}}, "filters"),
                        ({"name": "Bad", "filters": {"entry": "cart"}}, "filters.entry"),
                        ({"name": "Bad", "filters": {"minValue": "5", "maxValue": "1"}},
                         "filters.minValue"),
                        ({"name": "Bad", "filters": {"from": "2026-01-01"}}, "filters.from"),
                        ({"name": " ", "filters": {"device": "mobile"}}, "name")):
        refused = await fetch(base, "POST", json_body=body, token=tenant.token)
        assert refused.code == 422, (body, refused)
        assert refused.json()["error"]["field"] == field, body
    # Viewers read but do not change.
    assert (await fetch(base, "POST", json_body={"name": "Mine", "filters": {"device": "mobile"}},
                        token=viewer_token)).code == 403
    one = f"{base}/{created['id']}"
    assert (await fetch(one, token=viewer_token)).json()["name"] == "Newsletter buyers"
    assert (await fetch(one, "DELETE", token=viewer_token)).code == 403
    changed = await fetch(one, "PATCH", json_body={"name": "Buyers", "filters": {
        "converted": True, "utmSource": "newsletter", "country": "GB"}}, token=tenant.token)
    assert changed.code == 200 and changed.json()["name"] == "Buyers"
    unchanged = await fetch(one, "PATCH", json_body={"name": "Buyers"}, token=tenant.token)
    assert unchanged.code == 200
    renamed_onto = await fetch(one, "PATCH", json_body={"name": "CHECKOUT errors"},
                               token=tenant.token)
    assert renamed_onto.code == 409
    deleted = await fetch(one, "DELETE", token=tenant.token)
    assert deleted.code == 204
    assert (await fetch(one, token=tenant.token)).code == 404
    # Field names only, and nothing for a change that changed nothing.
    assert await _audit(deps, tenant.site_id) == [
        ("segment.created", {"segmentId": created["id"]}),
        ("segment.created", {"segmentId": listed.json()[0]["id"]}),
        ("segment.changed", {"segmentId": created["id"], "fields": ["name"]}),
        ("segment.deleted", {"segmentId": created["id"]}),
    ]
    export = await fetch("/auth/me/export.json", token=tenant.token)
    assert [s["name"] for s in export.json()["sites"][0]["segments"]] == ["Checkout errors"]


async def test_a_segment_filters_sessions_recordings_visitors_and_funnels(
        fetch: Fetch, tenant: Tenant, shop: str, ingest: Ingest, deps):
    base = f"/api/v1/sites/{tenant.site_id}"
    desktop = await _save(fetch, tenant, "Desktop product viewers",
                          {"device": "desktop", "entry": "/product/*"})
    buyers = await _save(fetch, tenant, "Buyers", {"converted": True})
    # s5 and s8 entered on a product page on a desktop; with the page's own filter too, s5.
    assert await _ids(fetch, tenant, f"?segment={desktop['id']}") == ["s5", "s8"]
    assert await _ids(fetch, tenant, f"?segment={desktop['id']}&converted=true") == ["s5"]
    # Visitors: those with a session of the segment.
    visitors = await fetch(f"{base}/visitors?segment={buyers['id']}", token=tenant.token)
    assert visitors.code == 200, visitors
    assert sorted(v["visitorId"] for v in visitors.json()["items"]) == ["ann", "cat", "eve"]
    # Recordings: those of the segment's sessions in the range.
    for n, (visitor, session) in enumerate((("eve", "s5"), ("hal", "s8"))):
        await ingest("recordings/start", {"visitorId": visitor, "sessionId": session,
                                          "url": f"{SHOP}/product/b",
                                          "recordingId": f"00000000-0000-4000-8000-00000000000{n}"})
    recordings = await fetch(f"{base}/recordings?segment={buyers['id']}", token=tenant.token)
    assert recordings.code == 200, recordings
    assert [r["sessionId"] for r in recordings.json()["items"]] == ["s5"]
    recordings = await fetch(f"{base}/recordings?segment={desktop['id']}", token=tenant.token)
    assert sorted(r["sessionId"] for r in recordings.json()["items"]) == ["s5", "s8"]
    # Funnels: only the segment's sessions are counted. Of the buyers, s1 and s3 viewed a
    # product and neither added to the cart; s5 viewed one too.
    report = await fetch(f"{base}/funnels/shop/report?from={_day(10)}&to={TODAY}"
                         f"&segment={buyers['id']}", token=tenant.token)
    assert report.code == 200, report
    assert report.json()["sessions"] == 3
    assert [step["sessions"] for step in report.json()["steps"]] == [3, 0, 0, 0]
    everyone = await fetch(f"{base}/funnels/shop/report?from={_day(10)}&to={TODAY}",
                           token=tenant.token)
    assert everyone.json()["sessions"] == 6
    missing = await fetch(f"{base}/visitors?segment=0f0e0d0c-0b0a-4909-8807-060504030201",
                          token=tenant.token)
    assert missing.code == 422 and missing.json()["error"]["field"] == "segment"
