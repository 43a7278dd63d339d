"""The recording facts backfill (issue 21): recordings stored before recordings kept their
country, device and marks get them once per store, as the recordings list used to look them up.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from derived import store_setup
from documents import migrations, recordings
from documents.store import Store
from tests.support.app import Answer, Fetch, Tenant

SHOP = "https://shop.example"
PHONE = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 "
         "(KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1")
#: An address the packaged country database places in Great Britain.
GB_IP = "81.2.69.160"
FACTS = {"country": "", "device": "", "marks": ""}


async def _post(fetch: Fetch, tenant: Tenant, kind: str, body: dict[str, Any]) -> Answer:
    answer = await fetch(f"/ingest/{kind}", "POST", json_body=body,
                         headers={"X-Service-Key": tenant.api_key})
    assert answer.code == 200, answer
    return answer


def _old_recording(site_id: str, visitor_id: str, started: datetime) -> dict[str, Any]:
    """A recording as versions before issue 21's facts stored it."""
    return {"_id": str(uuid.uuid4()), "siteId": site_id, "visitorId": visitor_id,
            "sessionId": None, "wpUserId": None, "status": "ended", "startedAt": started,
            "lastActivityAt": started + timedelta(minutes=5),
            "endedAt": started + timedelta(minutes=5), "endReason": "inactivity",
            "pages": [], "lastPageUrl": None, "continuesFrom": None}


async def test_the_backfill_gives_an_old_recording_the_facts_the_list_used_to_look_up(
        fetch: Fetch, tenant: Tenant, deps):
    context = {"visitorId": "ada", "sessionId": "ada-s", "ip": GB_IP, "userAgent": PHONE,
               "url": f"{SHOP}/cart"}
    recording_id = str(uuid.uuid4())
    await _post(fetch, tenant, "recordings/start", {**context, "recordingId": recording_id})
    await _post(fetch, tenant, "recordings/interactions", {**context, "interactions": [
        {"kind": "rage_click", "selector": "#coupon"}, {"kind": "dead_click", "selector": "h1"},
        {"kind": "click", "selector": "#buy"}]})
    await _post(fetch, tenant, "leads", {**context, "email": "ada@example.com"})
    await _post(fetch, tenant, "errors", {**context, "source": "javascript",
                                          "type": "TypeError", "message": "coupon is undefined"})
    await deps.queue.join()
    await deps.derivation.fold()
    stored = deps.store.collection("recordings")
    counted = await stored.find_one({"_id": recording_id})
    # Stored by an earlier version: no facts, however the events of its time were stored.
    await stored.update_one({"_id": recording_id}, {"$unset": FACTS})
    unreadable = {**_old_recording(tenant.site_id, "ada", datetime.now(UTC)), "startedAt": None}
    await stored.insert_one(unreadable)

    await recordings.backfill_facts(deps.store)

    backfilled = await stored.find_one({"_id": recording_id})
    assert (backfilled["country"], backfilled["device"]) == ("GB", "mobile")
    assert backfilled["marks"] == counted["marks"] == {
        "error": 1, "rage_click": 1, "dead_click": 1, "lead": 1}
    assert "device" not in await stored.find_one({"_id": unreadable["_id"]})
    listed = await fetch(f"/api/v1/sites/{tenant.site_id}/recordings?has=lead&country=GB",
                         token=tenant.token)
    assert [item["id"] for item in listed.json()["items"]] == [recording_id]


async def test_the_backfill_runs_once_per_store_at_start_up_however_many_processes_start(
        store: Store):
    old = _old_recording("site-1", "ada", datetime.now(UTC) - timedelta(days=3))
    await store.collection("recordings").insert_one(old)

    await asyncio.gather(*(store_setup.prepare_store(store) for _ in range(3)))

    recording = await store.collection("recordings").find_one({"_id": old["_id"]})
    assert recording["marks"] == {"error": 0, "rage_click": 0, "dead_click": 0, "lead": 0}
    assert recording["country"] is None and recording["device"] is None  # no profile to ask
    marker = await store.collection(migrations.COLLECTION).find_one({"_id": "recording-facts-v1"})
    assert marker["doneAt"] is not None
    # Another start does not run it again, whatever it would find.
    await store.collection("recordings").update_one({"_id": old["_id"]}, {"$unset": FACTS})
    await store_setup.prepare_store(store)
    assert "device" not in await store.collection("recordings").find_one({"_id": old["_id"]})
