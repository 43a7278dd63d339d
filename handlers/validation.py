"""Request bodies are validated against the JSON Schemas in docs/openapi.yaml.

The published contract and the server's checks are the same document, so they cannot drift.
jsonschema-rs checks each body against its schema as written (draft 2020-12); see
docs/performance.md for why this library.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema_rs
import yaml

from errors import InvalidInput

OPENAPI_PATH = Path(__file__).resolve().parent.parent / "docs" / "openapi.yaml"

#: Error kinds whose field is a property of the object at the error's path, not the path itself.
_PROPERTY_KINDS = ("Required", "AdditionalProperties", "UnevaluatedProperties")


class SchemaValidator:
    """Validates bodies against `#/components/schemas/<name>` of the OpenAPI document."""

    def __init__(self, openapi_path: Path = OPENAPI_PATH) -> None:
        with open(openapi_path, encoding="utf-8") as handle:
            self.document: dict[str, Any] = yaml.safe_load(handle)
        self._components = self.document.get("components", {})
        self._validators: dict[str, jsonschema_rs.Draft202012Validator] = {}
        self._query_rules = self._declared_query_parameters()

    def _validator(self, name: str) -> jsonschema_rs.Draft202012Validator:
        validator = self._validators.get(name)
        if validator is None:
            if name not in self._components.get("schemas", {}):
                raise KeyError(f"no schema named {name} in openapi.yaml")
            validator = jsonschema_rs.Draft202012Validator(
                {"$ref": f"#/components/schemas/{name}", "components": self._components})
            self._validators[name] = validator
        return validator

    def validate(self, instance: Any, name: str) -> None:
        """Raise InvalidInput naming the first offending field when `instance` breaks `name`."""
        validator = self._validator(name)
        if validator.is_valid(instance):
            return
        errors = list(validator.iter_errors(instance))
        # A failing subschema makes its properties count as "unevaluated" too; the real fault
        # is the other error, so report that one.
        primary = [e for e in errors if _kind(e) != "UnevaluatedProperties"] or errors
        raise _as_invalid_input(primary[0])


    def validate_query(self, path: str, method: str, arguments: dict[str, list[bytes]]) -> None:
        """Raise InvalidInput naming the first query parameter that breaks its declared schema.

        Parameters the operation does not declare are ignored; declared ones are checked as
        documented (maxLength, pattern, enum, integer ranges), so a limit written in the
        contract is a limit the server keeps.
        """
        for template, operations in self._query_rules:
            if template.match(path):
                declared = operations.get(method.lower(), {})
                break
        else:
            return
        for name, values in arguments.items():
            rule = declared.get(name)
            if rule is None or not values:
                continue
            kind, validator = rule
            try:
                value = _QUERY_VALUE[kind](values[-1].decode("utf-8"))
            except (UnicodeDecodeError, ValueError, KeyError):
                raise InvalidInput(f"{name}: must be {kind_label(kind)}", field=name) from None
            if not validator.is_valid(value):
                error = next(iter(validator.iter_errors(value)))
                raise InvalidInput(f"{name}: {error.message[:300]}", field=name)

    def _declared_query_parameters(self) -> list[tuple[re.Pattern[str], dict[str, Any]]]:
        """Per path template, per method: each query parameter's type and validator."""
        rules: list[tuple[int, re.Pattern[str], dict[str, Any]]] = []
        for template, item in self.document.get("paths", {}).items():
            pattern = re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template))
                                 + "$")
            operations: dict[str, Any] = {}
            for method, operation in item.items():
                if not isinstance(operation, dict) or "responses" not in operation:
                    continue
                declared = {}
                for parameter in [*item.get("parameters", []),
                                  *operation.get("parameters", [])]:
                    parameter = self.resolve(parameter)
                    if parameter.get("in") != "query" or "schema" not in parameter:
                        continue
                    schema = self.resolve(parameter["schema"])
                    kind = schema.get("type", "string")
                    declared[parameter["name"]] = (kind if isinstance(kind, str) else "string",
                                                   jsonschema_rs.Draft202012Validator(
                                                       {**schema,
                                                        "components": self._components}))
                operations[method] = declared
            rules.append((template.count("{"), pattern, operations))
        # A literal segment beats a placeholder: /errors.csv before /errors/{errorId}.
        return [(pattern, operations) for _, pattern, operations in
                sorted(rules, key=lambda rule: rule[0])]

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        """The node a `$ref` (a JSON pointer into the document) points at; others as they are."""
        while "$ref" in node:
            target: Any = self.document
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            node = target
        return node


def _boolean(text: str) -> bool:
    return {"true": True, "false": False}[text]


#: How a query parameter's text becomes a value of its declared type.
_QUERY_VALUE: dict[str, Any] = {"integer": int, "number": float, "boolean": _boolean,
                                "string": str}


def kind_label(kind: str) -> str:
    """How a parameter's type reads in an error message."""
    return {"integer": "a whole number", "number": "a number",
            "boolean": "true or false"}.get(kind, "text")


def _kind(error: jsonschema_rs.ValidationError) -> str:
    return type(error.kind).__name__


def _as_invalid_input(error: jsonschema_rs.ValidationError) -> InvalidInput:
    path = [str(part) for part in error.instance_path]
    kind = error.kind
    if _kind(error) == "Required":
        path.append(str(kind.property))
    elif _kind(error) in _PROPERTY_KINDS and kind.unexpected:
        path.append(str(kind.unexpected[0]))
    field = ".".join(path) or None
    message = error.message if len(error.message) < 300 else error.message[:300] + "…"
    where = f"{field}: " if field else ""
    return InvalidInput(f"{where}{message}", field=field)
