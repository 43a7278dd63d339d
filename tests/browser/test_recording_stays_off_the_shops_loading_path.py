"""The shop's pages load as fast with recordings on (issue 28 point 18), in real Chromium.

What the shop owner would otherwise see as a slower shop: the recorder fetched while the page is
still loading, layout forced by the loader before the load event, the first full snapshot taken
in the middle of the page's own work, and a sliver of a segment uploaded right after one cut for
its size. Each test asserts the order in which things happened, never how long they took.
"""

from __future__ import annotations

import json
from typing import Any

from playwright.async_api import Browser

from tests.browser.conftest import Service, ShopFactory, stored_segments
from tests.support.browser import eventually

#: Notes, in the page, every layout read made by the service's scripts and whether the load
#: event had begun, and the span of every idle callback that ran.
INSTRUMENT = """(() => {
  window.__loadBegan = false;
  window.__layoutReads = [];
  window.__idle = [];
  addEventListener('load', () => { window.__loadBegan = true; });
  const ours = () => /\\/sdk\\/v1\\//.test(new Error().stack || '');
  const note = (what) => {
    if (ours()) window.__layoutReads.push({ what, afterLoad: window.__loadBegan });
  };
  for (const name of ['scrollHeight', 'scrollWidth', 'clientHeight', 'clientWidth',
                      'offsetHeight', 'offsetWidth']) {
    const proto = name.startsWith('offset') ? HTMLElement.prototype : Element.prototype;
    const own = Object.getOwnPropertyDescriptor(proto, name);
    Object.defineProperty(proto, name, { configurable: true, enumerable: own.enumerable,
      get() { note(name); return own.get.call(this); } });
  }
  const rect = Element.prototype.getBoundingClientRect;
  Element.prototype.getBoundingClientRect = function () {
    note('getBoundingClientRect');
    return rect.call(this);
  };
  const idle = window.requestIdleCallback;
  window.requestIdleCallback = function (callback, options) {
    return idle.call(window, (deadline) => {
      const span = { from: Date.now(), to: null };
      window.__idle.push(span);
      try { return callback(deadline); } finally { span.to = Date.now(); }
    }, options);
  };
})();"""


def _events(segments: list[tuple[dict[str, Any], bytes]]) -> list[list[dict[str, Any]]]:
    return [json.loads(data) for _, data in segments]


async def test_the_recorder_waits_for_the_page_to_load_and_the_snapshot_for_an_idle_moment(
        browser: Browser, service: Service, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": True})
    context = await browser.new_context()
    await context.add_init_script(INSTRUMENT)
    page = await context.new_page()
    await page.goto(shop.page("/"))
    await page.wait_for_function("performance.getEntriesByType('resource')"
                                 ".some((entry) => entry.name.endsWith('/sdk/v1/recorder.js'))")

    # The recorder was requested once the load event was over.
    order = await page.evaluate("""() => {
        const nav = performance.getEntriesByType('navigation')[0];
        const recorder = performance.getEntriesByType('resource')
            .find((entry) => entry.name.endsWith('/sdk/v1/recorder.js'));
        return {loadEnd: nav.loadEventEnd, recorder: recorder ? recorder.startTime : null};
    }""")
    assert order["recorder"] is not None and order["loadEnd"] > 0
    assert order["recorder"] >= order["loadEnd"], order
    # The loader read no layout before the load event.
    reads = await page.evaluate("window.__layoutReads")
    assert [read for read in reads if not read["afterLoad"]] == []

    # rrweb's first full snapshot was taken inside an idle callback.
    await page.wait_for_timeout(2500)  # an idle moment comes within 2 s
    idle = await page.evaluate("window.__idle")
    await page.goto("about:blank")  # the recording is sent as the page is left

    async def snapshot() -> list[dict[str, Any]]:
        events = [e for batch in _events(await stored_segments(deps.store, shop.tenant.site_id))
                  for e in batch]
        return [e for e in events if e["type"] == 2]

    [full] = await eventually(snapshot, message="the full snapshot")
    assert any(span["from"] <= full["timestamp"] <= span["to"] for span in idle), (
        full["timestamp"], idle)
    await context.close()


#: Appends a text of about 70 KB every 1.2 s, ten times: each is recorded as one event larger
#: than the 64 KB at which a segment is cut for its size. A small change every 200 ms keeps the
#: recording busy in between. Ten cuts over 12 s: a fixed 10 s tick lands between two of them.
CUTS = 10
BUSY_PAGE = """(cuts) => {
  const ticker = document.createElement('p');
  document.body.append(ticker);
  let ticks = 0;
  setInterval(() => { ticker.textContent = String(++ticks); }, 200);
  let chunks = 0;
  const grow = setInterval(() => {
    const review = document.createElement('p');
    review.textContent = 'A fine mug. '.repeat(6000) + chunks;
    document.body.append(review);
    if (++chunks === cuts) clearInterval(grow);
  }, 1200);
}"""
SEGMENT_BYTES = 64 * 1024


async def test_no_sliver_of_a_segment_follows_one_cut_for_its_size(
        browser: Browser, service: Service, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": True})
    page = await browser.new_page()
    await page.goto(shop.page("/"))
    await eventually(lambda: stored_segments(deps.store, shop.tenant.site_id),
                     message="the first segment")
    await page.evaluate(BUSY_PAGE, CUTS)
    # The cuts, then a whole segment time and some, so the segment after the last cut is cut by
    # its timer while the page is open, not by leaving (which a busy machine may lose).
    await page.wait_for_timeout(CUTS * 1200 + 13000)
    await page.goto("about:blank")

    async def all_cuts() -> list[tuple[dict[str, Any], bytes]]:
        segments = await stored_segments(deps.store, shop.tenant.site_id)
        cut = [data for _, data in segments if len(data) >= SEGMENT_BYTES]
        return segments if len(cut) >= CUTS else []

    segments = await eventually(all_cuts, message=f"{CUTS} segments cut for their size")
    batches = _events(segments)
    followers = 0
    for index in range(len(segments) - 1):
        cut, after = segments[index][1], segments[index + 1][1]
        if len(cut) < SEGMENT_BYTES or len(after) >= SEGMENT_BYTES:
            continue
        followers += 1
        covered = batches[index + 1][-1]["timestamp"] - batches[index][-1]["timestamp"]
        # The segment after a cut covers a whole segment time (leaving sends the rest).
        assert covered >= 4000, (index, covered, [len(data) for _, data in segments])
    assert followers >= 1
