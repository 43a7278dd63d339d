"""The customer's own pages are stored without their text, whatever the loader sent (issue 33
point 6): the sweeper masks checkout, order-received and My Account pages, and anything inside
`rr-mask`, before a segment is ever served; an ordinary page keeps its text."""

from __future__ import annotations

import gzip
import json
from typing import Any

from ingest.segment_sweeper import LATE_SECONDS
from privacy.personal_pages import mask
from tests.recordings.conftest import SendSegment
from tests.recordings.kit import FakeClock, context, gzip_json, new_recording_id
from tests.support.app import Fetch, Tenant, all_documents_text

NAME = "Annabelle Quinteros"
STREET = "27 Rue des Lilas"
EMAIL = "annabelle.q@example.com"
PHONE = "+33 6 12 34 56 78"
PERSONAL = (NAME, STREET, EMAIL, PHONE, "Lilas", "annabelle")
STYLE = ".woocommerce-order{margin:0}"

ORDER_RECEIVED = "https://shop.example/checkout/order-received/1234/?key=wc_order_x1"
PRODUCT = "https://shop.example/products/blue-mug"


def _text(node_id: int, text: str) -> dict[str, Any]:
    return {"type": 3, "textContent": text, "id": node_id}


def _element(node_id: int, tag: str, children: list[dict[str, Any]], **attributes: str
             ) -> dict[str, Any]:
    return {"type": 2, "tagName": tag, "attributes": attributes, "childNodes": children,
            "id": node_id}


def page_events(url: str, *, body_class: str = "") -> list[dict[str, Any]]:
    """A page showing a customer's details in clear, as a modified loader would record it: the
    full snapshot, then a text change, an added node, an attribute and typed input."""
    body = _element(4, "body", [
        _element(5, "p", [_text(6, NAME)], title=f"Billing: {NAME}"),
        _element(7, "address", [_text(8, STREET)]),
        _element(9, "a", [_text(10, EMAIL)], href=f"mailto:{EMAIL}"),
        _element(11, "input", [], value=PHONE, placeholder="Phone"),
    ], **({"class": body_class} if body_class else {}))
    head = _element(2, "head", [_element(3, "style", [
        {"type": 3, "textContent": STYLE, "isStyle": True, "id": 12}])])
    document = {"type": 0, "id": 1, "childNodes": [_element(13, "html", [head, body])]}
    return [
        {"type": 4, "data": {"href": url, "width": 1280, "height": 800}, "timestamp": 1},
        {"type": 2, "data": {"node": document, "initialOffset": {"top": 0, "left": 0}},
         "timestamp": 2},
        {"type": 3, "data": {"source": 0, "texts": [{"id": 8, "value": f"{STREET}, Paris"}],
                             "attributes": [{"id": 11, "attributes": {"value": PHONE}}],
                             "removes": [], "adds": [{"parentId": 4, "nextId": None,
                                                      "node": _text(14, f"Call {PHONE}")}]},
         "timestamp": 3},
        {"type": 3, "data": {"source": 5, "id": 11, "text": PHONE, "isChecked": False},
         "timestamp": 4},
    ]


async def _served(fetch: Fetch, tenant: Tenant, recording_id: str) -> str:
    """The recording's segments as the replay fetches them, inflated."""
    site = f"/api/v1/sites/{tenant.site_id}"
    listed = await fetch(f"{site}/recordings/{recording_id}/segments", token=tenant.token)
    assert listed.code == 200, listed
    texts = []
    for segment in listed.json()["segments"]:
        answer = await fetch(f"{site}/segments/{segment['fileId']}", token=tenant.token)
        assert answer.code == 200, answer
        texts.append(gzip.decompress(answer.body).decode("utf-8"))
    assert texts, "nothing is served"
    return "\n".join(texts)


async def _stored_segments_text(deps) -> str:
    """Every stored segment, inflated, and every document of the store."""
    bucket = deps.store.bucket("segments")
    inflated = [gzip.decompress(await bucket.read(file["_id"])).decode("utf-8")
                async for file in bucket.files.find({}) if file["length"]]
    return "\n".join(inflated) + await all_documents_text(deps.store)


