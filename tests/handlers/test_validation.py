"""A body that breaks its schema is refused with the offending field named."""

from __future__ import annotations

import pytest

from errors import InvalidInput
from handlers.validation import SchemaValidator

VALIDATOR = SchemaValidator()
PAGEVIEW = {"visitorId": "v-1", "url": "https://shop.example/"}


def _field(body: object, schema: str = "PageviewIngest") -> str | None:
    with pytest.raises(InvalidInput) as refused:
        VALIDATOR.validate(body, schema)
    return refused.value.field


def test_a_valid_body_passes():
    VALIDATOR.validate(PAGEVIEW, "PageviewIngest")


@pytest.mark.parametrize(("body", "field"), [
    ({**PAGEVIEW, "colour": "red"}, "colour"),  # unknown, past allOf + unevaluatedProperties
    ({"visitorId": "v-1"}, "url"),  # missing
    ({**PAGEVIEW, "visitorId": 7}, "visitorId"),  # wrong type inside a referenced schema
    ({**PAGEVIEW, "duration": -1}, "duration"),  # out of range
])
def test_the_refusal_names_the_field(body: dict, field: str):
    assert _field(body) == field


def test_a_nested_field_is_named_by_its_path():
    lead = {"visitorId": "v-1", "email": "ann@example.org",
            "cart": {"items": [{"productId": "42", "surprise": 1}]}}
    assert _field(lead, "LeadIngest") == "cart.items.0.surprise"


def test_a_body_that_is_not_an_object_names_no_field():
    assert _field([]) is None


def test_an_unknown_schema_name_is_a_programming_error():
    with pytest.raises(KeyError):
        VALIDATOR.validate({}, "NoSuchSchema")
