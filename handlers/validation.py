"""Request bodies are validated against the JSON Schemas in docs/openapi.yaml.

The published contract and the server's checks are the same document, so they cannot drift.

Checking a body against the document as written costs a `$ref` resolution per reference and an
`unevaluatedProperties` pass per object, about a tenth of a millisecond on every ingest request.
So each schema is also compiled once into an equivalent flat form (references inlined, `allOf`
of plain object schemas merged under `additionalProperties: false`) that decides the same
instances several times faster. A body the flat form accepts is valid; any other body is checked
again against the schema as written, which names the offending field. A schema that cannot be
flattened exactly is only ever checked as written.

Even the flat form costs tens of microseconds through jsonschema's generic machinery (a type
checker and a generator per keyword per value). So each flat form is further compiled into plain
Python source, once per schema, that only answers "valid or not" (`compile_schema`). It is tried
first; a body it refuses goes down the path above, so the 422 is word for word what it was. A flat
form using a keyword the compiler does not reproduce exactly (`NotCompilable`) skips this step.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from errors import InvalidInput

OPENAPI_PATH = Path(__file__).resolve().parent.parent / "docs" / "openapi.yaml"

_QUOTED = re.compile(r"'([^']+)'")


class SchemaValidator:
    """Validates bodies against `#/components/schemas/<name>` of the OpenAPI document."""

    def __init__(self, openapi_path: Path = OPENAPI_PATH) -> None:
        with open(openapi_path, encoding="utf-8") as handle:
            self.document: dict[str, Any] = yaml.safe_load(handle)
        self._components = self.document.get("components", {})
        self._validators: dict[str, Draft202012Validator] = {}
        self._flat_validators: dict[str, Draft202012Validator | None] = {}
        self._checks: dict[str, Callable[[Any], bool] | None] = {}
        #: What `validate` calls first, by schema name: the compiled check, or `_refuse`.
        self._first_checks: dict[str, Callable[[Any], bool]] = {}

    def _validator(self, name: str) -> Draft202012Validator:
        validator = self._validators.get(name)
        if validator is None:
            if name not in self._components.get("schemas", {}):
                raise KeyError(f"no schema named {name} in openapi.yaml")
            schema = {"$ref": f"#/components/schemas/{name}", "components": self._components}
            validator = Draft202012Validator(schema)
            self._validators[name] = validator
        return validator

    def flat_validator(self, name: str) -> Draft202012Validator | None:
        """A validator for the flattened form of `name`, or None when it has no exact one."""
        if name not in self._flat_validators:
            self._validator(name)  # the same KeyError for an unknown name
            try:
                flat = flatten_schema({"$ref": f"#/components/schemas/{name}"},
                                      self._components.get("schemas", {}))
            except NotFlattenable:
                self._flat_validators[name] = None
            else:
                self._flat_validators[name] = Draft202012Validator(flat)
        return self._flat_validators[name]

    def compiled_check(self, name: str) -> Callable[[Any], bool] | None:
        """The compiled predicate for the flat form of `name`, or None when it has none.

        The predicate returns True only for instances the schema accepts (see `compile_schema`).
        """
        if name not in self._checks:
            flat = self.flat_validator(name)
            check = None
            if flat is not None:
                try:
                    # The validator's own format checker (None: formats only annotate), so the
                    # compiled form asserts exactly the formats the validator asserts.
                    check = compile_schema(flat.schema, format_checker=flat.format_checker,
                                           label=name)
                except NotCompilable:
                    check = None
            self._checks[name] = check
        return self._checks[name]

    def validate(self, instance: Any, name: str) -> None:
        """Raise InvalidInput naming the first offending field when `instance` breaks `name`."""
        first = self._first_checks.get(name)
        if first is None:
            first = self._first_checks[name] = self.compiled_check(name) or _refuse
        try:
            if first(instance):
                return
        except Exception:  # Only a non-JSON instance can raise; decide it below.
            pass
        flat = self.flat_validator(name)
        if flat is not None and flat.is_valid(instance):
            return
        errors = list(self._validator(name).iter_errors(instance))
        # A failing subschema makes its properties count as "unevaluated" too; the real fault
        # is the other error, so report that one.
        primary = [e for e in errors if e.validator != "unevaluatedProperties"] or errors
        error = best_match(primary)
        if error is not None:
            raise _as_invalid_input(error)


class NotFlattenable(ValueError):
    """The schema uses a construct whose flat form would not decide exactly the same."""


#: Keywords an `allOf` member may carry and still be merged into its parent.
_MERGEABLE = frozenset({"type", "properties", "required", "description", "title"})
#: Keywords that take a value, not a schema: copied as they are, never walked.
_LITERAL = frozenset({"enum", "const", "default", "example", "examples", "description", "title",
                      "required", "pattern", "format", "type"})


def flatten_schema(schema: Any, components: dict[str, Any]) -> Any:
    """`schema` with its `$ref`s inlined and `allOf` + `unevaluatedProperties: false` merged.

    Raises NotFlattenable for a recursive reference, a reference outside the components, or an
    `unevaluatedProperties`/`unevaluatedItems` that is not the one merge this supports.
    """
    return _merge(_inline(schema, components, ()))


def _inline(node: Any, components: dict[str, Any], trail: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_inline(item, components, trail) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _LITERAL or key == "properties":
            out[key] = ({name: _inline(sub, components, trail) for name, sub in value.items()}
                        if key == "properties" else value)
        elif key != "$ref":
            out[key] = _inline(value, components, trail)
    reference = node.get("$ref")
    if reference is None:
        return out
    prefix = "#/components/schemas/"
    name = reference[len(prefix):] if reference.startswith(prefix) else None
    if name is None or name not in components or name in trail:
        raise NotFlattenable(reference)
    target = _inline(components[name], components, (*trail, name))
    return {"allOf": [target], **out} if out else target


def _merge(node: Any) -> Any:
    if isinstance(node, list):
        return [_merge(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: (value if key in _LITERAL else
                  {name: _merge(sub) for name, sub in value.items()} if key == "properties" else
                  _merge(value))
            for key, value in node.items()}
    if "unevaluatedItems" in node:
        raise NotFlattenable("unevaluatedItems")
    if "unevaluatedProperties" not in node:
        return node
    if node["unevaluatedProperties"] is not False or set(node) - _MERGEABLE - {
            "allOf", "unevaluatedProperties"}:
        raise NotFlattenable("unevaluatedProperties")
    properties = dict(node.get("properties", {}))
    required = list(node.get("required", []))
    types = {node["type"]} if "type" in node else set()
    for member in node.get("allOf", []):
        if not isinstance(member, dict) or set(member) - _MERGEABLE:
            raise NotFlattenable("allOf member")
        for name, sub in member.get("properties", {}).items():
            if name in properties:
                raise NotFlattenable(f"property {name} declared twice")
            properties[name] = sub
        required.extend(r for r in member.get("required", []) if r not in required)
        if "type" in member:
            types.add(member["type"])
    if len(types) > 1 or types - {"object"}:
        raise NotFlattenable("allOf of other than objects")
    flat: dict[str, Any] = {"type": "object", "properties": properties,
                            "additionalProperties": False}
    if required:
        flat["required"] = required
    if not types:
        # Without a type, a non-object instance was valid; keep it so.
        flat = {"if": {"type": "object"}, "then": flat}
    return flat


class NotCompilable(ValueError):
    """The schema uses a keyword or value that `compile_schema` does not reproduce exactly."""


def _refuse(instance: Any) -> bool:
    """The first check of a schema without a compiled form: always "look closer"."""
    return False


#: Keywords that only annotate: they never change whether an instance is valid.
_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "example", "readOnly",
                          "writeOnly", "deprecated", "$comment"})
#: Keywords by the instance type they constrain; for any other type they hold vacuously.
_STRING_KEYWORDS = frozenset({"minLength", "maxLength", "pattern"})
_NUMBER_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_OBJECT_KEYWORDS = frozenset({"properties", "required", "additionalProperties", "minProperties",
                              "maxProperties", "propertyNames"})
_ARRAY_KEYWORDS = frozenset({"items", "minItems", "maxItems"})
_ANY_KEYWORDS = frozenset({"type", "enum", "const", "format", "allOf", "oneOf", "if", "then",
                           "else"})
#: Every keyword `compile_schema` reproduces; any other one makes a schema NotCompilable.
COMPILED_KEYWORDS = (_STRING_KEYWORDS | _NUMBER_KEYWORDS | _OBJECT_KEYWORDS | _ARRAY_KEYWORDS
                     | _ANY_KEYWORDS)

#: Python tests for each JSON type, deciding exactly what Draft202012Validator.TYPE_CHECKER
#: decides. The checker itself is the fallback; the `type(...) is` tests in front only save its
#: call for the common exact types (an int is an integer and a number, a float a number; bool
#: is neither, and `type(True) is int` is False).
_TYPE_TESTS = {
    "string": "isinstance({v}, str)",
    "object": "isinstance({v}, dict)",
    "array": "isinstance({v}, list)",
    "boolean": "isinstance({v}, bool)",
    "null": "{v} is None",
    "integer": "(type({v}) is int or _is_type({v}, 'integer'))",
    "number": "(type({v}) is int or type({v}) is float or _is_type({v}, 'number'))",
}
#: The JSON types each keyword family constrains, and the test that an instance is one.
_FAMILIES = (
    (_STRING_KEYWORDS, frozenset({"string"}), _TYPE_TESTS["string"]),
    (_NUMBER_KEYWORDS, frozenset({"number", "integer"}), _TYPE_TESTS["number"]),
    (_OBJECT_KEYWORDS, frozenset({"object"}), _TYPE_TESTS["object"]),
    (_ARRAY_KEYWORDS, frozenset({"array"}), _TYPE_TESTS["array"]),
)
#: Deeper than this, a subschema becomes a function of its own: Python refuses more than 20
#: statically nested blocks.
_MAX_INLINE_DEPTH = 8


def compile_schema(schema: Any, *, format_checker: Any = None,
                   label: str = "schema") -> Callable[[Any], bool]:
    """A predicate that returns True exactly when Draft202012Validator(schema) accepts.

    `schema` must be self-contained (no `$ref`; see `flatten_schema`). The predicate is Python
    source generated once for the schema: the same operations jsonschema performs (`isinstance`,
    `len` in code points, `re.search`, comparisons) without its per-keyword dispatch. It is exact
    for JSON values (what `json.loads` gives); for other Python objects it may raise, which the
    caller treats as a refusal. `format_checker` is the validator's: formats are asserted through
    its `conforms` when it is given and, as in jsonschema, only annotate when it is None.

    Raises NotCompilable for a keyword outside COMPILED_KEYWORDS and the annotations, a keyword
    value jsonschema would not accept as written, an `enum`/`const` value other than a string,
    boolean or null, and a `oneOf` whose members could both match one instance.
    """
    compiler = _Compiler(format_checker)
    try:
        entry = compiler.function(schema)
        code = compile("\n".join(compiler.lines), f"<compiled schema {label}>", "exec")
    except (SyntaxError, RecursionError) as error:
        # Nesting deeper than the generator or Python's parser handles: keep the exact path.
        raise NotCompilable(f"too deep to compile: {error}") from None
    namespace = compiler.namespace
    exec(code, namespace)  # Source built above; schema strings enter it only via repr().
    predicate: Callable[[Any], bool] = namespace[entry]
    return predicate


class _Compiler:
    """Generates the source of `compile_schema`: one function per (sub)schema that needs one.

    A schema becomes statements that `return False` on the first failed check; the function
    ends in `return True`. Constants the source cannot spell (compiled patterns, key sets, the
    type checker) live in `namespace`, under generated names.
    """

    def __init__(self, format_checker: Any) -> None:
        self.format_checker = format_checker
        self.namespace: dict[str, Any] = {"_is_type": Draft202012Validator.TYPE_CHECKER.is_type}
        self.lines: list[str] = []
        self._ids = itertools.count()

    def _name(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}"

    def _constant(self, value: Any, prefix: str) -> str:
        name = self._name(f"_{prefix}")
        self.namespace[name] = value
        return name

    def function(self, schema: Any) -> str:
        """Emit `def <name>(x)` deciding `schema`; return its name."""
        name = self._name("_check")
        body = self.statements(schema, "x", 1)
        self.lines.extend([f"def {name}(x):", *body, "    return True", ""])
        return name

    def _nested(self, schema: Any, var: str, depth: int) -> list[str]:
        if depth <= _MAX_INLINE_DEPTH:
            return self.statements(schema, var, depth)
        if schema is True or _only_annotations(schema):
            return []
        return [f"{_pad(depth)}if not {self.function(schema)}({var}): return False"]

    def statements(self, schema: Any, var: str, depth: int) -> list[str]:
        """Lines at `depth` that `return False` unless the value in `var` is valid."""
        pad = _pad(depth)
        if schema is True:
            return []
        if schema is False:
            return [f"{pad}return False"]
        if not isinstance(schema, dict):
            raise NotCompilable(f"schema {schema!r}")
        schema = {key: value for key, value in schema.items() if key not in _ANNOTATIONS}
        unknown = set(schema) - COMPILED_KEYWORDS
        if unknown:
            raise NotCompilable(f"keyword {sorted(map(str, unknown))[0]!r}")
        out: list[str] = []
        types = self._types(schema)
        if types is not None:
            tests = " or ".join(_TYPE_TESTS[name].format(v=var) for name in types)
            out.append(f"{pad}if not {tests if len(types) == 1 else f'({tests})'}: return False")
        if "enum" in schema:
            out.append(f"{pad}if not ({self._enum(schema['enum'], var)}): return False")
        if "const" in schema:
            out.append(f"{pad}if not ({self._literal(schema['const'], var)}): return False")
        if "format" in schema:
            if not isinstance(schema["format"], str):
                raise NotCompilable("format")
            if self.format_checker is not None:
                conforms = self._constant(self.format_checker.conforms, "conforms")
                out.append(f"{pad}if not {conforms}({var}, {schema['format']!r}): return False")
        for family, family_types, guard in _FAMILIES:
            present = {key: schema[key] for key in family if key in schema}
            if not present:
                continue
            if types is not None and not family_types & set(types):
                continue  # The type already rules these values out; the keywords hold.
            guarded = types is None or not set(types) <= family_types
            lines = self._family(family, present, var, depth + guarded)
            if lines and guarded:
                out.append(f"{pad}if {guard.format(v=var)}:")
            out.extend(lines)
        for member in _as_list(schema.get("allOf", []), "allOf"):
            out.extend(self.statements(member, var, depth))
        if "oneOf" in schema:
            out.append(f"{pad}if not ({self._one_of(schema['oneOf'], var)}): return False")
        if "if" in schema:
            out.extend(self._conditional(schema, var, depth))
        return out

    def _types(self, schema: dict[str, Any]) -> list[str] | None:
        if "type" not in schema:
            return None
        types = schema["type"]
        names = [types] if isinstance(types, str) else types
        if not isinstance(names, list) or not names or any(
                not isinstance(name, str) or name not in _TYPE_TESTS for name in names):
            raise NotCompilable(f"type {types!r}")
        return names

    def _family(self, family: frozenset[str], present: dict[str, Any], var: str,
                depth: int) -> list[str]:
        if family is _STRING_KEYWORDS:
            return self._string(present, var, depth)
        if family is _NUMBER_KEYWORDS:
            return self._number(present, var, depth)
        if family is _OBJECT_KEYWORDS:
            return self._object(present, var, depth)
        return self._array(present, var, depth)

    def _string(self, keywords: dict[str, Any], var: str, depth: int) -> list[str]:
        pad = _pad(depth)
        out = _length_bounds(keywords, "minLength", "maxLength", f"len({var})", pad)
        if "pattern" in keywords:
            pattern = keywords["pattern"]
            try:
                # jsonschema runs `re.search(pattern, instance)`: the same `re`, unanchored.
                search = re.compile(pattern).search if isinstance(pattern, str) else None
            except re.error:
                search = None
            if search is None:
                raise NotCompilable(f"pattern {pattern!r}")
            out.append(f"{pad}if {self._constant(search, 'search')}({var}) is None: return False")
        return out

    def _number(self, keywords: dict[str, Any], var: str, depth: int) -> list[str]:
        pad = _pad(depth)
        out = []
        for keyword, refused_when in (("minimum", "<"), ("maximum", ">"),
                                      ("exclusiveMinimum", "<="), ("exclusiveMaximum", ">=")):
            if keyword in keywords:
                bound = keywords[keyword]
                if isinstance(bound, bool) or not isinstance(bound, int | float):
                    raise NotCompilable(f"{keyword} {bound!r}")
                spelled = (repr(bound) if isinstance(bound, int) or math.isfinite(bound)
                           else self._constant(bound, "bound"))
                out.append(f"{pad}if {var} {refused_when} {spelled}: return False")
        return out

    def _object(self, keywords: dict[str, Any], var: str, depth: int) -> list[str]:
        pad = _pad(depth)
        properties = keywords.get("properties", {})
        if not isinstance(properties, dict) or any(not isinstance(p, str) for p in properties):
            raise NotCompilable("properties")
        required = _as_list(keywords.get("required", []), "required")
        if any(not isinstance(name, str) for name in required):
            raise NotCompilable("required")
        extra = keywords.get("additionalProperties", True)
        out = _length_bounds(keywords, "minProperties", "maxProperties", f"len({var})", pad)
        if extra is False:
            # No `patternProperties` is compiled, so "additional" is "not in `properties`".
            names = self._constant(frozenset(properties), "names")
            out.append(f"{pad}if not {var}.keys() <= {names}: return False")
        for name in dict.fromkeys(required):
            if name not in properties:
                out.append(f"{pad}if {name!r} not in {var}: return False")
        for name, subschema in properties.items():
            value = self._name("v")
            if name in required:
                body = self._nested(subschema, value, depth)
                out.append(f"{pad}if {name!r} not in {var}: return False")
                if body:
                    out.append(f"{pad}{value} = {var}[{name!r}]")
                    out.extend(body)
            else:
                body = self._nested(subschema, value, depth + 1)
                if body:
                    out.append(f"{pad}if {name!r} in {var}:")
                    out.append(f"{pad}    {value} = {var}[{name!r}]")
                    out.extend(body)
        if extra is not False and extra is not True:
            # A schema for the value of every property `properties` does not name.
            key, value = self._name("k"), self._name("v")
            if properties:
                body = self._nested(extra, value, depth + 2)
                names = self._constant(frozenset(properties), "names")
                head = [f"{pad}for {key}, {value} in {var}.items():",
                        f"{pad}    if {key} not in {names}:"]
            else:
                body = self._nested(extra, value, depth + 1)
                head = [f"{pad}for {key}, {value} in {var}.items():"]
            if body:
                out.extend([*head, *body])
        if "propertyNames" in keywords:
            key = self._name("k")
            body = self._nested(keywords["propertyNames"], key, depth + 1)
            if body:
                out.extend([f"{pad}for {key} in {var}:", *body])
        return out

    def _array(self, keywords: dict[str, Any], var: str, depth: int) -> list[str]:
        pad = _pad(depth)
        out = _length_bounds(keywords, "minItems", "maxItems", f"len({var})", pad)
        items = keywords.get("items", True)
        if items is False:
            out.append(f"{pad}if {var}: return False")
        elif items is not True:
            if not isinstance(items, dict):
                raise NotCompilable("items")  # A list is draft 4 tuple form, not 2020-12.
            value = self._name("v")
            body = self._nested(items, value, depth + 1)
            if body:
                out.extend([f"{pad}for {value} in {var}:", *body])
        return out

    def _literal(self, literal: Any, var: str) -> str:
        """An expression true when `var` equals `literal` as JSON Schema compares (not Python).

        Only literals whose comparison is plain: a string equals only that string, and true,
        false and null only themselves (in Python `True == 1`, in JSON Schema not).
        """
        if isinstance(literal, str):
            return f"{var} == {literal!r}"
        if literal is True or literal is False or literal is None:
            return f"{var} is {literal!r}"
        raise NotCompilable(f"enum/const value {literal!r}")

    def _enum(self, literals: Any, var: str) -> str:
        literals = _as_list(literals, "enum")
        strings = frozenset(value for value in literals if isinstance(value, str))
        tests = [self._literal(value, var) for value in literals if not isinstance(value, str)]
        if strings:
            tests.insert(0, f"isinstance({var}, str) and {var} in "
                            f"{self._constant(strings, 'strings')}")
        return " or ".join(f"({test})" for test in tests) or "False"

    def _one_of(self, members: Any, var: str) -> str:
        # Exactly one member may match. Compiled only when the members' types are disjoint, so
        # that no instance can match two of them and "exactly one" is "any".
        seen: set[str] = set()
        for member in _as_list(members, "oneOf"):
            names = self._types(member) if isinstance(member, dict) else None
            if names is None:
                raise NotCompilable("oneOf member without a type")
            kinds = {"number" if name == "integer" else name for name in names}
            if kinds & seen:
                raise NotCompilable("oneOf members whose types overlap")
            seen |= kinds
        return " or ".join(f"{self.function(member)}({var})" for member in members) or "False"

    def _conditional(self, schema: dict[str, Any], var: str, depth: int) -> list[str]:
        pad = _pad(depth)
        then = self.statements(schema.get("then", True), var, depth + 1)
        otherwise = self.statements(schema.get("else", True), var, depth + 1)
        if not then and not otherwise:
            return []  # `if` alone only annotates.
        condition = f"{self.function(schema['if'])}({var})"
        if not then:
            return [f"{pad}if not {condition}:", *otherwise]
        out = [f"{pad}if {condition}:", *then]
        if otherwise:
            out.extend([f"{pad}else:", *otherwise])
        return out


def _pad(depth: int) -> str:
    return "    " * depth


def _only_annotations(schema: Any) -> bool:
    return isinstance(schema, dict) and set(schema) <= _ANNOTATIONS


def _as_list(value: Any, keyword: str) -> list[Any]:
    if not isinstance(value, list):
        raise NotCompilable(keyword)
    return value


def _length_bounds(keywords: dict[str, Any], low_keyword: str, high_keyword: str, length: str,
                   pad: str) -> list[str]:
    """`return False` unless `low_keyword` <= `length` <= `high_keyword`, as far as given."""
    bounds = []
    for keyword in (low_keyword, high_keyword):
        bound = keywords.get(keyword)
        if keyword in keywords and (isinstance(bound, bool) or not isinstance(bound, int)
                                    or bound < 0):
            raise NotCompilable(f"{keyword} {bound!r}")
        bounds.append(bound)
    low, high = bounds
    if low is not None and high is not None:
        return [f"{pad}if not {low} <= {length} <= {high}: return False"]
    if low is not None:
        return [f"{pad}if {length} < {low}: return False"]
    if high is not None:
        return [f"{pad}if {length} > {high}: return False"]
    return []


def _as_invalid_input(error: ValidationError) -> InvalidInput:
    path = [str(part) for part in error.absolute_path]
    if error.validator == "required":
        missing = _QUOTED.search(error.message)
        if missing:
            path.append(missing.group(1))
    elif error.validator in ("additionalProperties", "unevaluatedProperties"):
        extra = _QUOTED.search(error.message)
        if extra:
            path.append(extra.group(1))
    field = ".".join(path) or None
    message = error.message if len(error.message) < 300 else error.message[:300] + "…"
    where = f"{field}: " if field else ""
    return InvalidInput(f"{where}{message}", field=field)