async def test_an_order_received_page_sent_in_clear_is_stored_and_served_masked(
        deps, fetch: Fetch, tenant: Tenant, send_segment: SendSegment):
    recording = new_recording_id()
    answer = await send_segment(recording, 0, body=gzip_json(page_events(ORDER_RECEIVED)),
                                url=ORDER_RECEIVED)
    assert answer.code == 200, answer

    assert await deps.segment_sweeper.sweep() == 1

    served = await _served(fetch, tenant, recording)
    stored = await _stored_segments_text(deps)
    for personal in PERSONAL:
        assert personal not in served and personal not in stored, personal
    events = json.loads(served)
    snapshot = json.dumps(events[1])
    # Masked as rrweb masks: same length, spaces kept, so the replay keeps its layout.
    assert json.dumps("********* *********") in snapshot
    assert STYLE in served and '"mailto:' in served
    # The order key in the meta event's address goes, as it went from the segment's page URL.
    assert "wc_order" not in served and "wc_order" not in stored
    assert events[0]["data"]["href"] == "https://shop.example/checkout/order-received/1234/"
    assert events[3]["data"]["text"] == "*** * ** ** ** **"
    [file] = [doc async for doc in deps.store.bucket("segments").files.find({})]
    assert file["metadata"]["textsMasked"] == 11


async def test_an_ordinary_page_keeps_its_text(
        deps, fetch: Fetch, tenant: Tenant, send_segment: SendSegment):
    recording = new_recording_id()
    events = page_events(PRODUCT)
    await send_segment(recording, 0, body=gzip_json(events), url=PRODUCT)

    await deps.segment_sweeper.sweep()

    assert json.loads(await _served(fetch, tenant, recording)) == events


async def test_a_page_whose_body_carries_rr_mask_is_masked_at_any_address(
        deps, fetch: Fetch, tenant: Tenant, send_segment: SendSegment):
    """A checkout under a translated slug: the plugin's `rr-mask` on `<body>` is enough."""
    recording = new_recording_id()
    url = "https://shop.example/kasse/"
    await send_segment(recording, 0, url=url,
                       body=gzip_json(page_events(url, body_class="woocommerce rr-mask")))

    await deps.segment_sweeper.sweep()

    served = await _served(fetch, tenant, recording)
    for personal in PERSONAL:
        assert personal not in served, personal
    assert STYLE in served


async def test_the_owner_names_the_shops_own_personal_pages(
        deps, fetch: Fetch, tenant: Tenant, send_segment: SendSegment):
    site = f"/api/v1/sites/{tenant.site_id}"
    refused = await fetch(site, "PATCH", token=tenant.token,
                          json_body={"settings": {"personalPages": ["/mein konto"]}})
    assert refused.code == 422 and refused.error_code == "invalid_input", refused
    assert refused.json()["error"]["field"] == "settings.personalPages.0"
    changed = await fetch(site, "PATCH", token=tenant.token,
                          json_body={"settings": {"personalPages": ["/mein-konto*"]}})
    assert changed.code == 200, changed
    assert changed.json()["settings"]["personalPages"] == ["/mein-konto*"]
    account, checkout = new_recording_id(), new_recording_id()
    url = "https://shop.example/mein-konto/bestellungen/"
    await send_segment(account, 0, url=url, body=gzip_json(page_events(url)))
    await send_segment(checkout, 0, url=ORDER_RECEIVED, body=gzip_json(page_events(
        ORDER_RECEIVED)))

    await deps.segment_sweeper.sweep()

    assert NAME not in await _served(fetch, tenant, account)
    # The owner's list replaces WooCommerce's defaults.
    assert NAME in await _served(fetch, tenant, checkout)


def later_events() -> list[dict[str, Any]]:
    """A later segment of the same page: no snapshot, only changes to nodes named by id."""
    return [{"type": 3, "data": {"source": 0, "texts": [{"id": 6, "value": NAME}],
                                 "attributes": [], "removes": [],
                                 "adds": [{"parentId": 4, "nextId": None,
                                           "node": _text(15, f"Ship to {STREET}")}]},
             "timestamp": 5}]


async def test_later_segments_of_a_page_with_rr_mask_are_masked_even_checked_first(
        deps, fetch: Fetch, tenant: Tenant, send_segment: SendSegment):
    """A later segment names nodes only by id, so it takes its page's verdict from the segment
    with the snapshot; checked before that one, it waits for it rather than guess, and checking
    the snapshot releases it at once."""
    recording = new_recording_id()
    url = "https://shop.example/kasse/"
    await send_segment(recording, 0, url=url,
                       body=gzip_json(page_events(url, body_class="rr-mask")))
    await send_segment(recording, 1, url=url, body=gzip_json(later_events()))
    files = deps.store.bucket("segments").files
    later = await files.find_one({"metadata.seq": 1})

    assert await deps.segment_sweeper.check(later) == "deferred"
    assert await deps.segment_sweeper.sweep() == 2  # the snapshot, then the later one

    served = await _served(fetch, tenant, recording)
    for personal in PERSONAL:
        assert personal not in served, personal
    assert len(json.loads(served.split("\n")[1])) == 1


