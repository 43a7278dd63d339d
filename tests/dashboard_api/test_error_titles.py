"""Error titles: a browser error reads "TypeError: x is undefined", never "TypeError: Uncaught
TypeError: x is undefined" (issue 28 point 4), in the list, the detail and the live feed."""

from __future__ import annotations

from documents import error_records
from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest, send_errors

CHROMIUM = {"visitorId": "v-1", "sessionId": "s-1", "type": "TypeError",
            "message": "Uncaught TypeError: cart is undefined", "source": "javascript",
            "stack": "TypeError: cart is undefined\n    at buy (https://shop.example/a.js:1:2)"}


async def test_a_browser_error_is_titled_once_with_its_type_in_the_list_detail_and_live_feed(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, ws_connect):
    live = await ws_connect(token=tenant.token, site_ids=(tenant.site_id,))
    await send_errors(ingest, deps, [CHROMIUM, CHROMIUM])
    listed = (await fetch(f"/api/v1/sites/{tenant.site_id}/errors", token=tenant.token)).json()
    [error] = listed["items"]
    assert (error["type"], error["message"]) == ("TypeError", "cart is undefined")
    assert error["occurrenceCount"] == 2
    detail = (await fetch(f"/api/v1/sites/{tenant.site_id}/errors/{error['id']}",
                          token=tenant.token)).json()
    assert detail["message"] == "cart is undefined"
    event = await live.receive_type("new_error")
    assert event["error"]["message"] == "cart is undefined"


async def test_a_message_that_only_starts_like_a_type_keeps_its_words(deps):
    assert error_records.title_message("TypeError", "Uncaught TypeError: x") == "x"
    assert error_records.title_message("Error", "Error: boom") == "boom"
    assert error_records.title_message("TypeError", "RangeError: y") == "RangeError: y"
    assert error_records.title_message("Exception", "Note: stock low") == "Note: stock low"


async def test_errors_stored_before_keep_their_group_and_lose_the_repeated_type(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest):
    """Stored errors are rewritten once at start-up (migration error-titles-v1); the fingerprint
    reads the message as sent, so new occurrences still count towards the same error."""
    await send_errors(ingest, deps, [CHROMIUM])
    errors = deps.store.collection("errors")
    await errors.update_many({}, {"$set": {"message": CHROMIUM["message"]}})
    await deps.store.collection("error_occurrences").update_many(
        {}, {"$set": {"message": CHROMIUM["message"]}})
    await error_records.drop_repeated_types(deps.store)
    await send_errors(ingest, deps, [CHROMIUM])
    [stored] = await errors.find({}).to_list(None)
    assert stored["message"] == "cart is undefined" and stored["occurrenceCount"] == 2
    messages = await deps.store.collection("error_occurrences").distinct("message")
    assert messages == ["cart is undefined"]
