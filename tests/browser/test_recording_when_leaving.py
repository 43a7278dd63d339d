"""The end of a recording survives the visitor leaving the page, in real headless Chromium.

A page being left cancels its ordinary requests, at times before its pagehide handlers run, and
the network or the service may fail an upload at any time: a live segment upload that was not
delivered stays the recorder's to send again, with keepalive when the page is left, else after
a pause.

A page being left runs no more tasks once its pagehide handlers return, and keepalive requests
may carry at most 64 KiB of bodies in all, so what the recorder has not sent yet must go at once
and in parts (docs/sdk.md, "Recordings"). The first test leaves right after a burst of DOM
changes several times larger than that, then looks for the burst's end where it lands: in the
store.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import Browser, Route

from tests.browser.conftest import Service, ShopFactory, stored_segments
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


@pytest.mark.parametrize("leaving", ["to another site", "by closing the tab"])
async def test_a_recording_keeps_its_last_moments_when_the_visitor_leaves_after_a_burst(
        leaving: str, browser: Browser, service: Service, open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": True})
    page = await browser.new_page()
    await page.goto(shop.page("/"))
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
    # The burst was far more than the 64 KiB keepalive may carry, and nothing was refused. It
    # lands as mutations, or (on a busy machine, whose main thread is idle only later) inside
    # the first full snapshot, which writes the same nodes more compactly: over twice either way.
    assert len(recorded) > 2 * 64 * 1024
    refused = [call for call in service.collection_calls()
               if call[1].endswith("/recordings/segment") and call[2] >= 300]
    assert refused == []


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
