"""Shapes of a segment the masker meets (privacy/personal_pages.py): what decides a page, what
of a personal page's head stays for the replay, and URLs in every form an element carries."""

from __future__ import annotations

from typing import Any

from privacy.personal_pages import DEFAULT_PERSONAL_PAGES, mask_personal_text

PAGE = "https://shop.example/products/blue-mug"
CHECKOUT = "https://shop.example/checkout/"
NAME = "Annabelle Quinteros"


def _meta(**attributes: str) -> dict[str, Any]:
    return {"type": 2, "tagName": "meta", "attributes": attributes, "childNodes": [], "id": 9}


def _snapshot(*children: dict[str, Any]) -> dict[str, Any]:
    head = {"type": 2, "tagName": "head", "attributes": {}, "childNodes": list(children),
            "id": 2}
    html = {"type": 2, "tagName": "html", "attributes": {}, "childNodes": [head], "id": 1}
    return {"type": 2, "data": {"node": {"type": 0, "childNodes": [html], "id": 0}},
            "timestamp": 1}


def _text_change() -> dict[str, Any]:
    return {"type": 3, "data": {"source": 0, "texts": [{"id": 6, "value": NAME}],
                                "attributes": [], "removes": [], "adds": []}, "timestamp": 2}


def _mask(events: list[Any], url: str = PAGE, **options: Any):
    return mask_personal_text(events, url, list(DEFAULT_PERSONAL_PAGES), **options)


def test_a_personal_pages_technical_meta_tags_stay_and_the_others_are_masked():
    events = [_snapshot(_meta(name="viewport", content="width=device-width"),
                        _meta(**{"http-equiv": "refresh", "content": "0;url=/thanks"}),
                        _meta(name="author", content=NAME))]

    _mask(events, CHECKOUT)

    head = events[0]["data"]["node"]["childNodes"][0]["childNodes"][0]["childNodes"]
    assert [meta["attributes"]["content"] for meta in head] == [
        "width=device-width", "*" * 13, "********* *********"]


def test_a_segment_that_does_not_begin_a_page_waits_for_the_one_before_unless_its_address_decides():
    events = [_text_change()]

    assert _mask(events, personal_before=None).undecided
    assert events == [_text_change()]
    assert _mask(events, CHECKOUT, personal_before=None).personal_page
    assert NAME not in str(events)


def test_a_page_begun_without_its_snapshot_is_taken_as_personal():
    """rrweb's meta event went alone in one segment and the snapshot in the next: the body of
    this page is unseen, so what follows it is masked should the snapshot be lost."""
    masking = _mask([{"type": 4, "data": {"href": PAGE}, "timestamp": 1}],
                    personal_before=False)

    assert masking.personal_page and not masking.undecided


def test_text_rrweb_masked_already_is_not_rewritten():
    events = [{"type": 3, "data": {"source": 5, "id": 4, "text": "*** ****"}, "timestamp": 1}]

    masking = _mask(events, CHECKOUT, personal_before=True)

    assert masking.texts == 0 and not masking.changed


def test_every_url_an_element_carries_loses_its_secrets_whatever_its_tag():
    form = {"type": 2, "tagName": "form", "childNodes": [], "id": 3, "attributes": {
        "action": "/checkout/order-pay/12/?pay_for_order=true&key=wc_order_k",
        "data-note": "?key=stays: not a URL attribute"}}
    image = {"type": 2, "tagName": "img", "childNodes": [], "id": 4, "attributes": {
        "srcset": "/a.png?token=t1 1x, /b.png?token=t2&w=2 2x"}}
    events = [_snapshot(form, image)]

    masking = _mask(events)

    assert form["attributes"] == {"action": "/checkout/order-pay/12/?pay_for_order=true",
                                  "data-note": "?key=stays: not a URL attribute"}
    assert image["attributes"]["srcset"] == "/a.png 1x, /b.png?w=2 2x"
    assert masking.urls == 2 and not masking.personal_page


def test_a_hostile_shape_is_walked_past_not_crashed_on():
    events: list[Any] = [
        {"type": 2, "data": {"node": {"type": 2, "tagName": "body", "childNodes": 5,
                                      "attributes": ["rr-mask"]}}},
        {"type": 3, "data": {"source": 0, "adds": 7, "texts": {"id": 1}, "attributes": None}},
        {"type": 5, "data": "not an object"},
    ]

    masking = _mask(events)

    assert not masking.personal_page and masking.texts == 0
