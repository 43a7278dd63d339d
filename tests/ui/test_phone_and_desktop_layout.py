"""The dashboard read on a 390 px phone and on a desktop (issue 28 point 16), in real Chromium:
no word broken in the errors table, every tab in sight, a scrubber a thumb can use, and a replay
of a 1280 px page large enough to read. Screenshots go to tests/artifacts/."""

from __future__ import annotations

import gzip
import json
import re
import uuid
from datetime import UTC, datetime

from playwright.async_api import Browser, Page, expect

from demo import demo_recording_events
from tests.ui.conftest import MIA, Dashboard, ingest, sign_in

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 860}
SHOP = "https://demo-shop.example"

#: Words of the table's cells that the browser broke over two lines.
BROKEN_WORDS = """(selector) => {
  const broken = [];
  for (const cell of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const match of node.textContent.matchAll(/[A-Za-z]{4,}/g)) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const tops = new Set([...range.getClientRects()].map((rect) => Math.round(rect.top)));
        if (tops.size > 1) broken.push(match[0]);
      }
    }
  }
  return broken;
}"""


async def _open(browser: Browser, viewport: dict[str, int]) -> Page:
    context = await browser.new_context(viewport=viewport)
    return await context.new_page()


async def _recording_of_a_wide_page(dashboard: Dashboard, deps) -> str:
    """A recording of a 1280 x 800 page, as a desktop visitor's would be."""
    recording_id = str(uuid.uuid4())
    url = f"{SHOP}/product/teapot"
    answer = await ingest(dashboard, "/ingest/recordings/start", {
        "visitorId": MIA, "recordingId": recording_id, "url": url})
    assert answer.code == 200, answer
    events = demo_recording_events(url, int(datetime.now(UTC).timestamp() * 1000))
    for event in events:
        if event["type"] == 4:
            event["data"].update(width=1280, height=800)
    answer = await ingest(dashboard, "/ingest/recordings/segment",
                          gzip.compress(json.dumps(events).encode()), {
                              "Content-Type": "application/octet-stream",
                              "X-Recording-Id": recording_id, "X-Segment-Seq": "0",
                              "X-Visitor-Id": MIA, "X-Page-Url": url})
    assert answer.code == 200, answer
    await deps.segment_sweeper.sweep()  # as the running service's sweeper does within seconds
    return recording_id


async def test_on_a_phone_errors_keep_whole_words_tabs_show_they_scroll_and_the_scrubber_is_long(
        browser: Browser, dashboard: Dashboard, deps, artifacts):
    recording_id = await _recording_of_a_wide_page(dashboard, deps)
    page = await _open(browser, PHONE)
    await sign_in(page, dashboard)
    await page.screenshot(path=artifacts("overview-390.png"), full_page=True)
    await page.goto(dashboard.page_url("/errors"))
    await expect(page.locator("table tbody tr").first).to_be_visible()
    await page.screenshot(path=artifacts("errors-390.png"), full_page=True)
    assert await page.evaluate(BROKEN_WORDS, "table tbody td") == []
    # ... and the table fits the phone: no column hidden past the screen's edge.
    assert await page.evaluate(
        "(() => { const wrap = document.querySelector('.table-wrap');"
        " return wrap.scrollWidth <= wrap.clientWidth; })()")
    # The tabs are one row that scrolls, and say so: the side with more tabs fades out.
    nav = page.get_by_role("navigation", name="Sections")
    await expect(nav).to_have_class(re.compile(r"\bmore-right\b"))
    assert await nav.evaluate("(nav) => getComputedStyle(nav).maskImage") != "none"
    await page.screenshot(path=artifacts("tabs-390.png"))
    await nav.evaluate("(nav) => { nav.scrollLeft = nav.scrollWidth; }")
    await expect(nav).to_have_class(re.compile(r"\bmore-left\b"))
    await expect(nav).not_to_have_class(re.compile(r"\bmore-right\b"))
    # A tab past the edge is scrolled into sight when its page opens.
    await page.goto(dashboard.page_url("/settings"))
    current = await nav.get_by_role("link", name="Settings").bounding_box()
    assert current is not None and current["x"] + current["width"] <= PHONE["width"], current
    await page.goto(dashboard.page_url(f"/recordings/{recording_id}"))
    await expect(page.locator("#replay-player")).to_have_attribute("data-ready", "true")
    scrubber = page.locator(".rr-progress")
    await page.screenshot(path=artifacts("replay-390.png"), full_page=True)
    box = await scrubber.bounding_box()
    assert box is not None and box["width"] >= 250, box
    await page.context.close()


async def test_on_a_desktop_the_replay_of_a_1280_px_page_is_large_enough_to_read(
        browser: Browser, dashboard: Dashboard, deps, artifacts):
    recording_id = await _recording_of_a_wide_page(dashboard, deps)
    page = await _open(browser, DESKTOP)
    await sign_in(page, dashboard)
    await page.screenshot(path=artifacts("overview-1280.png"), full_page=True)
    await page.goto(dashboard.page_url("/errors"))
    await expect(page.locator("table tbody tr").first).to_be_visible()
    await page.screenshot(path=artifacts("errors-1280.png"), full_page=True)
    await page.goto(dashboard.page_url(f"/recordings/{recording_id}"))
    await expect(page.locator("#replay-player")).to_have_attribute("data-ready", "true")
    frame = page.locator("#replay-player iframe")
    await page.screenshot(path=artifacts("replay-1280.png"), full_page=True)
    shown = await frame.bounding_box()
    # The recorded page drawn at three quarters of its size or more: its text stays legible.
    assert shown is not None and shown["width"] >= 0.75 * 1280, shown
    await page.context.close()
