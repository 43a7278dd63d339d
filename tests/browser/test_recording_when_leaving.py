"""The end of a recording survives the visitor leaving the page, in real headless Chromium.

A page being left cancels its ordinary requests, at times before its pagehide handlers run, and
the network or the service may fail an upload at any time: a live segment upload that was not
delivered stays the recorder's to send again, with keepalive when the page is left, else after
a pause.

A page being left runs no more tasks once its pagehide handlers return, and keepalive requests
may carry at most 64 KiB of bodies in all, so what the recorder has not sent yet must go at once
and in parts (docs/sdk.md, "Recordings"). The first tests leave right after a burst of DOM
changes several times larger than that, recorded as changes after the first snapshot or, on a
page left before its idle moment, inside the snapshot taken as it is left; then they look for
the burst's end where it lands: in the store.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.async_api import Browser, Page, Route

from tests.browser.conftest import Service, Shop, ShopFactory, stored_segments
from tests.support.browser import eventually

MARKER = "The last words before leaving"
CHUNKS = 8
ROWS = 120
#: Every review the burst adds, as rrweb records its text.
REVIEWS = [f"Review {chunk}-{row}:" for chunk in range(CHUNKS) for row in range(ROWS)]

# Each chunk is its own rrweb mutation event (the observer runs at the await); the marker comes
# last, then the visitor leaves in the next task, long before a 5 s flush would send it all.
BURST = """async ({chunks, rows, marker, away}) => {
  const list = document.getElementById('list');
  for (let chunk = 0; chunk < chunks; chunk++) {
    for (let row = 0; row < rows; row++) {
      list.appendChild(document.createElement('li')).textContent =
        `Review ${chunk}-${row}: the blue mug keeps the coffee hot for hours, five stars`;
    }
    await Promise.resolve();
  }
  document.getElementById('bottom').textContent = marker;
  if (away) setTimeout(() => { location.href = away; });
}"""


def _complete(deps, site_id: str):
    """A check: the recording's segments numbered 0..n without a gap, the marker in the last."""
    async def complete() -> list[tuple[dict[str, Any], bytes]]:
        segments = await stored_segments(deps.store, site_id)
        seqs = [doc["metadata"]["seq"] for doc, _ in segments]
        ended = bool(segments) and MARKER.encode() in segments[-1][1]
        return segments if ended and seqs == list(range(len(seqs))) else []

    return complete


#: A page whose main thread is never idle: the recorder's first snapshot waits until it is left.
NEVER_IDLE = "window.requestIdleCallback = () => 0;"


async def _leave_after_a_burst(page: Page, leaving: str, service: Service, shop: Shop,
                               deps) -> list[bytes]:
    """Run the burst on a recorded page, leave it as `leaving` says, and return the recording's
    segments, in order, once they are complete; no segment upload was refused."""
    recording = await eventually(lambda: deps.store.collection("recordings").find_one({}),
                                 message="the recording to start")
    away = f"{service.url}/healthz" if leaving == "to another site" else None
    await page.evaluate(BURST, {"chunks": CHUNKS, "rows": ROWS, "marker": MARKER, "away": away})
    if away:
        await page.wait_for_url(away)
    else:
        await page.close()

    segments = await eventually(_complete(deps, shop.tenant.site_id), within=20,
                                message="numbered segments 0..n without a gap, the marker last")
    assert {doc["metadata"]["recordingId"] for doc, _ in segments} == {recording["_id"]}
    recorded = b"".join(data for _, data in segments).decode()
    assert [review for review in REVIEWS if review not in recorded] == []
    refused = [call for call in service.collection_calls()
               if call[1].endswith("/recordings/segment") and call[2] >= 300]
    assert refused == []
    return [data for _, data in segments]


def _event_types(segments: list[bytes]) -> list[int]:
    """rrweb's event types in the segments (2: a full snapshot, 3: an incremental one)."""
    return [event["type"] for data in segments for event in json.loads(data)]


@pytest.mark.parametrize("leaving", ["to another site", "by closing the tab"])
async def test_a_recording_keeps_its_last_moments_when_the_visitor_leaves_after_a_burst(
        leaving: str, browser: Browser, service: Service, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": True})
    page = await browser.new_page()
    await page.goto(shop.page("/"))
    # The first full snapshot waits for an idle main thread and is uploaded as soon as it is
    # taken; the burst comes after it, so it is recorded as the mutations this test is about.
    await eventually(lambda: stored_segments(deps.store, shop.tenant.site_id),
                     message="the first snapshot")
    segments = await _leave_after_a_burst(page, leaving, service, shop, deps)
    types = _event_types(segments)
    assert types.count(2) == 1 and types.count(3) >= CHUNKS  # a mutation per chunk, the marker
    # Far more than the 64 KiB keepalive may carry: the snapshot and the burst's mutations came
    # to 242,402-242,403 bytes in each of 30 runs (both ways of leaving, five times each on a
    # busy machine, with four more busy loops beside it, and on the wire).
    assert len(b"".join(segments)) > 3 * 64 * 1024


@pytest.mark.parametrize("leaving", ["to another site", "by closing the tab"])
async def test_a_page_left_before_its_first_snapshot_sends_the_burst_inside_the_snapshot(
        leaving: str, browser: Browser, service: Service, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": True})
    context = await browser.new_context()
    await context.add_init_script(NEVER_IDLE)
    page = await context.new_page()
    await page.goto(shop.page("/"))
    segments = await _leave_after_a_burst(page, leaving, service, shop, deps)
    types = _event_types(segments)
    assert types.count(2) == 1 and types.count(3) == 0
    # The snapshot taken as the page is left writes the same nodes more compactly than the
    # mutations: 168,475 bytes in each of the same 30 runs, still over twice what keepalive may
    # carry. (A loaded CI machine once left the first test's page before its idle moment and
    # recorded 168 KB, which is why that test now waits for the first snapshot.)
    assert len(b"".join(segments)) > 2 * 64 * 1024
    await context.close()


@pytest.mark.parametrize("failure", ["the network fails", "the service answers 503"])
async def test_a_live_segment_upload_that_fails_is_sent_again(
        failure: str, browser: Browser, service: Service, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": True})
    page = await browser.new_page()
    failed: list[str] = []

    async def fail_the_first_upload(route: Route) -> None:
        if route.request.method != "POST" or failed:
            await route.continue_()
            return
        failed.append(route.request.headers.get("x-segment-seq", "?"))
        if failure == "the network fails":
            await route.abort("connectionreset")
        else:
            await route.fulfill(status=503, headers={
                "Access-Control-Allow-Origin": shop.origin, "Retry-After": "1"},
                content_type="application/json", body='{"error": "unavailable"}')

    await page.route(f"{service.url}/sdk/v1/*/recordings/segment*", fail_the_first_upload)
    await page.goto(shop.page("/"))
    await eventually(lambda: deps.store.collection("recordings").find_one({}),
                     message="the recording to start")
    await page.evaluate(BURST, {"chunks": CHUNKS, "rows": ROWS, "marker": MARKER, "away": None})

    segments = await eventually(_complete(deps, shop.tenant.site_id), within=20,
                                message="numbered segments 0..n without a gap, the marker last")
    assert failed == ["0"]
    recorded = b"".join(data for _, data in segments).decode()
    assert [review for review in REVIEWS if review not in recorded] == []
    await page.close()
