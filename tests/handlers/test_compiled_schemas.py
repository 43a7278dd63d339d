"""The compiled request checks accept exactly what the schemas as written accept.

`SchemaValidator.validate` accepts a body as soon as the predicate compiled from the schema's
flat form says True (handlers/validation.py, `compile_schema`), so a predicate that accepted one
body too many would let an invalid body through, and one that refused valid bodies would quietly
cost the speed-up. Hypothesis builds bodies from each schema itself: valid values, values at
every length, count and number boundary (in code points, with astral characters), strings a
trailing newline away from a pattern, values JSON Schema and Python compare differently (1.0,
True, 1), missing required and unknown properties. Predicate and written schema must agree on
each one; a deliberately broken compiler shows that this check finds a difference.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample
from jsonschema import Draft202012Validator, FormatChecker

import handlers.validation as validation
from errors import InvalidInput
from handlers.validation import NotCompilable, SchemaValidator, compile_schema
from tests.handlers.test_flat_schemas import JSON, near_valid_bodies

VALIDATOR = SchemaValidator()
SCHEMAS: dict[str, Any] = VALIDATOR.document["components"]["schemas"]
COMPILED = sorted(name for name in SCHEMAS if VALIDATOR.compiled_check(name) is not None)

#: The schemas the ingest and SDK handlers validate request bodies (and segment headers) with.
INGEST_SCHEMAS = ("PageviewIngest", "VisitorIngest", "LeadIngest", "ConsentIngest",
                  "ErrorIngest", "RecordingStart", "RecordingEnd", "RecordingSegmentHeaders",
                  "InteractionIngest", "SdkPageview", "SdkTimeOnPage", "SdkConsent", "SdkError",
                  "SdkInteractions", "SdkRecordingStart", "SdkRecordingEnd")

#: Values that are one JSON type but look like another, or that Python and JSON Schema compare
#: differently (`True == 1` and `1.0 == 1` in Python; 1.0 is an integer, True none).
CONFUSABLE: list[Any] = [True, False, 0, 1, 1.0, -0.0, 2.5, 10**20, 1e20, math.inf, -math.inf,
                         "", "1", "true", "null", None, [], {}, [1], {"a": None}]
#: Pieces of text whose length differs in code points, UTF-16 units, UTF-8 bytes and glyphs.
PIECES = st.sampled_from(["a", "Z", "0", "-", "_", " ", "\n", "é", "e\u0301", "😀", "\u200b"])


def _flat(name: str) -> Any:
    flat = VALIDATOR.flat_validator(name)
    assert flat is not None
    return flat.schema


def _stretch(text: str, length: int) -> str:
    """`text` repeated or cut to `length` code points: a value at a length boundary."""
    return (text * (length // len(text) + 1))[:length] if text else "a" * length


def _lengths(low: int | None, high: int | None, default_high: int) -> tuple[list[int], list[int]]:
    """Lengths (or counts) at the bounds: those inside them, and those just outside.

    The low ones come three times as often: a long array of objects is slow to check.
    """
    low = low or 0
    high = default_high if high is None else high
    inside = sorted({n for n in (low, low + 1, high - 1, high) if low <= n <= high})
    outside = sorted({n for n in (low - 1, high + 1) if n >= 0 and not low <= n <= high})
    return [n for n in inside for _ in range(3 if n <= low + 1 else 1)], outside


#: Strategies by (id of the subschema, rate, broken): built once, so that Hypothesis validates
#: each once rather than on every draw. The subschemas live as long as VALIDATOR.
_STRATEGIES: dict[tuple[int, int, bool], st.SearchStrategy[Any]] = {}
PERCENT = st.integers(0, 99)


def _same(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return strategy


def values(schema: Any, rate: int) -> st.SearchStrategy[Any]:
    """Values for `schema`; valid unless one of their parts, each with `rate` percent, is not.

    Valid parts sit at the schema's boundaries (lengths, counts, bounds, enum members); the
    others sit just past them or are of the wrong kind.
    """
    valid = _values(schema, rate, broken=False)
    if rate == 0:
        return valid
    broken = _values(schema, rate, broken=True)
    # Valid first: Hypothesis favours the first choice, and one broken part is what finds bugs.
    odds = st.sampled_from([False] * (100 - rate) + [True] * rate)
    return odds.flatmap(lambda breaks: broken if breaks else valid)


def _values(schema: Any, rate: int, broken: bool) -> st.SearchStrategy[Any]:
    key = (id(schema), rate, broken)
    if key not in _STRATEGIES:
        _STRATEGIES[key] = _build(schema, rate, broken)
    return _STRATEGIES[key]


def _build(schema: Any, rate: int, broken: bool) -> st.SearchStrategy[Any]:
    if not isinstance(schema, dict):
        return JSON
    if "if" in schema and "then" in schema:
        return _values(schema["then"], rate, broken)
    if "oneOf" in schema:
        return st.one_of([values(member, rate) for member in schema["oneOf"]])
    wrong_kind = st.one_of(st.sampled_from(CONFUSABLE), JSON)
    literals = schema.get("enum", []) + ([schema["const"]] if "const" in schema else [])
    if literals:
        twisted = [variant for value in literals if isinstance(value, str)
                   for variant in (value.upper(), value + "\n", " " + value)]
        return st.sampled_from(twisted + [1, 0, True]) if broken else st.sampled_from(literals)
    types = schema.get("type")
    names = [types] if isinstance(types, str) else types or (
        ["object"] if "properties" in schema else [])
    if not names:
        return JSON
    makers: dict[str, Callable[..., st.SearchStrategy[Any]]] = {
        "string": _strings, "integer": _numbers, "number": _numbers, "object": _objects,
        "array": _arrays, "boolean": lambda *_: st.booleans(), "null": lambda *_: st.none()}
    typed = st.one_of([makers[name](schema, rate, broken) for name in names])
    # sampled_from, not one_of, so that the odds are as written (2:1).
    return st.sampled_from([typed, typed, wrong_kind]).flatmap(_same) if broken else typed


def _strings(schema: dict[str, Any], rate: int, broken: bool) -> st.SearchStrategy[str]:
    pattern = schema.get("pattern")
    base = (st.from_regex(pattern) if pattern else
            st.lists(PIECES, max_size=6).map("".join))
    inside, outside = _lengths(schema.get("minLength"), schema.get("maxLength"), 8)
    if broken:
        return st.one_of(st.builds(_stretch, base, st.sampled_from(outside or inside)),
                         base.map(lambda text: text + "\n"), base.map(lambda text: "\n" + text))
    low, high = schema.get("minLength", 0), schema.get("maxLength", math.inf)
    search = re.compile(pattern).search if pattern else bool
    # Stretching a pattern's match can leave the pattern; keep only what is still valid here.
    return st.one_of(base, st.builds(_stretch, base, st.sampled_from(inside))).filter(
        lambda text: low <= len(text) <= high and search(text) is not None)


def _numbers(schema: dict[str, Any], rate: int, broken: bool) -> st.SearchStrategy[Any]:
    types = schema.get("type")
    integer = "number" not in ([types] if isinstance(types, str) else types)
    low = max([schema[k] for k in ("minimum", "exclusiveMinimum") if k in schema],
              default=-10**6)
    high = min([schema[k] for k in ("maximum", "exclusiveMaximum") if k in schema],
               default=10**6)
    if broken:
        return st.sampled_from([low - 1, high + 1, math.nextafter(low, -math.inf),
                                math.nextafter(high, math.inf), low + 0.5, high - 0.5, True,
                                10**30, -10**30, math.inf, -math.inf])
    inside = st.integers(math.ceil(low), math.floor(high))
    edges = st.sampled_from([low, high])
    if integer:
        return st.one_of(edges, inside, inside.map(float))
    return st.one_of(edges, inside, st.floats(low, high))


def _objects(schema: dict[str, Any], rate: int, broken: bool) -> st.SearchStrategy[Any]:
    properties: dict[str, Any] = schema.get("properties", {})
    required: list[str] = schema.get("required", [])
    # What an `if` may make required (`depth` for a scroll): present in valid objects too.
    also = [name for member in schema.get("allOf", []) if isinstance(member, dict)
            for name in member.get("then", {}).get("required", [])]
    extra = schema.get("additionalProperties", True)
    members = {name: values(subschema, rate) for name, subschema in properties.items()}
    inside, outside = _lengths(schema.get("minProperties"), schema.get("maxProperties"), 3)
    counts = st.sampled_from(outside if broken and outside else inside)
    entries = st.lists(values(extra, rate) if isinstance(extra, dict) else JSON,
                       min_size=1, max_size=3)
    names = st.sampled_from([["k"], ["a", "bb"], ["x" * 129, "y" * 128, "z" * 127]])

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        body: dict[str, Any] = {}
        for name, member in members.items():
            if name in required or (name in also and not broken) or draw(PERCENT) < 40:
                body[name] = draw(member)
        if isinstance(extra, dict) or not properties:
            # A map (`fields`, `context`, `counts`): a few entries, or as many as it may hold.
            keys, sample = draw(names), draw(entries)
            for index in range(draw(counts)):
                key = keys[index] if index < len(keys) else f"key{index}"
                body[key] = sample[index % len(sample)]
        if broken:
            if required and draw(PERCENT) < 50:
                body.pop(required[draw(PERCENT) % len(required)], None)
            else:
                body["unexpectedField"] = draw(JSON)
        return body

    return build()


def _arrays(schema: dict[str, Any], rate: int, broken: bool) -> st.SearchStrategy[Any]:
    inside, outside = _lengths(schema.get("minItems"), schema.get("maxItems"), 3)
    counts = st.sampled_from(outside if broken and outside else inside)
    samples = st.lists(values(schema.get("items", True), rate), min_size=1, max_size=3)
    # A few drawn items repeated up to a bound: 201 interactions, without drawing 201.
    return st.builds(lambda sample, count: [sample[i % len(sample)] for i in range(count)],
                     samples, counts)


def bodies(name: str) -> st.SearchStrategy[Any]:
    """Bodies for the schema `name`: valid ones, ones with a few broken parts, the flat test's."""
    flat = _flat(name)
    return st.one_of(values(flat, 0), values(flat, 3), values(flat, 10), values(flat, 30),
                     values(flat, 0), values(flat, 3), near_valid_bodies(name))


