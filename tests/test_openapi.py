"""docs/openapi.yaml describes every endpoint the application serves, with every method."""

from __future__ import annotations

import re

import server
from handlers.base import BaseHandler

METHODS = ("get", "post", "put", "patch", "delete", "options")


def _concrete(pattern: str) -> str:
    def fill(group: re.Match[str]) -> str:
        inner = group.group(1)
        if "|" in inner and re.fullmatch(r"[a-z|]+", inner):
            return inner.split("|")[0]
        return "0f0e0d0c-0b0a-4909-8807-060504030201"

    return re.sub(r"\(([^)]*)\)", fill, pattern.rstrip("$")).replace("\\.", ".")


def _template_regex(path: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\\\{[^}]+\\\}", r"[^/]+", re.escape(path)) + "$")


async def test_every_route_and_method_is_in_the_openapi_document(settings, deps, schemas):
    document = schemas.document
    templates = [(_template_regex(path), item) for path, item in document["paths"].items()]
    app = server.make_app(settings, deps)
    missing = []
    for rule in app.wildcard_router.rules:
        handler = rule.target
        concrete = _concrete(rule.matcher.regex.pattern)
        item = next((item for regex, item in templates if regex.match(concrete)), None)
        methods = [m for m in METHODS if getattr(handler, m, None) is not None
                   and getattr(handler, m) is not getattr(BaseHandler, m, None)]
        if item is None:
            missing.append(concrete)
            continue
        missing.extend(f"{m.upper()} {concrete}" for m in methods if m not in item)
    assert not missing, f"not in docs/openapi.yaml: {missing}"


def test_every_schema_reference_resolves(schemas):
    document = schemas.document
    text = repr(document)
    for name in set(re.findall(r"#/components/schemas/(\w+)", text)):
        assert name in document["components"]["schemas"], name


def test_every_operation_with_query_parameters_documents_the_422_they_may_cause(schemas):
    """Declared query parameters are checked against their schemas (handlers/validation.py)."""
    validator = schemas
    document = validator.document
    missing = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            parameters = [validator.resolve(p) for p in
                          [*item.get("parameters", []), *operation.get("parameters", [])]]
            if any(p.get("in") == "query" and "schema" in p for p in parameters) \
                    and "422" not in operation["responses"]:
                missing.append(f"{method.upper()} {path}")
    assert not missing, f"document 422 on: {missing}"
