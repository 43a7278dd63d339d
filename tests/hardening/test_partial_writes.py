"""A request stores everything it means to, or nothing: the store fails at each write in turn.

For each ingest write path, one clean request shows which writes the path makes and what they
leave behind. Then, for every one of those writes, the store fails exactly there: the request
must answer 503 and leave the store as it was, and its retry must store the whole item once.
Afterwards every site-wide list and CSV still answers.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.recordings.kit import gzip_json, rrweb_events
from tests.support.app import Answer, Fetch, Tenant
from tests.support.faulty_store import FaultPlan

SHOP = "https://shop.example"
PAGE = "https://shop.example/products/blue-mug"
CHROME = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
          "Chrome/126.0.0.0 Safari/537.36")

#: The driver operations that change a document; reads never get a fault here.
WRITES = {"insert_one", "insert_many", "update_one", "update_many", "replace_one", "delete_one",
          "delete_many", "find_one_and_update", "find_one_and_delete"}


@dataclass(frozen=True)
class WritePath:
    """One way in: `prepare(n)` sets the scene for attempt n, `send(n)` makes the request."""

    name: str
    send: Callable[[Fetch, Tenant, int], Awaitable[Answer]]
    prepare: Callable[[Fetch, Tenant, int], Awaitable[Any]] | None = None
    #: A data-subject request: its entry in the request log records that it was received, so
    #: a failed attempt keeps it, marked failed, and nothing else.
    logged_request: bool = False


def _ingest(kind: str, body: Callable[[int], dict[str, Any]]
            ) -> Callable[[Fetch, Tenant, int], Awaitable[Answer]]:
    async def send(fetch: Fetch, tenant: Tenant, n: int) -> Answer:
        return await fetch(f"/ingest/{kind}", "POST", json_body=body(n),
                           headers={"X-Service-Key": tenant.api_key})
    return send


def _sdk(kind: str, body: Callable[[int], dict[str, Any]]
         ) -> Callable[[Fetch, Tenant, int], Awaitable[Answer]]:
    async def send(fetch: Fetch, tenant: Tenant, n: int) -> Answer:
        return await fetch(f"/sdk/v1/{tenant.public_key}/{kind}", "POST",
                           body=json.dumps(body(n)),
                           headers={"Origin": SHOP, "Content-Type": "text/plain;charset=UTF-8",
                                    "User-Agent": CHROME})
    return send


def _recording_id(n: int) -> str:
    return f"0f0e0d0c-0b0a-4909-8807-{n:012d}"


def _segment(fetch: Fetch, tenant: Tenant, n: int) -> Awaitable[Answer]:
    return fetch("/ingest/recordings/segment", "POST", body=gzip_json(rrweb_events(console=False)),
                 headers={"Content-Type": "application/octet-stream",
                          "X-Service-Key": tenant.api_key, "X-Recording-Id": _recording_id(n),
                          "X-Segment-Seq": "0", "X-Visitor-Id": f"v-{n}",
                          "X-Session-Id": f"s-{n}", "X-Page-Url": PAGE})


_start_recording = _ingest("recordings/start", lambda n: {
    "visitorId": f"v-{n}", "recordingId": _recording_id(n), "sessionId": f"s-{n}", "url": PAGE})

PATHS = [
    WritePath("ingest pageview", _ingest("pageviews", lambda n: {
        "visitorId": f"v-{n}", "pageviewId": f"pv-{n}", "url": PAGE, "title": "Blue mug",
        "ip": "203.0.113.77", "userAgent": CHROME})),
    WritePath("ingest visitor", _ingest("visitors", lambda n: {
        "visitorId": f"v-{n}", "userAgent": CHROME, "wpUserId": n})),
    WritePath("ingest lead", _ingest("leads", lambda n: {
        "visitorId": f"v-{n}", "leadId": f"lead-{n}", "email": f"ada{n}@example.com",
        "name": "Ada", "url": PAGE})),
    WritePath("ingest survey", _ingest("surveys", lambda n: {
        "visitorId": f"v-{n}", "responseId": f"r-{n}", "surveyId": "nps",
        "answers": [{"question": "Recommend?", "score": 9}]})),
    WritePath("ingest chat", _ingest("chats", lambda n: {
        "visitorId": f"v-{n}", "transcriptId": f"t-{n}", "emails": ["ada@example.com"],
        "messages": [{"from": "visitor", "text": "hi"}]})),
    WritePath("ingest consent", _ingest("consents", lambda n: {
        "visitorId": f"v-{n}", "decisionId": f"d-{n}", "decision": "granted",
        "signal": "banner"})),
    WritePath("recording start", _start_recording),
    WritePath("segment starting its recording", _segment),
    WritePath("segment of a live recording", _segment, prepare=_start_recording),
    WritePath("browser pageview", _sdk("pageview", lambda n: {
        "visitorId": f"v-{n}", "pageviewId": f"pv-{n}", "url": PAGE, "title": "Blue mug"})),
    WritePath("browser time on page", _sdk("time-on-page", lambda n: {
        "visitorId": f"v-{n}", "pageviewId": f"pv-{n}", "duration": 12}),
        prepare=_sdk("pageview", lambda n: {"visitorId": f"v-{n}", "pageviewId": f"pv-{n}",
                                            "url": PAGE})),
    WritePath("browser interactions", _sdk("interactions", lambda n: {
        "visitorId": f"v-{n}", "url": PAGE, "batchId": f"b-{n}", "interactions": [
            {"kind": "click", "selector": "#buy", "x": 10, "y": 20, "vw": 1280, "ox": 0.5,
             "oy": 0.5},
            {"kind": "scroll_depth", "depth": 80, "fold": 60}]})),
    # A recording runs: the lead and the rage and dead clicks are counted on it as well.
    WritePath("ingest lead during a recording", _ingest("leads", lambda n: {
        "visitorId": f"v-{n}", "leadId": f"lead-{n}", "email": f"ada{n}@example.com",
        "url": PAGE}), prepare=_start_recording),
    WritePath("browser rage and dead clicks during a recording", _sdk("interactions", lambda n: {
        "visitorId": f"v-{n}", "url": PAGE, "batchId": f"b-{n}", "interactions": [
            {"kind": "rage_click", "selector": "#buy", "count": 4},
            {"kind": "dead_click", "selector": "h1"}]}), prepare=_start_recording),
    WritePath("browser consent", _sdk("consents", lambda n: {
        "visitorId": f"v-{n}", "decision": "granted", "signal": "banner"})),
]

#: Every site-wide list and CSV, which must still answer whatever a failed request left.
SITE_WIDE = ["visitors", "errors", "leads", "recordings", "errors.csv", "leads.csv",
             "recordings.csv", "privacy-holds", "stats/daily"]


def _canonical(value: Any) -> Any:
    """The value with every document's fields in name order (an undo may reorder them)."""
    if isinstance(value, dict):
        return sorted((key, _canonical(item)) for key, item in value.items())
    if isinstance(value, list):
        return [_canonical(item) for item in value]
    return value


