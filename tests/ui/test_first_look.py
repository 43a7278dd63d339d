"""What a first look at the dashboard found (issue 21, point 6), fixed and shown in Chromium.

Each test uses data sent through the real ingest paths (the demo seeding or /ingest with the
site's API key) and checks what a shop owner sees, with an axe-core check of each page touched.
Screenshots go to tests/artifacts/.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import tornado.netutil
from playwright.async_api import Locator, Page, Response, expect
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

import server
from tests.ui.accessibility import assert_accessible
from tests.ui.conftest import MIA, Dashboard, ingest, record_page, sign_in

SHOP = "https://demo-shop.example"
PHONE = {"width": 390, "height": 844}


def _fact(page: Page, term: str) -> Locator:
    """The value shown next to `term` in a profile's facts."""
    return page.locator("dt", has_text=term).locator("xpath=following-sibling::dd[1]")


def _section(page: Page, heading: str) -> Locator:
    return page.locator("section", has=page.get_by_role("heading", name=heading))


async def _new_visitor(dashboard: Dashboard, visitor_id: str) -> None:
    answer = await ingest(dashboard, "/ingest/pageviews", {
        "visitorId": visitor_id, "url": f"{SHOP}/product/teapot", "title": "Teapot – Demo Shop"})
    assert answer.code == 200 and "dropped" not in answer.json(), answer


async def _api_token(dashboard: Dashboard) -> str:
    answer = await AsyncHTTPClient().fetch(HTTPRequest(
        dashboard.url + "/auth/login", "POST", headers={"Content-Type": "application/json"},
        body=json.dumps({"email": dashboard.email, "password": dashboard.password})))
    return json.loads(answer.body)["accessToken"]


async def test_the_visitor_page_offers_only_the_hold_actions_that_apply(
        page: Page, dashboard: Dashboard, artifacts):
    await _new_visitor(dashboard, "first-look-holds")
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url("/visitors/first-look-holds"))
    button = page.get_by_role("button")
    await expect(button.filter(has_text="Restrict processing")).to_have_count(1)
    await expect(button.filter(has_text="Record objection")).to_have_count(1)
    await expect(button.filter(has_text="Lift restriction")).to_have_count(0)
    await expect(button.filter(has_text="Withdraw objection")).to_have_count(0)
    requests = _section(page, "Data-subject requests")
    assert "null" not in await requests.inner_text()
    await assert_accessible(page, "the visitor page")

    await page.get_by_role("button", name="Record objection").click()
    await expect(page.get_by_text("Record objection: done.")).to_be_visible()
    await expect(_fact(page, "Objected")).to_have_text("yes")
    await expect(button.filter(has_text="Withdraw objection")).to_have_count(1)
    await expect(button.filter(has_text="Record objection")).to_have_count(0)
    await page.reload()
    await expect(button.filter(has_text="Withdraw objection")).to_have_count(1)
    await expect(button.filter(has_text="Record objection")).to_have_count(0)

    await page.get_by_role("button", name="Restrict processing").click()
    await expect(page.get_by_text("Lift it later under Privacy & exports")).to_be_visible()
    await expect(button.filter(has_text="Lift restriction")).to_have_count(1)
    await expect(button.filter(has_text="Restrict processing")).to_have_count(0)
    assert "null" not in await requests.inner_text()
    await page.screenshot(path=artifacts("holds.png"), full_page=True)
    await page.get_by_role("button", name="Lift restriction").click()
    await expect(page.get_by_text("Lift restriction: done.")).to_be_visible()
    await expect(button.filter(has_text="Restrict processing")).to_have_count(1)


@pytest.mark.embedded_only("the demo, and the sign-in page's hint about it, exist only on the "
                            "embedded store")
