"""Surveys end to end in Chromium (issue 20): created in the dashboard, shown on a shop page
under a strict Content-Security-Policy after its delay, answered with the keyboard alone,
stored, shown in the results and in the visitor's export; nothing at all under GPC."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import tornado.httpserver
import tornado.netutil
import tornado.web
from playwright.async_api import Browser, Page, Request, expect
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from tests.support.browser import eventually
from tests.ui.accessibility import assert_accessible
from tests.ui.conftest import Dashboard, sign_in

GPC_ON = ("Object.defineProperty(Navigator.prototype, 'globalPrivacyControl', "
          "{get: () => true, configurable: true});")
STUB = "window.svc = window.svc || function () { (svc.q = svc.q || []).push(arguments); };"
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<script src="/stub.js"></script>
<script async src="{service}/sdk/v1/loader.js?key={key}"></script>
</head><body><main><h1>{title}</h1><p>A mug that keeps coffee warm.</p>
<a id="cart" href="/cart">Cart</a></main></body></html>
"""
DELAY = 3


@dataclass(frozen=True)
class StrictShop:
    """A shop origin whose pages allow scripts and connections to itself and the service only,
    and no inline script or style at all."""

    origin: str


class _Page(tornado.web.RequestHandler):
    def initialize(self, service: str, key: str) -> None:
        self.service, self.key = service, key

    def get(self, path: str) -> None:
        self.set_header("Content-Security-Policy", (
            f"default-src 'self'; script-src 'self' {self.service}; "
            f"connect-src 'self' {self.service}; style-src 'self'; img-src 'self'"))
        if path == "stub.js":
            self.set_header("Content-Type", "text/javascript")
            self.finish(STUB)
            return
        title = "Blue mug" if path.startswith("product/") else "Cart"
        self.finish(PAGE.format(title=title, service=self.service, key=self.key))


async def _api(dashboard: Dashboard, path: str, method: str = "GET", body: dict | None = None,
               token: str | None = None) -> dict:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    answer = await AsyncHTTPClient().fetch(HTTPRequest(
        dashboard.url + path, method, headers=headers,
        body=json.dumps(body) if body is not None else None))
    return json.loads(answer.body)


@pytest.fixture
async def shop(dashboard: Dashboard, deps) -> AsyncIterator[StrictShop]:
    """A strict-CSP shop on its own origin, allowed by the demo site, loading its loader."""
    sockets = tornado.netutil.bind_sockets(0, "localhost")
    origin = f"http://localhost:{sockets[0].getsockname()[1]}"
    site = await deps.store.collection("sites").find_one({"_id": dashboard.site_id})
    token = (await _api(dashboard, "/auth/login", "POST",
                        {"email": dashboard.email, "password": dashboard.password}))["accessToken"]
    await _api(dashboard, f"/api/v1/sites/{dashboard.site_id}", "PATCH",
               {"allowedOrigins": [*site["allowedOrigins"], origin]}, token)
    app = tornado.web.Application([(r"/(.*)", _Page, {"service": dashboard.url,
                                                       "key": site["publicKey"]})])
    server = tornado.httpserver.HTTPServer(app)
    server.add_sockets(sockets)
    yield StrictShop(origin)
    server.stop()
    await server.close_all_connections()


async def _create_survey_in_the_dashboard(page: Page, dashboard: Dashboard) -> str:
    await page.get_by_role("link", name="Surveys").click()
    await page.get_by_role("link", name="New survey").click()
    await page.get_by_label("Name (only you see it)").fill("Recommend the mug")
    await page.get_by_label("Question", exact=True).fill("How likely are you to recommend us?")
    await page.get_by_label("Follow-up question (free text, optional)").fill(
        "What is the main reason for your score?")
    await page.get_by_label("Pages, one pattern per line").fill("/product/*")
    await page.get_by_label("Delay in seconds").fill(str(DELAY))
    await page.get_by_role("button", name="Create survey").click()
    await page.wait_for_url("**/surveys/*-*")
    return page.url.rsplit("/", 1)[1]


