"""Request bodies are validated against the JSON Schemas in docs/openapi.yaml.

The published contract and the server's checks are the same document, so they cannot drift.

Checking a body against the document as written costs a `$ref` resolution per reference and an
`unevaluatedProperties` pass per object, about a tenth of a millisecond on every ingest request.
So each schema is also compiled once into an equivalent flat form (references inlined, `allOf`
of plain object schemas merged under `additionalProperties: false`) that decides the same
instances several times faster. A body the flat form accepts is valid; any other body is checked
again against the schema as written, which names the offending field. A schema that cannot be
flattened exactly is only ever checked as written.
"""

from __future__ import annotations

import re
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

    def validate(self, instance: Any, name: str) -> None:
        """Raise InvalidInput naming the first offending field when `instance` breaks `name`."""
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