def _written(name: str, body: Any) -> bool:
    return VALIDATOR._validator(name).is_valid(body)


def _accepts(predicate: Callable[[Any], bool], body: Any) -> bool:
    """Whether `validate` would take `predicate`'s word for `body`: an exception is a no."""
    try:
        return predicate(body)
    except Exception:
        return False


def _disagreement(name: str, predicate: Callable[[Any], bool], tries: int
                  ) -> tuple[Any] | None:
    """`(body,)` for a body on which `predicate` and the written schema `name` disagree, or None.

    The body comes wrapped because it may itself be None (a JSON null), which a compiler that
    ignores `type` wrongly accepts.
    """
    try:
        return (find(bodies(name), lambda body: _accepts(predicate, body) != _written(name, body),
                     settings=settings(max_examples=tries, deadline=None, database=None,
                                       derandomize=True, phases=[Phase.generate],
                                       suppress_health_check=list(HealthCheck))),)
    except NoSuchExample:
        return None


@pytest.mark.parametrize("name", COMPILED)
def test_the_compiled_check_accepts_exactly_what_the_written_schema_accepts(name: str):
    check = VALIDATOR.compiled_check(name)
    assert check is not None

    # The request bodies get the most examples: a wrong answer there reaches the store.
    @settings(max_examples=200 if name in INGEST_SCHEMAS else 50, deadline=None,
              database=None, suppress_health_check=list(HealthCheck))
    @given(bodies(name))
    def agree(body: Any) -> None:
        written, compiled = _written(name, body), _accepts(check, body)
        assert not (compiled and not written), f"accepts a body the schema refuses: {body!r}"
        assert not (written and not compiled), f"refuses a valid body: {body!r}"

    agree()