async def test_the_sign_in_page_names_make_run_only_for_the_embedded_demo(
        page: Page, dashboard: Dashboard, settings, deps, artifacts):
    await page.goto(dashboard.url + "/app/login")
    hint = page.locator("#demo-hint")
    await expect(hint).to_be_visible()
    await expect(hint.locator("code").first).to_have_text("make run")
    assert "`" not in await page.locator("body").inner_text()
    await assert_accessible(page, "the sign-in page")
    await page.screenshot(path=artifacts("demo.png"))

    # The same service on a production store: no demo, so no word of `make run`.
    production = copy.copy(deps)
    production.settings = dataclasses.replace(settings, mongodb_uri="mongodb://db.example:27017")
    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
    http_server = server.make_http_server(production.settings,
                                          server.make_app(production.settings, production))
    http_server.add_sockets(sockets)
    try:
        await page.goto(f"http://127.0.0.1:{sockets[0].getsockname()[1]}/app/login")
        await expect(page.get_by_role("button", name="Sign in")).to_be_visible()
        await expect(page.locator("#demo-hint")).to_have_count(0)
        assert "make run" not in await page.locator("body").inner_text()
        await page.screenshot(path=artifacts("production.png"))
    finally:
        http_server.stop()
        await http_server.close_all_connections()


async def test_no_page_load_asks_for_anything_that_answers_404(page: Page, dashboard: Dashboard):
    failed: list[str] = []

    def note(response: Response) -> None:
        if response.status == 404:
            failed.append(response.url)

    page.on("response", note)
    await sign_in(page, dashboard)
    await expect(page.locator("figure.chart svg")).to_be_visible()
    icon = await page.request.get(dashboard.url + "/favicon.ico")
    assert icon.status == 200 and (await icon.body())[:4] == b"\x00\x00\x01\x00"
    assert "icon" in icon.headers["content-type"]
    linked = await page.locator("link[rel=icon]").get_attribute("href")
    assert (await page.request.get(dashboard.url + linked)).status == 200
    assert not failed, f"answered 404: {failed}"


async def test_on_a_phone_the_header_is_one_line_and_headings_break_only_between_words(
        page: Page, dashboard: Dashboard, artifacts):
    await page.set_viewport_size(PHONE)
    await sign_in(page, dashboard)
    header = await page.locator("header.top").bounding_box()
    tabs = await page.locator("nav.tabs").bounding_box()
    assert header and tabs
    assert header["height"] <= 56, f"the header is {header['height']} px tall on a phone"
    assert tabs["y"] + tabs["height"] <= PHONE["height"] * 0.13, "header and tabs fill the screen"
    await assert_accessible(page, "the overview on a phone")
    for section, table in (("/visitors", "#visitors"), ("/errors", "#errors"),
                           ("/leads", "#leads")):
        await page.goto(dashboard.page_url(section))
        await expect(page.locator(f"{table} th").first).to_be_visible()
        broken = await page.locator(table).evaluate("""(table) => {
          const broken = [];
          for (const th of table.querySelectorAll('th')) {
            const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
              for (const match of node.data.matchAll(/\\S+/g)) {
                const range = document.createRange();
                range.setStart(node, match.index);
                range.setEnd(node, match.index + match[0].length);
                const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
                if (lines.size > 1) broken.push(match[0]);
              }
            }
          }
          return broken;
        }""")
        assert not broken, f"{section}: table headings broken mid-word: {broken}"
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"{section} scrolls sideways ({width} px)"
        await assert_accessible(page, f"{section} on a phone")
    await page.goto(dashboard.page_url("/visitors"))
    await expect(page.locator("#visitors")).to_be_visible()
    await page.screenshot(path=artifacts("390px.png"), full_page=True)


