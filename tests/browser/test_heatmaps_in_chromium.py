"""Heatmaps end to end (issue 22): a shop visited in Chromium, rendered, drawn in the dashboard.

A local shop page loads the real loader from the service at desktop and at phone width; the
clicks, a rage click, a dead click and the scroll arrive; the render job replays each width's
recording into a PNG; the dashboard's Heatmaps tab draws each click on the element it hit.
Erasing the desktop visitor then removes its image and its share of the counts.
"""

from __future__ import annotations

from typing import Any

from playwright.async_api import Browser, Page

from documents import heatmaps
from tasks.heatmaps import render_heatmap
from tests.browser.conftest import (
    Service,
    ShopFactory,
    click_around_the_shop_page,
)
from tests.support.app import TEST_PASSWORD
from tests.support.browser import eventually

WIDTHS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 780}}


async def _kinds(deps, site_id: str, visitor: str) -> set[str]:
    kinds = set()
    async for bucket in deps.store.collection("interaction_buckets").find(
            {"siteId": site_id, "visitorId": visitor}):
        kinds |= {event["kind"] for event in bucket["events"]}
    return kinds


async def _visit(browser: Browser, shop, deps, width: str) -> tuple[str, dict[str, Any]]:
    """Visit the shop at a width: click, rage, dead click, scroll; the #grow box and visitor."""
    context = await browser.new_context(viewport=WIDTHS[width])
    page = await context.new_page()
    await page.goto(shop.page("/"))
    await eventually(lambda: deps.store.collection("recordings").find_one(
        {"siteId": shop.tenant.site_id, "pages.url": shop.page("/")}),
        message="the recording to start")
    visitor = await page.evaluate("localStorage.getItem('wpelVisitorId')")
    grow = await page.locator("#grow").bounding_box()
    await click_around_the_shop_page(page)
    await page.wait_for_timeout(1300)  # a dead click is one with no effect for 1 s
    await page.click("#next")
    await page.wait_for_url(shop.page("/page2"))
    await eventually(lambda: _has_all(deps, shop.tenant.site_id, visitor),
                     message=f"every kind of interaction at {width} width")
    await context.close()
    return visitor, grow


async def _has_all(deps, site_id: str, visitor: str) -> bool:
    wanted = {"click", "rage_click", "dead_click", "scroll_depth"}
    return wanted <= await _kinds(deps, site_id, visitor)


async def _dot(page: Page, kind: str, selector: str) -> dict[str, float]:
    """The centre of the dot drawn for `selector`, relative to the drawn page."""
    dot = page.locator(f'#heatmap-stage .heat-dot.{kind}[data-selector="{selector}"]')
    await dot.wait_for()
    stage = await page.locator("#heatmap-stage").bounding_box()
    box = await dot.bounding_box()
    return {"x": box["x"] + box["width"] / 2 - stage["x"],
            "y": box["y"] + box["height"] / 2 - stage["y"]}


def _inside(point: dict[str, float], box: dict[str, float]) -> bool:
    return (box["x"] <= point["x"] <= box["x"] + box["width"]
            and box["y"] <= point["y"] <= box["y"] + box["height"])


async def test_a_shops_clicks_are_drawn_on_the_clicked_button_at_desktop_and_phone_width(
        browser: Browser, service: Service, open_shop: ShopFactory, deps, chromium_path,
        artifacts):
    shop = await open_shop({"recordings": True})
    site_id = shop.tenant.site_id
    visitors, boxes = {}, {}
    for width in WIDTHS:
        visitors[width], boxes[width] = await _visit(browser, shop, deps, width)
    await deps.segment_sweeper.sweep()
    await deps.derivation.fold()
    site = await deps.store.collection("sites").find_one({"_id": site_id})
    # The test shop is on 127.0.0.1: allowed here as HEATMAP_ALLOW_PRIVATE_ADDRESSES would.
    images = {width: await render_heatmap(deps.store, site, "/", width,
                                          chromium_path=chromium_path,
                                          allow_private_addresses=True)
              for width in WIDTHS}
    assert all(images.values()), images
    for width, file_id in images.items():
        png = await heatmaps.read_image(deps.store, site_id, file_id)
        artifacts(f"{width}-background.png").write_bytes(png)

    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    await page.goto(service.url + "/")
    await page.get_by_label("E-mail").fill(shop.tenant.email)
    await page.get_by_label("Password").fill(TEST_PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_selector("#site-switcher")
    await page.goto(f"{service.url}/app/sites/{site_id}/heatmaps")
    await page.get_by_role("link", name="/", exact=True).click()
    await page.wait_for_selector("#heatmap-stage img")

    for width in WIDTHS:
        await page.select_option("#heatmap-width", width)
        await page.wait_for_url(f"**width={width}**")
        await page.wait_for_selector("#heatmap-stage img")
        # The click is drawn on the button, where the shop page had it at this width.
        assert _inside(await _dot(page, "click", "button#grow"), boxes[width]), width
        await page.screenshot(path=artifacts(f"{width}-clicks.png"), full_page=True)
    for kind, selector in (("rage_click", "button#rage"), ("dead_click", "button#dead")):
        await page.select_option("#heatmap-kind", kind)
        await page.wait_for_url(f"**kind={kind}**")
        await _dot(page, kind, selector)
        await page.screenshot(path=artifacts(f"{kind}.png"), full_page=True)
    await page.select_option("#heatmap-kind", "scroll")
    await page.wait_for_url("**kind=scroll**")
    await page.wait_for_selector("#fold-line")
    shares = await page.locator(".reach-band").evaluate_all(
        "bands => bands.map(b => Number(b.dataset.share))")
    assert len(shares) == 20 and shares[0] == 1 and shares[-1] == 1
    await page.screenshot(path=artifacts("scroll.png"), full_page=True)
    assert problems == []

    # Erasure: the desktop visitor's image and share go; the phone visitor's stay.
    assert await _clicks_on_home(deps, site_id) == 14  # 7 clicks each: grow, 4 rage, dead, next
    answer = await page.evaluate("""async ([path, token]) => {
        const headers = {Authorization: 'Bearer ' + token};
        return (await fetch(path, {method: 'DELETE', headers})).status;
    }""", [f"/api/v1/sites/{site_id}/visitors/{visitors['desktop']}/data", shop.tenant.token])
    assert answer == 200
    assert await heatmaps.read_image(deps.store, site_id, images["desktop"]) is None
    assert await heatmaps.read_image(deps.store, site_id, images["phone"]) is not None
    assert await _clicks_on_home(deps, site_id) == 7


async def _clicks_on_home(deps, site_id: str) -> int:
    rows = await heatmaps.read_pages(deps.store, site_id, "2000-01-01", "2999-12-31")
    return sum(row["n"] for row in rows if row["_id"] == {"page": "/", "kind": "click"})