async def test_later_segments_of_an_ordinary_page_keep_their_text(
        deps, fetch: Fetch, tenant: Tenant, send_segment: SendSegment):
    recording = new_recording_id()
    await send_segment(recording, 0, url=PRODUCT, body=gzip_json(page_events(PRODUCT)))
    await send_segment(recording, 1, url=PRODUCT, body=gzip_json(later_events()))

    assert await deps.segment_sweeper.sweep() == 2

    served = await _served(fetch, tenant, recording)
    assert json.loads(served.split("\n")[1]) == later_events()


async def test_an_rr_mask_element_on_an_ordinary_page_masks_only_what_is_inside_it(
        deps, fetch: Fetch, tenant: Tenant, send_segment: SendSegment):
    recording = new_recording_id()
    events = page_events(PRODUCT)
    address = events[1]["data"]["node"]["childNodes"][0]["childNodes"][1]["childNodes"][1]
    address["attributes"]["class"] = "rr-mask"
    await send_segment(recording, 0, url=PRODUCT, body=gzip_json(events))

    await deps.segment_sweeper.sweep()

    served = await _served(fetch, tenant, recording)
    assert STREET not in served and "Lilas" not in served
    assert NAME in served and EMAIL in served


# Issue 40 point 5: whatever the order or shape ------------------------------------------------

KASSE = "https://shop.example/kasse/"
TITLE = f"Order of {NAME}"
VIEWPORT = "width=device-width, initial-scale=1"
SHEET = "https://shop.example/wp-content/themes/shop/style.css?ver=6.5"
SCRIPT = "https://shop.example/wp-includes/js/jquery.min.js?ver=3.7"
CUSTOM = {"type": 5, "data": {"tag": f"checkout of {NAME}", "payload": {
    "customer": {"email": EMAIL, "phone": PHONE}, "total": 987.65}}, "timestamp": 6}


def page_with_head(url: str, *, body_class: str = "rr-mask") -> list[dict[str, Any]]:
    """A page whose head names the customer (its title, a description, an Open Graph title)
    beside what the replay needs as it is: the viewport, a style sheet, a script."""
    events = page_events(url, body_class=body_class)
    head = events[1]["data"]["node"]["childNodes"][0]["childNodes"][0]
    head["childNodes"] += [
        _element(20, "title", [_text(21, TITLE)]),
        _element(22, "meta", [], name="description", content=f"Placed by {NAME}, {EMAIL}"),
        _element(23, "meta", [], property="og:title", content=TITLE),
        _element(24, "meta", [], name="viewport", content=VIEWPORT),
        _element(25, "link", [], rel="stylesheet", href=SHEET),
        _element(26, "script", [], src=SCRIPT),
    ]
    return events


def typed_events() -> list[dict[str, Any]]:
    """A later segment: the name shown again, an address added, an e-mail typed."""
    return [*later_events(), {"type": 3, "data": {"source": 5, "id": 11, "text": EMAIL,
                                                  "isChecked": False}, "timestamp": 7}]


async def _listed(fetch: Fetch, tenant: Tenant, recording_id: str) -> list[dict[str, Any]]:
    """The recording's segments as the replay lists them."""
    listed = await fetch(f"/api/v1/sites/{tenant.site_id}/recordings/{recording_id}/segments",
                         token=tenant.token)
    assert listed.code == 200, listed
    return listed.json()["segments"]


async def _end(fetch: Fetch, tenant: Tenant, recording_id: str) -> None:
    ended = await fetch("/ingest/recordings/end", "POST",
                        headers={"X-Service-Key": tenant.api_key},
                        json_body=context(recordingId=recording_id))
    assert ended.code == 200, ended