@pytest.mark.parametrize("name", ["PageviewIngest", "ErrorIngest", "LeadIngest",
                                  "InteractionIngest"])
def test_the_generator_reaches_both_sides_of_the_boundary(name: str):
    """Without valid and invalid bodies among the examples, the agreement test could not fail."""
    seen: set[bool] = set()

    @settings(max_examples=100, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(bodies(name))
    def collect(body: Any) -> None:
        seen.add(_written(name, body))

    collect()
    assert seen == {True, False}


@pytest.mark.parametrize(("keyword", "name"), [
    ("maxLength", "PageviewIngest"),
    ("pattern", "PageviewIngest"),
    ("type", "PageviewIngest"),
    ("additionalProperties", "ErrorIngest"),
    ("required", "ErrorIngest"),
    ("maximum", "InteractionIngest"),
    ("enum", "ConsentIngest"),
    ("minItems", "InteractionIngest"),
    ("maxItems", "ConsentIngest"),
])
# The body found may be long (201 array items); Hypothesis warns about printing it.
@pytest.mark.filterwarnings("ignore:Generating overly large repr")
def test_the_agreement_check_catches_a_compiler_that_ignores_a_keyword(
        monkeypatch: pytest.MonkeyPatch, keyword: str, name: str):
    # Taking an assertion for an annotation is the compiler bug this file exists to catch.
    monkeypatch.setattr(validation, "_ANNOTATIONS", validation._ANNOTATIONS | {keyword})
    broken = compile_schema(_flat(name))
    found = _disagreement(name, broken, tries=2000)
    assert found is not None, f"no body shows that {keyword} is ignored"
    (body,) = found
    assert _accepts(broken, body) and not _written(name, body)


@pytest.mark.parametrize("name", INGEST_SCHEMAS)
def test_the_ingest_schemas_compile(name: str):
    assert name in COMPILED


def test_a_body_the_compiled_check_accepts_costs_no_jsonschema_call(
        monkeypatch: pytest.MonkeyPatch):
    validator = SchemaValidator()

    def refuse(name: str) -> None:
        raise AssertionError("jsonschema consulted for a body the compiled check accepts")

    validator.compiled_check("PageviewIngest")
    monkeypatch.setattr(validator, "flat_validator", refuse)
    monkeypatch.setattr(validator, "_validator", refuse)
    validator.validate({"visitorId": "v-1", "url": "https://shop.example/", "title": "T"},
                       "PageviewIngest")


@pytest.mark.parametrize(("body", "name"), [
    ({"visitorId": "v-1", "url": "https://shop.example/", "colour": "red"}, "PageviewIngest"),
    ({"visitorId": "v-1"}, "PageviewIngest"),
    ({"visitorId": "v" * 65, "url": "https://shop.example/"}, "PageviewIngest"),
    ({"visitorId": "v-1", "url": "u", "wpUserId": 1.5}, "PageviewIngest"),
    ({"source": "javascript", "type": "E", "message": "m", "frames": [{"line": -1}]},
     "ErrorIngest"),
    ({"visitorId": "v", "interactions": [{"kind": "scroll_depth"}]}, "InteractionIngest"),
    ([], "ErrorIngest"),
])
def test_a_refused_body_gets_the_same_422_as_without_the_compiled_check(
        monkeypatch: pytest.MonkeyPatch, body: Any, name: str):
    with pytest.raises(InvalidInput) as compiled:
        VALIDATOR.validate(body, name)
    without = SchemaValidator()
    monkeypatch.setattr(without, "compiled_check", lambda name: None)
    with pytest.raises(InvalidInput) as exact:
        without.validate(body, name)
    assert (compiled.value.field, str(compiled.value)) == (exact.value.field, str(exact.value))


def test_a_compiled_check_that_raises_leaves_the_decision_to_the_exact_path(
        monkeypatch: pytest.MonkeyPatch):
    validator = SchemaValidator()

    def raises(body: Any) -> bool:
        raise TypeError("an instance no JSON text produces")

    monkeypatch.setattr(validator, "compiled_check", lambda name: raises)
    validator.validate({"visitorId": "v-1", "url": "https://shop.example/"}, "PageviewIngest")
    with pytest.raises(InvalidInput) as refused:
        validator.validate({"visitorId": "v-1"}, "PageviewIngest")
    assert refused.value.field == "url"


#: Schemas and instances where JSON Schema and naive Python disagree.
SUBTLETIES: list[tuple[Any, list[Any]]] = [
    ({"type": "integer"}, [1, 1.0, -0.0, 1.5, True, False, 10**40, 1e300, math.inf, "1", None]),
    ({"type": "number"}, [0, 0.5, True, math.inf, "0", None]),
    ({"type": ["string", "null"], "maxLength": 1}, [None, "a", "ab", 1, False]),
    ({"type": ["string", "integer"], "maxLength": 2}, ["ab", "abc", 123, 1.0, True]),
    ({"const": True}, [True, 1, 1.0, "true", False]),
    ({"const": "a"}, ["a", "A", "a\n", ["a"]]),
    ({"enum": ["a", True, None]}, ["a", True, 1, None, 0, False, "None", [], {}]),
    ({"enum": []}, ["a", None]),
    ({"maxLength": 2}, ["😀😀", "😀😀😀", "e\u0301", "e\u0301e", 12345, ["a", "b", "c"]]),
    ({"minLength": 2}, ["😀", "ab", 1, None]),
    ({"pattern": "b"}, ["abc", "xyz", 5]),
    ({"pattern": "^a+$"}, ["aa", "aa\n", "aa\n\n", "\naa", "ba"]),
    ({"minimum": 0, "exclusiveMaximum": 10}, [0, -1, 9.999, 10, 10.0, "x", True, -math.inf]),
    ({"exclusiveMinimum": 0, "maximum": 1}, [0, 0.0, 1e-300, 1, 1.0000001, False]),
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a", "b"],
      "additionalProperties": False}, [{"a": 1, "b": 2}, {"a": 1}, {"a": 1.0, "b": None},
                                       {"a": True, "b": 1}, {"a": 1, "b": 1, "c": 1}, []]),
    ({"properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"},
      "maxProperties": 2, "minProperties": 1},
     [{"a": "x", "b": 1}, {"a": "x", "b": "y"}, {"b": 1, "c": 2, "d": 3}, {}, "not an object"]),
    ({"propertyNames": {"maxLength": 2}}, [{"ab": 1}, {"abc": 1}, ["abc"]]),
    ({"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
     [["a"], [], ["a", "b", "c"], [1], "ab"]),
    ({"items": False}, [[], [1], {"a": 1}]),
    ({"oneOf": [{"type": "null"}, {"type": "object", "required": ["a"]}]},
     [None, {}, {"a": 1}, 1, []]),
    ({"type": "array", "items": {"if": {"properties": {"k": {"const": "s"}}},
                                 "then": {"required": ["d"]}, "else": {"maxProperties": 1}}},
     [[{"k": "s", "d": 1}], [{"k": "s"}], [{"k": "t", "x": 1}], [{"k": "t"}], [5]]),
    ({"if": {"type": "object"}, "then": {"type": "object", "required": ["a"]}},
     [{}, {"a": 1}, 3, "s"]),
    ({"allOf": [{"type": "string"}, {"maxLength": 1}]}, ["a", "ab", 1]),
    ({"type": "string", "minimum": 3, "properties": {"a": False}}, ["s"]),
    ({"format": "email", "description": "formats only annotate without a format checker"},
     ["not an email", "a@example.com", 3]),
    (True, [1, None]),
    (False, [1, None]),
]


