"""Seeds a visitor with data of every kind, through the real ingest endpoints."""

from __future__ import annotations

import asyncio
import gzip
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from documents.heatmaps import store_heatmap
from tests.support.app import Fetch, Tenant
from tests.support.ingest import counted_occurrences


@dataclass(frozen=True)
class SeededVisitor:
    """What was seeded, for assertions."""

    visitor_id: str
    session_id: str
    email: str
    recording_id: str
    legacy_path: str
    full_ip: str


async def seed_visitor(fetch: Fetch, tenant: Tenant, deps: Any, visitor_id: str = "ada-1",
                       *, email: str = "ada@example.com", name: str = "Ada Lovelace",
                       phone: str = "+44 20 7946 0000", wp_user_id: int | None = 7,
                       full_ip: str = "198.51.100.23") -> SeededVisitor:
    """Every kind of visitor data the service stores, for one visitor."""
    session_id = f"sess-{visitor_id}"
    headers = {"X-Service-Key": tenant.api_key}
    context: dict[str, Any] = {"visitorId": visitor_id, "sessionId": session_id,
                               "url": "https://shop.example/p/1", "ip": full_ip,
                               "userAgent": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0",
                               "language": "en-GB"}
    if wp_user_id is not None:
        context["wpUserId"] = wp_user_id

    async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = await fetch(path, "POST", json_body=body, headers=headers)
        assert answer.code == 200, (path, answer)
        return answer.json()

    await post("/ingest/visitors", context)
    await post("/ingest/pageviews", {**context, "title": "Product 1"})
    await post("/ingest/pageviews", {**context, "url": "https://shop.example/cart"})
    await post("/ingest/leads", {**context, "email": email, "name": name, "phone": phone,
                                 "kind": "checkout"})
    await post("/ingest/consents", {**context, "decision": "granted", "signal": "banner"})
    # A survey linked only by the session, and a chat found only by the lead's e-mail.
    await post("/ingest/surveys", {"sessionId": session_id, "surveyId": "nps",
                                   "answers": [{"question": "Recommend us?", "score": 9,
                                                "text": f"I am {email}"}]})
    await post("/ingest/chats", {"emails": [email],
                                 "messages": [{"from": "visitor", "text": "Where is my parcel?"}]})
    await post("/ingest/chats", {"visitorId": visitor_id,
                                 "messages": [{"from": "agent", "text": "Hello!"}]})
    await post("/ingest/recordings/interactions", {**context, "interactions": [
        {"kind": "click", "at": "2026-11-20T10:00:01Z", "url": context["url"],
         "selector": "#buy", "x": 10, "y": 20},
        {"kind": "scroll_depth", "at": "2026-11-20T10:00:02Z", "url": context["url"],
         "depth": 80},
    ]})
    recording_id = str(uuid.uuid4())
    await post("/ingest/recordings/start", {**context, "recordingId": recording_id})
    segment = gzip.compress(json.dumps([{"type": 4, "data": {"href": context["url"]},
                                         "timestamp": 1}]).encode())
    answer = await fetch("/ingest/recordings/segment", "POST", body=segment, headers={
        **headers, "Content-Type": "application/octet-stream", "X-Recording-Id": recording_id,
        "X-Segment-Seq": "0", "X-Visitor-Id": visitor_id, "X-Session-Id": session_id,
        "X-Page-Url": context["url"]})
    assert answer.code == 200, answer
    # The worker counts an occurrence on its error last: once counted, it is done with it.
    errors_before = await counted_occurrences(deps.store)
    await post("/ingest/errors", {**context, "source": "javascript", "type": "TypeError",
                                  "message": "cart is undefined", "stack": "at cart.js:1:1",
                                  "context": {"user": {"email": email}, "release": "1.2.3",
                                              "request": {"headers": {"Cookie": "x"}}}})
    for _ in range(200):
        if await counted_occurrences(deps.store) > errors_before:
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError("the error was not processed")
    await store_heatmap(deps.store, tenant.site_id, context["url"], b"\x89PNG fake",
                        [recording_id])
    legacy_path = f"wp-content/uploads/wpel-recordings/{recording_id}-legacy.json.gz"
    await deps.store.collection("recordings").insert_one({
        "_id": str(uuid.uuid4()), "siteId": tenant.site_id, "visitorId": visitor_id,
        "sessionId": session_id, "status": "ended", "startedAt": datetime(2024, 1, 1, tzinfo=UTC),
        "lastActivityAt": datetime(2024, 1, 1, tzinfo=UTC),
        "endedAt": datetime(2024, 1, 1, 0, 5, tzinfo=UTC), "pages": [],
        "legacyFootage": {"kind": "client_server", "location": legacy_path}})
    return SeededVisitor(visitor_id, session_id, email, recording_id, legacy_path, full_ip)