async def test_a_page_with_rr_mask_on_its_body_serves_no_text_of_its_head_either(
        deps, fetch: Fetch, tenant: Tenant, send_segment: SendSegment):
    """`<head>` comes before `<body>` in the snapshot: the page is personal from its title on."""
    recording = new_recording_id()
    await send_segment(recording, 0, url=KASSE, body=gzip_json(page_with_head(KASSE)))

    await deps.segment_sweeper.sweep()

    served = await _served(fetch, tenant, recording)
    for personal in (*PERSONAL, "Order of", "Placed by"):
        assert personal not in served, personal
    assert json.dumps(mask(TITLE)) in served
    for needed in (VIEWPORT, SHEET, SCRIPT, STYLE):
        assert needed in served, needed


async def test_a_later_segment_that_arrives_first_is_held_then_served_masked(
        deps, fetch: Fetch, tenant: Tenant, send_segment: SendSegment):
    """The wrong order: the segment after the snapshot (the name, an address, a typed e-mail)
    reaches the service and its sweeper before the one whose snapshot shows `rr-mask` on
    `<body>`. It is not served until that one has come, then served masked."""
    recording = new_recording_id()
    later = await send_segment(recording, 1, url=KASSE, body=gzip_json(typed_events()))

    assert await deps.segment_sweeper.sweep() == 0
    assert await _listed(fetch, tenant, recording) == []
    held = await fetch(f"/api/v1/sites/{tenant.site_id}/segments/{later.json()['id']}",
                       token=tenant.token)
    assert held.code == 404, held

    await send_segment(recording, 0, url=KASSE,
                       body=gzip_json(page_events(KASSE, body_class="rr-mask")))
    assert await deps.segment_sweeper.sweep() == 2

    assert sorted(segment["seq"] for segment in await _listed(fetch, tenant, recording)) \
        == [0, 1]
    served = await _served(fetch, tenant, recording)
    stored = await _stored_segments_text(deps)
    for personal in PERSONAL:
        assert personal not in served and personal not in stored, personal


async def test_a_later_segment_of_an_ordinary_page_that_arrives_first_keeps_its_text(
        deps, fetch: Fetch, tenant: Tenant, send_segment: SendSegment):
    recording = new_recording_id()
    await send_segment(recording, 1, url=PRODUCT, body=gzip_json(typed_events()))
    assert await deps.segment_sweeper.sweep() == 0

    await send_segment(recording, 0, url=PRODUCT, body=gzip_json(page_events(PRODUCT)))
    assert await deps.segment_sweeper.sweep() == 2

    served = await _served(fetch, tenant, recording)
    assert typed_events() in [json.loads(text) for text in served.split("\n")]


async def test_a_later_segment_whose_first_never_comes_is_served_masked_once_its_recording_ended(
        deps, fetch: Fetch, tenant: Tenant, clock: FakeClock, send_segment: SendSegment):
    """The segment with the snapshot was lost: the later one is not held for ever, and with no
    way to know its page it is masked whole."""
    recording = new_recording_id()
    await send_segment(recording, 1, url=PRODUCT, body=gzip_json(typed_events()))
    assert await deps.segment_sweeper.sweep() == 0
    await _end(fetch, tenant, recording)
    held = await deps.store.bucket("segments").files.find_one({})

    # Ended, but the segment before may still be on its way (a page being left sends several).
    assert await deps.segment_sweeper.check(held) == "deferred"
    assert await _listed(fetch, tenant, recording) == []
    clock.advance(LATE_SECONDS)
    # The sweeper's next look at it (HOLD_SECONDS later).
    assert await deps.segment_sweeper.check(held) == "text_masked"

    served = await _served(fetch, tenant, recording)
    for personal in PERSONAL:
        assert personal not in served, personal


async def test_a_later_segment_with_no_page_to_take_its_verdict_from_is_masked_whole(
        deps, fetch: Fetch, tenant: Tenant, send_segment: SendSegment):
    """The first segment of a tab that begins no page, and one after a segment that was
    rejected: nothing says their page is ordinary, so it is taken as personal, at once."""
    first, after_rejected = new_recording_id(), new_recording_id()
    await send_segment(first, 0, url=PRODUCT, body=gzip_json(typed_events()))
    await send_segment(after_rejected, 0, url=PRODUCT, body=gzip.compress(b"{not json"))
    await send_segment(after_rejected, 1, url=PRODUCT, body=gzip_json(typed_events()))

    assert await deps.segment_sweeper.sweep() == 3

    for recording in (first, after_rejected):
        served = await _served(fetch, tenant, recording)
        for personal in PERSONAL:
            assert personal not in served, personal