@pytest.mark.parametrize(("schema", "instances"), SUBTLETIES)
def test_the_compiled_check_follows_json_schema_not_python(schema: Any, instances: list[Any]):
    check = compile_schema(schema)
    for instance in instances:
        assert check(instance) == Draft202012Validator(schema).is_valid(instance), instance


def test_a_format_is_asserted_exactly_when_the_validator_asserts_it():
    checker = FormatChecker()
    schema = {"type": "string", "format": "email"}
    check = compile_schema(schema, format_checker=checker)
    asserting = Draft202012Validator(schema, format_checker=checker)
    for instance in ("not an email", "a@example.com"):
        assert check(instance) == asserting.is_valid(instance)
    assert not check("not an email")
    # The service's validators assert no format, so neither do its compiled checks.
    flat = VALIDATOR.flat_validator("LeadIngest")
    assert flat is not None and flat.format_checker is None
    assert VALIDATOR._validator("LeadIngest").format_checker is None


def test_a_deep_schema_compiles_into_nested_functions():
    # Python refuses more than 20 nested blocks; deep subschemas must become functions.
    schema: Any = {"type": "string"}
    for _ in range(30):
        schema = {"type": "object", "properties": {"a": schema}}
    check = compile_schema(schema)
    instance: Any = "x"
    for _ in range(30):
        instance = {"a": instance}
    assert check(instance)
    assert not check(instance | {"a": {"a": 1}})


@pytest.mark.parametrize("schema", [
    {"anyOf": [{"type": "string"}]},
    {"not": {"type": "string"}},
    {"type": "string", "nullable": True},
    {"$ref": "#/components/schemas/Uuid"},
    {"type": "object", "patternProperties": {"^a": {}}, "additionalProperties": False},
    {"oneOf": [{"type": "integer"}, {"type": "number"}]},
    {"oneOf": [{"type": "string"}, {"maxLength": 3}]},
    {"enum": ["a", 1]},
    {"const": 1.5},
    {"type": "text"},
    {"pattern": "("},
    {"maxLength": 1.5},
    {"minItems": None},
    {"items": [{"type": "string"}]},
    {"type": "object", "properties": {"a": {"type": "string", "multipleOf": 2}}},
])
def test_a_keyword_the_compiler_does_not_reproduce_keeps_the_schema_uncompiled(schema: Any):
    with pytest.raises(NotCompilable):
        compile_schema(schema)
