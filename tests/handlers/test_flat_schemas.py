"""The flattened request schemas decide exactly what the schemas as written decide.

`SchemaValidator` accepts a body when the flat form of its schema does (handlers/validation.py),
so a flat form that accepted one body more would let an invalid body through. Hypothesis builds
bodies near each schema's boundary: documented properties with values of every JSON type, the
schema's own enum values, strings shaped like the documented patterns, missing required
properties and unknown ones; the two forms must agree on every one.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from errors import InvalidInput
from handlers.validation import NotFlattenable, SchemaValidator, flatten_schema

VALIDATOR = SchemaValidator()
SCHEMAS: dict[str, Any] = VALIDATOR.document["components"]["schemas"]
FLATTENED = sorted(name for name in SCHEMAS if VALIDATOR.flat_validator(name) is not None)

LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 100_000), st.floats(allow_nan=False),
    st.sampled_from(["", "a", "v-1", "TypeError", "https://shop.example/p/1",
                     "2026-11-22T10:00:00Z", "1920x1080", "198.51.100.7", "x" * 5000,
                     "granted", "javascript", "click", "a@example.com"]),
)
JSON = st.recursive(LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "url", "x"]), inner,
                                                 max_size=3)), max_leaves=6)


def _literals(schema: Any) -> list[Any]:
    """Every enum and const value anywhere in the schema: values that hit the edge cases."""
    found: list[Any] = []
    if isinstance(schema, dict):
        found.extend(schema.get("enum", []))
        if "const" in schema:
            found.append(schema["const"])
        for key, value in schema.items():
            if key not in ("enum", "const"):
                found.extend(_literals(value))
    elif isinstance(schema, list):
        for item in schema:
            found.extend(_literals(item))
    return [value for value in found if isinstance(value, str | int | float | bool)]


#: Concrete values to try for any property; `_valid_values` picks those a property accepts.
POOL: list[Any] = [None, True, False, 0, 1, -1, 2.5, 100_000, "", "a", "v-1", "TypeError",
                   "https://shop.example/p/1", "2026-11-22T10:00:00Z", "1920x1080",
                   "198.51.100.7", "x" * 5000, "granted", "javascript", "click",
                   "a@example.com", [], [{}], {}, {"a": 1}]


def _valid_values(schema: Any) -> list[Any]:
    checker = Draft202012Validator(schema)
    return [value for value in POOL + _literals(schema) if checker.is_valid(value)]


@st.composite
def near_valid_bodies(draw: st.DrawFn, name: str) -> Any:
    """A body that is valid, or valid but for one or two changes."""
    flat = flatten_schema({"$ref": f"#/components/schemas/{name}"}, SCHEMAS)
    flat = flat.get("then", flat)
    properties: dict[str, Any] = flat.get("properties", {})
    if not properties or draw(st.integers(0, 19)) == 0:
        return draw(JSON)
    body: dict[str, Any] = {}
    for prop, sub in properties.items():
        good = _valid_values(sub)
        if (prop in flat.get("required", []) or draw(st.booleans())) and good:
            body[prop] = draw(st.sampled_from(good))
    for _ in range(draw(st.integers(0, 2))):
        change = draw(st.sampled_from(["drop", "unknown", "bad value"]))
        if change == "drop" and body:
            body.pop(draw(st.sampled_from(sorted(body))))
        elif change == "unknown":
            body["unexpectedField"] = draw(JSON)
        else:
            body[draw(st.sampled_from(sorted(properties)))] = draw(JSON)
    return body


@pytest.mark.parametrize("name", FLATTENED)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_flat_form_accepts_exactly_what_the_written_schema_accepts(name: str,
                                                                      data: st.DataObject):
    body = data.draw(near_valid_bodies(name))
    written = VALIDATOR._validator(name).is_valid(body)
    flat = VALIDATOR.flat_validator(name)
    assert flat is not None
    assert flat.is_valid(body) == written, body


def test_the_ingest_schemas_on_the_request_path_have_a_flat_form():
    for name in ("PageviewIngest", "ErrorIngest", "LeadIngest", "VisitorIngest",
                 "InteractionIngest", "RecordingStart", "SdkPageview", "SdkError"):
        assert name in FLATTENED


def test_a_recursive_reference_is_checked_as_written():
    components = {"Node": {"type": "object", "properties": {
        "child": {"$ref": "#/components/schemas/Node"}}}}
    with pytest.raises(NotFlattenable):
        flatten_schema({"$ref": "#/components/schemas/Node"}, components)


def test_unevaluated_properties_over_a_conditional_member_is_not_flattened():
    components = {"Base": {"type": "object", "if": {"required": ["a"]},
                           "then": {"properties": {"b": {"type": "string"}}}},
                  "Outer": {"allOf": [{"$ref": "#/components/schemas/Base"}],
                            "unevaluatedProperties": False}}
    with pytest.raises(NotFlattenable):
        flatten_schema({"$ref": "#/components/schemas/Outer"}, components)


def test_a_body_the_flat_form_refuses_still_gets_the_field_named():
    with pytest.raises(InvalidInput) as refused:
        VALIDATOR.validate({"visitorId": "v-1", "url": "https://shop.example/",
                            "colour": "red"}, "PageviewIngest")
    assert refused.value.field == "colour"
    with pytest.raises(InvalidInput) as missing:
        VALIDATOR.validate({"visitorId": "v-1"}, "PageviewIngest")
    assert missing.value.field == "url"


@pytest.mark.parametrize("name", ["PageviewIngest", "ErrorIngest", "LeadIngest"])
def test_the_generator_reaches_both_sides_of_the_boundary(name: str):
    """Without valid bodies among the examples, the agreement test could not fail."""
    seen: set[bool] = set()

    @settings(max_examples=100, deadline=None)
    @given(near_valid_bodies(name))
    def collect(body: Any) -> None:
        seen.add(VALIDATOR._validator(name).is_valid(body))

    collect()
    assert seen == {True, False}
