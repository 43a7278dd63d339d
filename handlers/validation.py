"""Request bodies are validated against the JSON Schemas in docs/openapi.yaml.

The published contract and the server's checks are the same document, so they cannot drift.
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

    def _validator(self, name: str) -> Draft202012Validator:
        validator = self._validators.get(name)
        if validator is None:
            if name not in self._components.get("schemas", {}):
                raise KeyError(f"no schema named {name} in openapi.yaml")
            schema = {"$ref": f"#/components/schemas/{name}", "components": self._components}
            validator = Draft202012Validator(schema)
            self._validators[name] = validator
        return validator

    def validate(self, instance: Any, name: str) -> None:
        """Raise InvalidInput naming the first offending field when `instance` breaks `name`."""
        errors = list(self._validator(name).iter_errors(instance))
        # A failing subschema makes its properties count as "unevaluated" too; the real fault
        # is the other error, so report that one.
        primary = [e for e in errors if e.validator != "unevaluatedProperties"] or errors
        error = best_match(primary)
        if error is not None:
            raise _as_invalid_input(error)


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
