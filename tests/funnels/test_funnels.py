"""Funnels (issue 31 point 3, issue 41 point 3): the shop funnel and a funnel of page patterns
over crafted sessions whose counts, conversions, drop-offs, medians, breakdowns, conversion per
day and week and against the previous period are worked out by hand below; the recordings of
the sessions that stopped at a step; definitions stored per site, edited and audited; erasure
and restriction keep the reports exact."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from tests.retention.conftest import make_purger
from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest

SHOP = "https://shop.example"
PHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
         "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1")
DESKTOP = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
#: Two hours ago: every event below is in the past.
BASE = (datetime.now(UTC) - timedelta(hours=2)).replace(second=0, microsecond=0)
RECORDINGS = {"s4": "00000000-0000-4000-8000-000000000004",
              "s5": "00000000-0000-4000-8000-000000000005",
              "s1": "00000000-0000-4000-8000-000000000001"}


def _at(minute: float) -> str:
    return (BASE + timedelta(minutes=minute)).isoformat()


async def _sessions(ingest: Ingest, deps) -> None:
    """Six sessions of six visitors:

    s1 desktop, from google.com: product view 0', cart 2', checkout 5', paid order 9' (step 4)
    s2 phone, direct: product view 0', cart 4', checkout 10' (step 3)
    s3 desktop, direct: product view 0', cart 6' (step 2)
    s4 phone, newsletter campaign: product view 0' (step 1)
    s5 desktop, direct: cart 1', then a product view 3' and no cart after it (step 1)
    s6 desktop, direct: the home page only (no step)
    """
    sessions = [
        ("v1", "s1", DESKTOP, "https://www.google.com/", [
            (0, "/product/a", True), (2, "/cart", False), (5, "/checkout", False)],
         [(2, "add_to_cart"), (5, "checkout_started"), (9, "order")]),
        ("v2", "s2", PHONE, None, [(0, "/product/a", True), (4, "/cart", False),
                                   (10, "/checkout", False)],
         [(4, "add_to_cart"), (10, "checkout_started")]),
        ("v3", "s3", DESKTOP, None, [(0, "/product/b", True), (6, "/cart", False)],
         [(6, "add_to_cart")]),
        ("v4", "s4", PHONE, None, [(0, "/product/b?utm_source=newsletter", True)], []),
        ("v5", "s5", DESKTOP, None, [(1, "/cart", False), (3, "/product/b", True)],
         [(1, "add_to_cart")]),
        ("v6", "s6", DESKTOP, None, [(0, "/", False)], []),
    ]
    for visitor, session, agent, referrer, pages, events in sessions:
        context = {"visitorId": visitor, "sessionId": session, "userAgent": agent}
        for n, (minute, page, product) in enumerate(pages):
            body: dict[str, Any] = {**context, "url": f"{SHOP}{page}", "occurredAt": _at(minute),
                                    "pageviewId": f"{session}-{n}"}
            if product:
                body["productId"] = "p-1"
            if referrer and n == 0:
                body["referrer"] = referrer
            await ingest("pageviews", body)
        for minute, kind in events:
            if kind == "order":
                await ingest("commerce", {"eventId": f"{session}-placed", "type": "order_placed",
                                          **context, "orderId": f"o-{session}", "total": "20.00",
                                          "currency": "EUR", "occurredAt": _at(minute - 0.5)})
                await ingest("commerce", {"eventId": f"{session}-paid", "type": "order_paid",
                                          "orderId": f"o-{session}", "occurredAt": _at(minute)})
            else:
                extra = {"productId": "p-1"} if kind == "add_to_cart" else {}
                await ingest("commerce", {"eventId": f"{session}-{kind}", "type": kind,
                                          **context, **extra, "occurredAt": _at(minute)})
        if session in RECORDINGS:
            await ingest("recordings/start", {**context, "url": f"{SHOP}{pages[0][1]}",
                                              "recordingId": RECORDINGS[session]})
    await deps.derivation.fold()


async def _report(fetch: Fetch, tenant: Tenant, token: str, funnel: str = "shop",
                  query: str = "") -> dict[str, Any]:
    first = BASE.date().isoformat()
    last = datetime.now(UTC).date().isoformat()
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/funnels/{funnel}/report?from={first}"
                         f"&to={last}{query}", token=token)
    assert answer.code == 200, answer
    return answer.json()


def _column(report: dict[str, Any], name: str) -> list[Any]:
    return [step[name] for step in report["steps"]]


async def test_the_shop_funnel_counts_each_step_in_order_with_medians_and_breakdowns(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _sessions(ingest, deps)
    report = await _report(fetch, tenant, viewer_token)
    assert report["sessions"] == 6
    assert _column(report, "label") == ["Product view", "Add to cart", "Checkout", "Order"]
    # s5's cart came before its product view, so it stops at step 1.
    assert _column(report, "sessions") == [5, 3, 2, 1]
    assert _column(report, "conversion") == [1.0, 0.6, 0.4, 0.2]
    assert _column(report, "fromPrevious") == [None, 0.6, 0.6667, 0.5]
    assert _column(report, "dropOff") == [2, 1, 1, 0]
    # Cart after product view: s1 2', s2 4', s3 6' -> median 4' = 240 s. Checkout after
    # cart: s1 3', s2 6' -> 270 s. Order after checkout: s1 4' -> 240 s.
    assert _column(report, "medianSecondsFromPrevious") == [None, 240.0, 270.0, 240.0]
    assert report["breakdown"]["device"] == [
        {"name": "desktop", "sessions": [3, 2, 1, 1], "conversion": 0.3333},
        {"name": "mobile", "sessions": [2, 1, 1, 0], "conversion": 0.0}]
    assert report["breakdown"]["source"] == [
        {"name": "(direct)", "sessions": [3, 2, 1, 0], "conversion": 0.0},
        {"name": "google.com", "sessions": [1, 1, 1, 1], "conversion": 1.0},
        {"name": "newsletter", "sessions": [1, 0, 0, 0], "conversion": 0.0}]
    direct = await _report(fetch, tenant, viewer_token, query="&source=(direct)")
    assert (direct["sessions"], _column(direct, "sessions")) == (4, [3, 2, 1, 0])


async def test_the_shop_servers_events_sent_without_a_session_count_in_the_visit_they_fell_in(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    """The plugin sends carts, checkouts and orders without the browser session (the shop's
    server never sees it). Visitor w has two visits:

    t1 at 0': product view; cart at 2' (no session)            -> steps 1, 2
    t2 at 30': product view; checkout 33', order paid 36' (no session) -> steps 1 (no cart
        in t2: the cart at 2' belongs to t1, the visit that started last before it)
    """
    for session, minute in (("t1", 0), ("t2", 30)):
        await ingest("pageviews", {"visitorId": "w", "sessionId": session, "userAgent": DESKTOP,
                                   "url": f"{SHOP}/product/a", "productId": "p-1",
                                   "occurredAt": _at(minute), "pageviewId": f"{session}-0"})
    for minute, kind in ((2, "add_to_cart"), (33, "checkout_started")):
        await ingest("commerce", {"eventId": f"w-{kind}", "type": kind, "visitorId": "w",
                                  "productId": "p-1", "occurredAt": _at(minute)})
    await ingest("commerce", {"eventId": "w-placed", "type": "order_placed", "visitorId": "w",
                              "orderId": "o-w", "total": "20.00", "currency": "EUR",
                              "occurredAt": _at(35)})
    await ingest("commerce", {"eventId": "w-paid", "type": "order_paid", "orderId": "o-w",
                              "occurredAt": _at(36)})
    await deps.derivation.fold()
    report = await _report(fetch, tenant, viewer_token)
    assert report["sessions"] == 2
    assert _column(report, "sessions") == [2, 1, 0, 0]
    assert _column(report, "medianSecondsFromPrevious") == [None, 120.0, None, None]
    # An owner's funnel of product view then checkout then order sees t2 go all the way.
    created = await fetch(f"/api/v1/sites/{tenant.site_id}/funnels", "POST", token=tenant.token,
                          json_body={"name": "Buy", "steps": [
                              {"kind": "event", "event": "product_view"},
                              {"kind": "event", "event": "checkout_started"},
                              {"kind": "event", "event": "order_paid"}]})
    assert created.code in (200, 201), created
    buy = await _report(fetch, tenant, viewer_token, created.json()["id"])
    assert _column(buy, "sessions") == [2, 1, 1]
    assert _column(buy, "medianSecondsFromPrevious") == [None, 180.0, 180.0]


async def test_an_owners_funnel_of_page_patterns_is_stored_audited_and_reported(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _sessions(ingest, deps)
    base = f"/api/v1/sites/{tenant.site_id}/funnels"
    steps = [{"kind": "page", "pattern": "/product/*", "label": "Product"},
             {"kind": "page", "pattern": "/cart"}, {"kind": "page", "pattern": "/checkout*"}]
    refused = await fetch(base, "POST", json_body={"name": "Pages", "steps": steps},
                          token=viewer_token)
    assert refused.code == 403, refused
    bad = await fetch(base, "POST", json_body={"name": "Bad", "steps": [
        {"kind": "page", "pattern": "/a b"}, {"kind": "page", "pattern": "/c"}]},
        token=tenant.token)
    assert (bad.code, bad.json()["error"].get("field")) == (422, "steps.0.pattern")
    created = await fetch(base, "POST", json_body={"name": "Pages", "steps": steps},
                          token=tenant.token)
    assert created.code == 201, created
    funnel = created.json()
    assert [step["label"] for step in funnel["steps"]] == ["Product", "/cart", "/checkout*"]
    listed = await fetch(base, token=viewer_token)
    assert [f["id"] for f in listed.json()] == ["shop", funnel["id"]]
    report = await _report(fetch, tenant, viewer_token, funnel["id"])
    # /product/*: s1-s5 (s4's query is not part of a path pattern without "?"); then /cart
    # not before it: s1, s2, s3 (s5's /cart came first); then /checkout*: s1, s2.
    assert _column(report, "sessions") == [5, 3, 2]
    assert _column(report, "medianSecondsFromPrevious") == [None, 240.0, 270.0]
    export = await fetch("/auth/me/export.json", token=tenant.token)
    assert [f["name"] for f in export.json()["sites"][0]["funnels"]] == ["Pages"]
    changed = await fetch(f"{base}/{funnel['id']}", "PATCH",
                          json_body={"steps": steps[1:]}, token=tenant.token)
    assert changed.code == 200, changed
    assert _column(await _report(fetch, tenant, viewer_token, funnel["id"]),
                   "sessions") == [4, 2]
    shop = await fetch(f"{base}/shop", "DELETE", token=tenant.token)
    assert shop.code == 422, shop
    deleted = await fetch(f"{base}/{funnel['id']}", "DELETE", token=tenant.token)
    assert deleted.code == 204, deleted
    actions = [entry["action"] async for entry in deps.store.collection("audit_log").find(
        {"siteId": tenant.site_id, "action": {"$regex": "^funnel"}})]
    assert sorted(actions) == ["funnel.changed", "funnel.created", "funnel.deleted"]


async def test_a_step_opens_the_recordings_of_the_sessions_that_stopped_there(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _sessions(ingest, deps)
    base = f"/api/v1/sites/{tenant.site_id}/recordings"

    async def recorded(query: str) -> set[str]:
        answer = await fetch(f"{base}?{query}", token=viewer_token)
        assert answer.code == 200, answer
        return {row["sessionId"] for row in answer.json()["items"]}

    assert await recorded("funnel=shop&stoppedAt=1") == {"s4", "s5"}
    assert await recorded("funnel=shop&stoppedAt=4") == {"s1"}
    assert await recorded("funnel=shop&stoppedAt=2") == set()
    assert await recorded("source=google.com") == {"s1"}
    assert await recorded("source=newsletter&funnel=shop&stoppedAt=1") == {"s4"}
    wrong = await fetch(f"{base}?funnel=shop&stoppedAt=5", token=viewer_token)
    assert wrong.code == 422, wrong


async def test_erasure_and_restriction_keep_the_funnel_exact(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str):
    await _sessions(ingest, deps)
    switch = f"/api/v1/sites/{tenant.site_id}/visitors/v2/restriction"
    answer = await fetch(switch, "PUT", json_body={"on": True}, token=tenant.token)
    assert answer.code == 200, answer
    # Without s2: step 1 s1, s3, s4, s5; step 2 s1, s3; steps 3 and 4 s1.
    held = await _report(fetch, tenant, viewer_token)
    assert (held["sessions"], _column(held, "sessions")) == (5, [4, 2, 1, 1])
    answer = await fetch(switch, "PUT", json_body={"on": False}, token=tenant.token)
    assert answer.code == 200, answer
    assert _column(await _report(fetch, tenant, viewer_token), "sessions") == [5, 3, 2, 1]
    erased = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/v1/data", "DELETE",
                         token=tenant.token)
    assert erased.code == 200, erased
    # Without s1: step 1 s2-s5; step 2 s2, s3; step 3 s2; nobody ordered.
    after = await _report(fetch, tenant, viewer_token)
    assert (after["sessions"], _column(after, "sessions")) == (5, [4, 2, 1, 0])
    assert _column(after, "medianSecondsFromPrevious") == [None, 300.0, 360.0, None]


async def _shop_session(ingest: Ingest, name: str, start: datetime, reached: int) -> None:
    """A session of its own visitor that starts at `start` on a product page and goes through
    the first `reached` shop funnel steps: cart 5', checkout 12', an order paid 15' later (so
    a session started at 23:50 finishes the next day); 0 is a home page only."""
    context = {"visitorId": f"v-{name}", "sessionId": name, "userAgent": DESKTOP}

    def at(minutes: int) -> str:
        return (start + timedelta(minutes=minutes)).isoformat()

    await ingest("pageviews", {**context, "url": f"{SHOP}/product/a" if reached else f"{SHOP}/",
                               "occurredAt": at(0), "pageviewId": f"{name}-0",
                               **({"productId": "p-1"} if reached else {})})
    if reached >= 2:
        await ingest("commerce", {"eventId": f"{name}-cart", "type": "add_to_cart", **context,
                                  "productId": "p-1", "occurredAt": at(5)})
    if reached >= 3:
        await ingest("commerce", {"eventId": f"{name}-co", "type": "checkout_started",
                                  **context, "occurredAt": at(12)})
    if reached >= 4:
        await ingest("commerce", {"eventId": f"{name}-placed", "type": "order_placed",
                                  **context, "orderId": f"o-{name}", "total": "20.00",
                                  "currency": "EUR", "occurredAt": at(14)})
        await ingest("commerce", {"eventId": f"{name}-paid", "type": "order_paid",
                                  "orderId": f"o-{name}", "occurredAt": at(15)})


async def test_conversion_per_day_and_week_and_against_the_previous_period(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str, schemas):
    """Yesterday is A; the range is A-2 to A, the previous period A-5 to A-3.

    A-2 23:50  c1 goes all the way, its order after midnight: counted on A-2
    A-2 12:00  c2 to the cart                                 -> A-2: 2 entered, 1 completed
    A-1        nobody                                          -> A-1: 0, 0, no conversion
    A   12:00  c3 all the way, c4 step 1, c5 to the checkout,
               c6 the home page only (a session, not entered)  -> A: 3 entered, 1 completed
    the range: 6 sessions, 5 entered, 2 completed: 0.4
    A-3 p2 and p3 step 1, A-4 p4 to the cart, A-5 p1 all the way: 4 entered, 1 completed: 0.25
    A-6 p0 all the way: before the previous period. The change: 0.4 - 0.25 = 0.15 (points).
    """
    a = datetime.now(UTC).date() - timedelta(days=1)

    def moment(days_before: int, hour: int, minute: int = 0) -> datetime:
        day = a - timedelta(days=days_before)
        return datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)

    sessions = [("c1", 2, 23, 50, 4), ("c2", 2, 12, 0, 2), ("c3", 0, 12, 0, 4),
                ("c4", 0, 12, 5, 1), ("c5", 0, 12, 10, 3), ("c6", 0, 12, 15, 0),
                ("p1", 5, 12, 0, 4), ("p2", 3, 12, 0, 1), ("p3", 3, 12, 5, 1),
                ("p4", 4, 12, 0, 2), ("p0", 6, 12, 0, 4)]
    for name, days_before, hour, minute, reached in sessions:
        await _shop_session(ingest, name, moment(days_before, hour, minute), reached)
    await deps.derivation.fold()

    async def report(first: date, last: date) -> dict[str, Any]:
        answer = await fetch(f"/api/v1/sites/{tenant.site_id}/funnels/shop/report?"
                             f"from={first.isoformat()}&to={last.isoformat()}",
                             token=viewer_token)
        assert answer.code == 200, answer
        schemas.validate(answer.json(), "FunnelReport")
        return answer.json()

    days = await report(a - timedelta(days=2), a)
    assert (days["sessions"], days["entered"], days["completed"], days["conversion"]) == (
        6, 5, 2, 0.4)
    assert days["overTime"] == {"unit": "day", "periods": [
        {"from": str(a - timedelta(days=2)), "to": str(a - timedelta(days=2)), "entered": 2,
         "completed": 1, "conversion": 0.5},
        {"from": str(a - timedelta(days=1)), "to": str(a - timedelta(days=1)), "entered": 0,
         "completed": 0, "conversion": None},
        {"from": str(a), "to": str(a), "entered": 3, "completed": 1, "conversion": 0.3333}]}
    assert days["previous"] == {"from": str(a - timedelta(days=5)),
                                "to": str(a - timedelta(days=3)), "sessions": 4,
                                "entered": 4, "completed": 1, "conversion": 0.25}
    assert days["conversionChange"] == 0.15

    # 35 days are shown week by week (Monday to Sunday, cut to the range at both ends): every
    # session above falls in the week of the day it started; nothing came in the 35 before.
    first = a - timedelta(days=34)
    weeks = await report(first, a)
    periods = weeks["overTime"]["periods"]
    assert weeks["overTime"]["unit"] == "week"
    assert (periods[0]["from"], periods[-1]["to"]) == (str(first), str(a))
    for before, after in zip(periods, periods[1:], strict=False):
        assert date.fromisoformat(before["to"]).weekday() == 6, before
        assert date.fromisoformat(after["from"]) == date.fromisoformat(before["to"]) + \
            timedelta(days=1)
    expected = {(period["from"], period["to"]): [0, 0] for period in periods}
    for _, days_before, _, _, reached in sessions:
        day = str(a - timedelta(days=days_before))
        week = next(key for key in expected if key[0] <= day <= key[1])
        expected[week][0] += reached > 0
        expected[week][1] += reached == 4
    assert {(p["from"], p["to"]): [p["entered"], p["completed"]] for p in periods} == expected
    assert (weeks["entered"], weeks["completed"], weeks["conversion"]) == (10, 4, 0.4)
    assert weeks["previous"] == {"from": str(first - timedelta(days=35)),
                                 "to": str(first - timedelta(days=1)), "sessions": 0,
                                 "entered": 0, "completed": 0, "conversion": None}
    assert weeks["conversionChange"] is None


async def test_an_edit_is_audited_with_the_names_of_the_fields_it_changed(
        fetch: Fetch, tenant: Tenant, deps, viewer_token: str):
    base = f"/api/v1/sites/{tenant.site_id}/funnels"
    steps = [{"kind": "page", "pattern": "/product/*", "label": "Product"},
             {"kind": "page", "pattern": "/cart"}, {"kind": "event", "event": "order_paid"}]
    created = await fetch(base, "POST", json_body={"name": "Pages", "steps": steps},
                          token=tenant.token)
    assert created.code == 201, created
    path = f"{base}/{created.json()['id']}"

    async def changes() -> list[dict[str, Any]]:
        return [entry async for entry in deps.store.collection("audit_log").find(
            {"siteId": tenant.site_id, "action": "funnel.changed"}).sort("at", 1)]

    refused = await fetch(path, "PATCH", json_body={"name": "Mine"}, token=viewer_token)
    assert refused.code == 403, refused
    blank = await fetch(path, "PATCH", json_body={"name": "  "}, token=tenant.token)
    assert (blank.code, blank.json()["error"].get("field")) == (422, "name")
    # Renamed, and the cart moved before the product page.
    edited = await fetch(path, "PATCH", token=tenant.token, json_body={
        "name": " Cart first ", "steps": [steps[1], steps[0], steps[2]]})
    assert edited.code == 200, edited
    assert edited.json()["name"] == "Cart first"
    assert [step["label"] for step in edited.json()["steps"]] == ["/cart", "Product",
                                                                  "Order"]
    # The same again changes nothing and writes no entry; a step removed is one more.
    again = await fetch(path, "PATCH", token=tenant.token, json_body={
        "name": "Cart first", "steps": [steps[1], steps[0], steps[2]]})
    assert again.code == 200, again
    removed = await fetch(path, "PATCH", token=tenant.token,
                          json_body={"steps": [steps[1], steps[2]]})
    assert removed.code == 200, removed
    assert [step["label"] for step in (await fetch(path, token=viewer_token)).json()[
        "steps"]] == ["/cart", "Order"]
    entries = await changes()
    assert [entry["details"] for entry in entries] == [
        {"funnelId": created.json()["id"], "fields": ["name", "steps"]},
        {"funnelId": created.json()["id"], "fields": ["steps"]}]
    assert {(entry["actorUserId"], entry["organizationId"]) for entry in entries} == {
        (tenant.user_id, tenant.organization_id)}
    shop = await fetch(f"{base}/shop", "PATCH", json_body={"name": "Mine"}, token=tenant.token)
    assert shop.code == 422, shop
    assert len(await changes()) == 2


async def test_a_report_over_purged_days_says_from_when_their_sessions_are_gone(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str, schemas):
    """Issue 41 point 8: the six sessions, then pageviews kept 30 days and a purge 31 days on;
    the funnel has no session left and says why, while the day's figures keep 6 visitors."""
    await _sessions(ingest, deps)
    assert (await _report(fetch, tenant, viewer_token))["purgedBefore"] is None
    await deps.store.collection("sites").update_one(
        {"_id": tenant.site_id}, {"$set": {"settings.retentionDays": {"activity": 30}}})
    purged_at = (datetime.now(UTC) + timedelta(days=31)).replace(microsecond=0)
    report = await make_purger(deps.store).purge(purged_at)
    assert report is not None and report.removed["activity"] > 0
    after = await _report(fetch, tenant, viewer_token)
    schemas.validate(after, "FunnelReport")
    assert (after["sessions"], after["entered"]) == (0, 0)
    assert datetime.fromisoformat(after["purgedBefore"]) == purged_at - timedelta(days=30)
    day = BASE.date().isoformat()
    overview = await fetch(f"/api/v1/sites/{tenant.site_id}/overview?from={day}&to={day}",
                           token=viewer_token)
    assert overview.json()["figures"]["visitors"]["value"] == 6