async def test_a_segment_sent_for_the_continuing_recording_takes_its_page_from_the_one_before(
        deps, fetch: Fetch, tenant: Tenant, send_segment: SendSegment):
    """A recording that ends mid-page goes on under a successor; the client sends its next
    segments for that one and keeps their numbers, so the segment before is found by either
    id and nothing waits."""
    recording = new_recording_id()
    await send_segment(recording, 0, url=KASSE,
                       body=gzip_json(page_events(KASSE, body_class="rr-mask")))
    await _end(fetch, tenant, recording)
    moved = await send_segment(recording, 1, url=KASSE, body=gzip_json(later_events()))
    successor = moved.json()["recordingId"]
    assert successor != recording
    await send_segment(successor, 2, url=KASSE, body=gzip_json(typed_events()))

    assert await deps.segment_sweeper.sweep() == 3

    served = await _served(fetch, tenant, successor)
    assert len(await _listed(fetch, tenant, successor)) == 2
    for personal in PERSONAL:
        assert personal not in served, personal


async def test_custom_events_on_a_personal_page_are_not_served(
        deps, fetch: Fetch, tenant: Tenant, send_segment: SendSegment):
    """A script's own events (rrweb type 5): dropped on a personal page, in its first segment
    and its later ones; kept on an ordinary page."""
    personal, ordinary = new_recording_id(), new_recording_id()
    await send_segment(personal, 0, url=ORDER_RECEIVED,
                       body=gzip_json([*page_events(ORDER_RECEIVED), CUSTOM]))
    await send_segment(personal, 1, url=ORDER_RECEIVED, body=gzip_json([CUSTOM]))
    await send_segment(ordinary, 0, url=PRODUCT, body=gzip_json([*page_events(PRODUCT), CUSTOM]))

    assert await deps.segment_sweeper.sweep() == 3

    served = await _served(fetch, tenant, personal)
    for text in served.split("\n"):
        assert all(event["type"] != 5 for event in json.loads(text)), text
    for secret in (*PERSONAL, "checkout of", "987.65"):
        assert secret not in served, secret
    assert CUSTOM in json.loads(await _served(fetch, tenant, ordinary))


async def test_secret_parameters_leave_the_urls_recorded_inside_a_segment(
        deps, fetch: Fetch, tenant: Tenant, send_segment: SendSegment):
    """On an ordinary page too: the meta event's address, a link, an image (a name the site
    added) and a link changed later lose their secrets; the other parameters stay."""
    site = f"/api/v1/sites/{tenant.site_id}"
    changed = await fetch(site, "PATCH", token=tenant.token,
                          json_body={"settings": {"secretUrlParameters": ["Coupon_Secret"]}})
    assert changed.code == 200, changed
    order = "https://shop.example/checkout/order-received/77/"
    events = page_events(PRODUCT)
    events[0]["data"]["href"] = f"{PRODUCT}?key=wc_order_abc&color=blue"
    body = events[1]["data"]["node"]["childNodes"][0]["childNodes"][1]
    body["childNodes"] += [
        _element(30, "a", [_text(31, "Your order")], href=f"{order}?key=wc_order_abc"),
        _element(32, "img", [], src="https://cdn.shop.example/b.png?coupon_secret=s3cr3t&w=600"),
    ]
    events.append({"type": 3, "data": {"source": 0, "texts": [], "removes": [], "adds": [],
                                       "attributes": [{"id": 30, "attributes": {
                                           "href": f"{order}?order=77&key=wc_order_abc"}}]},
                   "timestamp": 5})
    recording = new_recording_id()
    await send_segment(recording, 0, url=f"{PRODUCT}?key=wc_order_abc&color=blue",
                       body=gzip_json(events))

    await deps.segment_sweeper.sweep()

    served = await _served(fetch, tenant, recording)
    assert "wc_order" not in served and "s3cr3t" not in served
    assert "wc_order" not in await _stored_segments_text(deps)
    shown = json.loads(served)
    assert shown[0]["data"]["href"] == f"{PRODUCT}?color=blue"
    [link, image] = shown[1]["data"]["node"]["childNodes"][0]["childNodes"][1]["childNodes"][-2:]
    assert link["attributes"]["href"] == order
    assert image["attributes"]["src"] == "https://cdn.shop.example/b.png?w=600"
    assert shown[-1]["data"]["attributes"][0]["attributes"]["href"] == f"{order}?order=77"
    assert NAME in served and EMAIL in served  # an ordinary page keeps its text
