"""Request bodies are validated against the JSON Schemas in docs/openapi.yaml.

The published contract and the server's checks are the same document, so they cannot drift.
jsonschema-rs checks each body against its schema as written (draft 2020-12); see
docs/performance.md for why this library.
"""

from __future__ import annotations

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