async def test_the_activity_list_says_what_happened_not_record_ids(
        page: Page, dashboard: Dashboard, artifacts):
    visitor = "first-look-activity"
    await _new_visitor(dashboard, visitor)
    lead = await ingest(dashboard, "/ingest/leads", {
        "visitorId": visitor, "email": "ada@example.com", "name": "Ada Lovelace",
        "kind": "form", "formId": "contact", "url": f"{SHOP}/contact"})
    assert lead.code == 200, lead
    assert [a.code for a in await record_page(dashboard, visitor, f"{SHOP}/cart")] == [200, 200]
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url(f"/visitors/{visitor}"))
    activity = _section(page, "Recent activity")
    await expect(activity.locator("li[data-kind=pageview]")).to_contain_text(
        "Viewed Teapot – Demo Shop")
    await expect(activity.locator("li[data-kind=lead]")).to_contain_text(
        "Left a lead (form): Ada Lovelace, ada@example.com")
    await expect(activity.locator("li[data-kind=recording]")).to_contain_text(
        "Session recorded on /cart")
    text = await activity.inner_text()
    ids = re.findall(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", text)
    assert not ids, f"record ids shown in the activity list: {ids}"
    await assert_accessible(page, "the visitor page with activity")
    await page.screenshot(path=artifacts("activity.png"), full_page=True)


async def test_the_request_log_shows_whom_a_request_was_about_and_why_it_failed(
        page: Page, dashboard: Dashboard, artifacts):
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url(f"/visitors/{MIA}"))
    await page.get_by_role("button", name="Record objection").click()
    await expect(page.get_by_text("Record objection: done.")).to_be_visible()
    # A request about a visitor the service holds nothing on fails, and says so.
    token = await _api_token(dashboard)
    refused = await AsyncHTTPClient().fetch(HTTPRequest(
        f"{dashboard.url}/api/v1/sites/{dashboard.site_id}/visitors/nobody-here/restriction",
        "PUT", headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        body=json.dumps({"on": True})), raise_error=False)
    assert refused.code == 404

    await page.get_by_role("link", name="Privacy & exports").click()
    rows = page.locator("#requests tbody tr")
    objection = rows.filter(has_text="objection")
    await expect(objection.get_by_role("link", name="Demo visitor Mia Jensen")).to_be_visible()
    await expect(objection).to_contain_text("completed")
    failed = rows.filter(has_text="restriction")
    await expect(failed).to_contain_text("nobody-here")
    await expect(failed).to_contain_text("failed because no data held")
    await assert_accessible(page, "the privacy page")
    await page.screenshot(path=artifacts("requests.png"), full_page=True)

    # Erasure removes the visitor's id from the log: the rows then say "erased visitor".
    await page.goto(dashboard.page_url(f"/visitors/{MIA}"))
    await page.get_by_role("button", name="Erase data…").click()
    await page.locator("#confirm-erase").click()
    await expect(page.locator("#erasure-receipt")).to_be_visible()
    await page.locator("#receipt-done").click()
    await page.get_by_role("link", name="Privacy & exports").click()
    await expect(rows.filter(has_text="erasure")).to_contain_text("erased visitor")
    # A second request about the erased id does not bring it back into the log.
    again = await AsyncHTTPClient().fetch(HTTPRequest(
        f"{dashboard.url}/api/v1/sites/{dashboard.site_id}/visitors/{MIA}/objection",
        "PUT", headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        body=json.dumps({"on": False})), raise_error=False)
    assert again.code == 404
    await page.reload()
    await expect(rows).to_have_count(4)
    await expect(page.locator("#requests")).not_to_contain_text("Mia")
    await expect(page.locator("#requests")).not_to_contain_text(MIA)


async def test_the_demo_errors_first_and_last_seen_agree_with_the_visitor_page_and_the_chart(
        page: Page, dashboard: Dashboard):
    await sign_in(page, dashboard)
    await page.get_by_role("link", name="Errors").click()
    await page.get_by_role("link", name=re.compile("Cannot read properties")).click()
    first_seen = await _fact(page, "First seen").inner_text()
    last_seen = await _fact(page, "Last seen").inner_text()
    assert first_seen == last_seen  # one occurrence, seeded three days ago
    await assert_accessible(page, "the error page")

    await page.goto(dashboard.page_url(f"/visitors/{MIA}"))
    errors_hit = _section(page, "Errors hit")
    await expect(errors_hit.locator("li", has_text="Cannot read properties")).to_contain_text(
        first_seen)
    day = (datetime.now(UTC) - timedelta(days=3)).date().isoformat()
    await page.get_by_role("link", name="Overview").click()
    await expect(page.locator("figure.chart svg")).to_be_visible()
    titles: list[Any] = await page.locator("figure.chart rect.bar-err title").all_text_contents()
    on_day = [title for title in titles if title.startswith(f"{day}:")]
    assert on_day and on_day[0].endswith(" 1 errors"), titles
    today = datetime.now(UTC).date().isoformat()
    assert any(t.startswith(f"{today}:") and t.endswith(" 0 errors") for t in titles), titles
