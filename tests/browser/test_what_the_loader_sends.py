"""How often the loader and the recorder call the service (issue 28 point 18), in real Chromium.

A shop page pays for every request it makes: fewer, fuller requests cost it less script and
upload fewer bytes. What a shop owner would notice otherwise is a replay that only exists
seconds after the visit began, or a visitor's time on page counted from two reports.
"""

from __future__ import annotations

import json
from typing import Any

from playwright.async_api import Browser

from tests.browser.conftest import Service, ShopFactory, stored_segments
from tests.support.app import pageviews
from tests.support.browser import eventually

#: Changes the page every 200 ms from the start, so any segment that waits for its timer
#: carries mutations as well as the first snapshot.
TICKER = """addEventListener('DOMContentLoaded', () => {
  const ticker = document.createElement('p');
  document.body.append(ticker);
  let ticks = 0;
  setInterval(() => { ticker.textContent = String(++ticks); }, 200);
});"""

META, FULL_SNAPSHOT = 4, 2


def _time_reports(service: Service) -> list[tuple[str, str, int]]:
    return [r for r in service.requests if r[0] == "POST" and r[1].endswith("/time-on-page")]


async def test_a_page_hidden_and_then_left_reports_its_time_on_page_once(
        browser: Browser, service: Service, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    page = await browser.new_page()
    await page.goto(shop.page("/"))
    await eventually(lambda: pageviews(deps, shop.tenant.site_id), message="the pageview")
    await page.wait_for_timeout(1200)
    # Leaving fires pagehide and then visibilitychange to hidden: both report the time.
    await page.goto("about:blank")

    async def reported() -> list[dict[str, Any]]:
        views = await pageviews(deps, shop.tenant.site_id)
        return views if views and views[0].get("duration") else []

    [view] = await eventually(reported, message="the time on page")
    assert 1 <= view["duration"] < 60
    await page.wait_for_timeout(1500)  # a second report, had there been one, is in by now
    assert len(_time_reports(service)) == 1, _time_reports(service)
    await page.close()


async def test_the_first_snapshot_is_uploaded_as_soon_as_it_is_taken(
        browser: Browser, service: Service, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": True})
    context = await browser.new_context()
    await context.add_init_script(TICKER)
    page = await context.new_page()
    await page.goto(shop.page("/"))
    segments = await eventually(lambda: stored_segments(deps.store, shop.tenant.site_id),
                                message="the first segment")
    first = json.loads(segments[0][1])
    # A segment cut by its timer would also hold the ticker's changes since the snapshot.
    assert [event["type"] for event in first] == [META, FULL_SNAPSHOT], \
        [event["type"] for event in first]
    await context.close()
