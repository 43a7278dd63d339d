"""The Heatmaps tab: a page's clicks drawn on their element at desktop and phone width."""

from __future__ import annotations

from datetime import UTC, datetime

from playwright.async_api import Page

from documents import heatmaps
from tests.ui.accessibility import assert_accessible
from tests.ui.conftest import Dashboard, ingest, sign_in

PAGE = "/heat-test"
TODAY = datetime.now(UTC).strftime("%Y-%m-%d")
#: The button's box on each width's rendered image: (left, top, width, height).
BOXES = {"desktop": [600, 300, 200, 50], "phone": [20, 500, 350, 60]}


async def _interactions(dashboard: Dashboard, deps) -> None:
    at = f"{TODAY}T10:00:00Z"
    items = []
    for vw in (1280, 390):
        items += [{"kind": "click", "at": at, "url": f"https://shop.example{PAGE}?q=1",
                   "selector": "button#buy", "x": 10, "y": 10, "ox": 0.25, "oy": 0.55,
                   "vw": vw},
                  {"kind": "rage_click", "at": at, "url": f"https://shop.example{PAGE}",
                   "selector": "button#buy", "x": 10, "y": 10, "ox": 0.25, "oy": 0.55,
                   "vw": vw, "count": 3},
                  {"kind": "scroll_depth", "at": at, "url": f"https://shop.example{PAGE}",
                   "depth": 60, "from": 0, "fold": 30, "vw": vw}]
    answer = await ingest(dashboard, "/ingest/recordings/interactions",
                          {"visitorId": "heat-visitor", "interactions": items})
    assert answer.code == 200, answer
    await deps.derivation.fold()  # the counts the heatmap draws, as the service folds them


async def test_clicks_are_drawn_on_their_element_at_desktop_and_phone_width(
        page: Page, dashboard: Dashboard, deps, artifacts):
    await _interactions(dashboard, deps)
    for width, box in BOXES.items():
        await heatmaps.store_heatmap(
            deps.store, dashboard.site_id, PAGE, b"\x89PNG\r\n\x1a\n", [],
            details={"width": width, "viewportWidth": 1280 if width == "desktop" else 390,
                     "height": 1400, "boxes": {"button#buy": box},
                     "renderedAt": datetime.now(UTC)})
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url("/heatmaps"))
    await page.get_by_role("link", name=PAGE, exact=True).click()
    await page.wait_for_selector("#heatmap-stage .heat-dot")

    for width, box in BOXES.items():
        await page.select_option("#heatmap-width", width)
        await page.wait_for_url(f"**width={width}**")
        dot = page.locator("#heatmap-stage .heat-dot").first
        await dot.wait_for()
        stage = await page.locator("#heatmap-stage").bounding_box()
        drawn = await dot.bounding_box()
        centre = (drawn["x"] + drawn["width"] / 2 - stage["x"],
                  drawn["y"] + drawn["height"] / 2 - stage["y"])
        assert abs(centre[0] - (box[0] + 0.25 * box[2])) <= 1, width
        assert abs(centre[1] - (box[1] + 0.55 * box[3])) <= 1, width
        await page.screenshot(path=artifacts(f"{width}-clicks.png"), full_page=True)

    await page.select_option("#heatmap-kind", "rage_click")
    await page.wait_for_url("**kind=rage_click**")
    await page.wait_for_selector("#heatmap-stage .heat-dot.rage_click")
    await page.select_option("#heatmap-kind", "scroll")
    await page.wait_for_url("**kind=scroll**")
    await page.wait_for_selector("#fold-line")
    shares = await page.locator(".reach-band").evaluate_all(
        "bands => bands.map(b => Number(b.dataset.share))")
    assert shares[:12] == [1] * 12 and shares[12:] == [0] * 8
    await page.screenshot(path=artifacts("scroll.png"), full_page=True)
    await assert_accessible(page, "a page's heatmap")


async def test_a_page_without_an_image_is_drawn_on_an_outline_that_says_why(
        page: Page, dashboard: Dashboard, deps, artifacts):
    await _interactions(dashboard, deps)
    await sign_in(page, dashboard)
    await page.goto(dashboard.page_url(f"/heatmaps/{PAGE.replace('/', '%2F')}"))

    notice = page.locator("#no-image")
    await notice.wait_for()
    assert "No recording of this page" in await notice.text_content()
    assert await page.locator("#heatmap-stage.outline .heat-dot").count() == 1
    await page.screenshot(path=artifacts("outline.png"), full_page=True)
    await assert_accessible(page, "a heatmap without an image")