async def _dump(store: Any) -> dict[str, dict[str, str]]:
    """Every document by collection and `_id`, as text."""
    dump = {}
    for name in await store.collection_names():
        dump[name] = {repr(doc["_id"]): repr(_canonical(doc))
                      async for doc in store.collection(name).find({})}
    return dump


def _changes(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]]
             ) -> dict[str, int]:
    """How many documents each collection gained, lost or changed."""
    changes = {}
    for name in {*before, *after}:
        old, new = before.get(name, {}), after.get(name, {})
        changed = sum(1 for key in {*old, *new} if old.get(key) != new.get(key))
        if changed:
            changes[name] = changed
    return changes


async def _prepare(fetch: Fetch, tenant: Tenant, path: WritePath, n: int) -> None:
    if path.prepare is not None:
        assert (await path.prepare(fetch, tenant, n)).code == 200


async def _attempt(fetch: Fetch, tenant: Tenant, deps: Any, path: WritePath, n: int
                   ) -> tuple[Answer, dict[str, int]]:
    before = await _dump(deps.store)
    answer = await path.send(fetch, tenant, n)
    return answer, _changes(before, await _dump(deps.store))


async def assert_all_or_nothing(fetch: Fetch, tenant: Tenant, deps: Any, faults: FaultPlan,
                                path: WritePath) -> None:
    """Fail the store at each write of `path` in turn: 503, nothing left, and the retry stores
    what a clean request does; then every site-wide list and CSV still answers."""
    # Attempt 0 settles anything a site's first request does once; attempt 1 is the reference.
    for n in (0, 1):
        await _prepare(fetch, tenant, path, n)
    await _attempt(fetch, tenant, deps, path, 0)
    faults.record_calls = True
    faults.clear()
    clean, reference = await _attempt(fetch, tenant, deps, path, 1)
    writes = [call for call in faults.calls if call[1] in WRITES]
    faults.record_calls = False
    assert 200 <= clean.code < 300, clean
    assert reference and writes

    for index, (collection, operation) in enumerate(writes):
        n = 2 + index
        await _prepare(fetch, tenant, path, n)
        faults.clear()
        faults.fail(collection, operation, skip=writes[:index].count(
            (collection, operation)))
        failed, left = await _attempt(fetch, tenant, deps, path, n)
        faults.clear()
        assert failed.code == 503, (collection, operation, failed)
        if path.logged_request and left:
            assert left == {"dsr_requests": 1}, (collection, operation, left)
            [entry] = await deps.store.collection("dsr_requests").find(
                {"siteId": tenant.site_id}).sort("receivedAt", -1).limit(1).to_list(None)
            assert entry["status"] == "failed" and "unavailable" in entry["failureReason"]
            left = {}
        assert left == {}, f"a failure at {collection}.{operation} #{index} left {left} behind"

        retried, stored = await _attempt(fetch, tenant, deps, path, n)
        assert retried.code == clean.code, retried
        if path.logged_request:
            # An erasure also takes the visitor id out of the failed attempt's log entry.
            assert stored.pop("dsr_requests", 0) >= reference["dsr_requests"]
            stored["dsr_requests"] = reference["dsr_requests"]
        assert stored == reference, f"the retry after {collection}.{operation} stored {stored}"

    for listing in SITE_WIDE:
        answer = await fetch(f"/api/v1/sites/{tenant.site_id}/{listing}", token=tenant.token)
        assert answer.code == 200, (listing, answer)


@pytest.mark.parametrize("path", PATHS, ids=[path.name for path in PATHS])
async def test_a_store_failure_at_any_write_leaves_all_of_the_request_or_none(
        fetch: Fetch, tenant: Tenant, deps: Any, faults: FaultPlan, path: WritePath):
    await assert_all_or_nothing(fetch, tenant, deps, faults, path)