async def test_a_survey_shows_after_its_delay_is_answered_by_keyboard_and_reaches_the_results(
        browser: Browser, page: Page, dashboard: Dashboard, shop: StrictShop, deps, artifacts):
    await sign_in(page, dashboard)
    survey_id = await _create_survey_in_the_dashboard(page, dashboard)

    context = await browser.new_context(viewport={"width": 1280, "height": 860})
    visitor_page = await context.new_page()
    problems: list[str] = []
    visitor_page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    surveys_loaded: list[str] = []
    visitor_page.on("request", lambda r: surveys_loaded.append(r.url)
                    if r.url.endswith("/sdk/v1/survey.js") else None)

    # A page no survey targets never loads the widget.
    await visitor_page.goto(shop.origin + "/cart")
    await visitor_page.wait_for_load_state("networkidle")
    assert surveys_loaded == []

    await visitor_page.goto(shop.origin + "/product/blue-mug")
    dialog = visitor_page.get_by_role("dialog")
    await expect(dialog).to_have_count(0)  # not before its delay
    await expect(dialog).to_be_visible(timeout=DELAY * 1000 + 10000)
    await expect(dialog).to_have_accessible_name("A quick question")
    assert surveys_loaded, "the widget is loaded on the targeted page"
    # Styled by its constructed stylesheet despite the CSP: a fixed box in the corner.
    box = dialog
    assert await box.evaluate("node => getComputedStyle(node).position") == "fixed"
    assert not problems, problems
    # Checked once it has risen in: mid-animation its text is part-transparent, and axe would
    # measure the contrast of a frame no one reads.
    await box.evaluate("node => Promise.all(node.getAnimations({subtree: true})"
                       ".map(animation => animation.finished))")
    await assert_accessible(visitor_page, "the survey widget on a shop page")
    # caret="initial": hiding the caret would inject a <style>, which the shop's CSP blocks.
    await visitor_page.screenshot(path=artifacts("widget.png"), caret="initial")

    # Keyboard only: the widget focused the 0–10 scale; arrows choose 9, Tab to the follow-up.
    focused = await visitor_page.evaluate(
        "document.querySelector('[data-svc-survey]').shadowRoot.activeElement.value")
    assert focused == "0"
    for _ in range(9):
        await visitor_page.keyboard.press("ArrowRight")
    await visitor_page.keyboard.press("Tab")
    await visitor_page.keyboard.type("It keeps my coffee warm")
    await visitor_page.keyboard.press("Tab")
    await visitor_page.keyboard.press("Enter")
    await expect(dialog.get_by_role("heading", name="Thank you!")).to_be_visible()
    # Tab stays inside the dialog; Escape closes it and it does not come back.
    await visitor_page.keyboard.press("Tab")
    assert await visitor_page.evaluate(
        "document.activeElement.hasAttribute('data-svc-survey')")
    await visitor_page.keyboard.press("Escape")
    await expect(dialog).to_have_count(0)
    visitor = await visitor_page.evaluate("localStorage.getItem('wpelVisitorId')")

    async def answers() -> list[dict]:
        return await deps.store.collection("survey_responses").find(
            {"siteId": dashboard.site_id, "surveyId": survey_id}).to_list(None)

    stored = (await eventually(answers, message="the survey answer"))[0]
    assert stored["visitorId"] == visitor
    assert stored["url"] == shop.origin + "/product/blue-mug"
    assert stored["answers"] == [
        {"question": "How likely are you to recommend us?", "score": 9},
        {"question": "What is the main reason for your score?", "text": "It keeps my coffee warm"}]

    await visitor_page.reload()
    await visitor_page.wait_for_timeout(DELAY * 1000 + 1500)
    await expect(dialog).to_have_count(0)  # shown once per visitor
    assert not [p for p in problems if "Content Security Policy" in p], problems
    await context.close()

    await page.goto(dashboard.page_url(f"/surveys/{survey_id}"))
    await expect(page.locator("#distribution tr[data-value='9'] td").first).to_have_text("1")
    await expect(page.locator(".facts")).to_contain_text("NPS")
    answer = page.locator("#text-answers li").first
    await expect(answer).to_contain_text("It keeps my coffee warm")
    await expect(answer).to_contain_text("/product/blue-mug")
    await expect(answer.get_by_role("link", name="Visitor profile")).to_have_attribute(
        "href", f"/app/sites/{dashboard.site_id}/visitors/{visitor}")
    # The shop records (the demo site's recordings are on): the visit around the answer.
    await expect(answer.get_by_role("button", name="Play recording")).to_be_visible()
    await assert_accessible(page, "the survey results page")
    await page.screenshot(path=artifacts("results.png"), full_page=True)
    await page.get_by_role("link", name="← All surveys").click()
    await expect(page.locator("#surveys")).to_contain_text("Recommend the mug")
    await assert_accessible(page, "the surveys list")

    token = (await _api(dashboard, "/auth/login", "POST",
                        {"email": dashboard.email, "password": dashboard.password}))["accessToken"]
    export = await _api(dashboard,
                        f"/api/v1/sites/{dashboard.site_id}/visitors/{visitor}/export.json",
                        token=token)
    assert [r["surveyId"] for r in export["surveyResponses"]] == [survey_id]


async def test_with_gpc_no_survey_shows_and_nothing_is_sent(
        browser: Browser, page: Page, dashboard: Dashboard, shop: StrictShop, deps):
    await sign_in(page, dashboard)
    survey_id = await _create_survey_in_the_dashboard(page, dashboard)
    context = await browser.new_context()
    await context.add_init_script(GPC_ON)
    visitor_page = await context.new_page()
    sent: list[str] = []

    def note(request: Request) -> None:
        if request.url.startswith(dashboard.url) and "/loader.js" not in request.url:
            sent.append(request.url)

    visitor_page.on("request", note)
    await visitor_page.goto(shop.origin + "/product/blue-mug")
    await visitor_page.wait_for_load_state("networkidle")
    await visitor_page.wait_for_timeout(DELAY * 1000 + 1500)
    await expect(visitor_page.get_by_role("dialog")).to_have_count(0)
    assert sent == []
    assert await visitor_page.evaluate("localStorage.length") == 0
    assert await deps.store.collection("survey_responses").count_documents(
        {"surveyId": survey_id}) == 0
    await context.close()
