"""The API reference: docs/openapi.yaml as served, and a readable page rendered from it.

Both are public, like the document in the repository. The page is plain HTML made on the
server from the same document the server validates bodies against; it loads nothing else.
"""

from __future__ import annotations

import html
from typing import Any

import yaml

from handlers.base import BaseHandler
from handlers.site_api import security_headers
from handlers.validation import OPENAPI_PATH

METHODS = ("get", "post", "put", "patch", "delete")

PAGE_STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto;
       padding: 0 1rem; color: #1d2330; }
h2 { border-bottom: 1px solid #d5d9e0; padding-bottom: .2rem; margin-top: 2.5rem; }
h3 { margin: 1.5rem 0 .3rem; font-size: 1rem; }
.method { display: inline-block; min-width: 4rem; font-weight: 700; }
pre { background: #f4f5f7; padding: .6rem; overflow-x: auto; font-size: 13px; }
table { border-collapse: collapse; } td, th { padding: .15rem .6rem .15rem 0;
  text-align: left; vertical-align: top; }
.intro { white-space: pre-wrap; }
"""


class OpenApiDocumentHandler(BaseHandler):
    """GET /api/openapi.yaml: the OpenAPI document itself."""

    authentication = "none"

    def get(self) -> None:
        self.set_header("Content-Type", "application/yaml; charset=utf-8")
        self.finish(OPENAPI_PATH.read_text(encoding="utf-8"))


class ApiReferenceHandler(BaseHandler):
    """GET /api/docs: every operation and schema of the OpenAPI document, as one HTML page."""

    authentication = "none"

    def get(self) -> None:
        self.set_header("Content-Type", "text/html; charset=utf-8")
        for name, value in security_headers(self.deps.settings.public_url).items():
            self.set_header(name, value)
        self.finish(reference_page(self.deps.schemas.document))


def reference_page(document: dict[str, Any]) -> str:
    """The HTML page for an OpenAPI document."""
    info = document.get("info", {})
    title = _text(f"{info.get('title', 'API')} {info.get('version', '')} — API reference")
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{title}</title>"
             f"<style>{PAGE_STYLE}</style></head><body><h1>{title}</h1>",
             f"<p class=intro>{_text(info.get('description', ''))}</p>",
             '<p>The same document as YAML: <a href="/api/openapi.yaml">/api/openapi.yaml</a>.'
             "</p>"]
    for tag, operations in _operations_by_tag(document).items():
        parts.append(f"<h2>{_text(tag)}</h2>")
        parts.extend(_operation(path, method, operation)
                     for path, method, operation in operations)
    parts.append("<h2>Schemas</h2>")
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        parts.append(f'<h3 id="schema-{_text(name)}">{_text(name)}</h3>'
                     f"<pre>{_text(yaml.safe_dump(schema, sort_keys=False))}</pre>")
    parts.append("</body></html>")
    return "".join(parts)


def _operations_by_tag(document: dict[str, Any]
                       ) -> dict[str, list[tuple[str, str, dict[str, Any]]]]:
    grouped: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, item in document.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                operation = {**item[method], "parameters": [*item.get("parameters", []),
                                                            *item[method].get("parameters", [])]}
                tag = (operation.get("tags") or ["general"])[0]
                grouped.setdefault(tag, []).append((path, method, operation))
    return grouped


def _operation(path: str, method: str, operation: dict[str, Any]) -> str:
    parts = [f"<h3><span class=method>{method.upper()}</span> <code>{_text(path)}</code></h3>",
             f"<p><strong>{_text(operation.get('summary', ''))}</strong></p>"]
    if operation.get("description"):
        parts.append(f"<p class=intro>{_text(operation['description'])}</p>")
    if operation.get("security") == []:
        parts.append("<p>No credentials.</p>")
    parameters = operation.get("parameters", [])
    if parameters:
        rows = "".join(
            f"<tr><td><code>{_text(p.get('name', p.get('$ref', '').rsplit('/', 1)[-1]))}"
            f"</code></td><td>{_text(p.get('in', ''))}</td>"
            f"<td>{'required' if p.get('required') else ''}</td>"
            f"<td>{_text(p.get('description', ''))}</td></tr>" for p in parameters)
        parts.append(f"<table><tr><th>parameter</th><th>in</th><th></th><th></th></tr>{rows}"
                     "</table>")
    for media_type, content in operation.get("requestBody", {}).get("content", {}).items():
        parts.append(f"<p>Body ({_text(media_type)}): {_schema_link(content.get('schema', {}))}"
                     "</p>")
    answers = "".join(f"<tr><td>{_text(str(status))}</td>"
                      f"<td>{_text(_described(response))}</td></tr>"
                      for status, response in operation.get("responses", {}).items())
    parts.append(f"<table><tr><th>answer</th><th></th></tr>{answers}</table>")
    return "".join(parts)


def _described(response: dict[str, Any]) -> str:
    return response.get("description") or response.get("$ref", "").rsplit("/", 1)[-1]


def _schema_link(schema: dict[str, Any]) -> str:
    reference = schema.get("$ref", "")
    if reference.startswith("#/components/schemas/"):
        name = _text(reference.rsplit("/", 1)[-1])
        return f'<a href="#schema-{name}">{name}</a>'
    return f"<code>{_text(yaml.safe_dump(schema, default_flow_style=True).strip())}</code>"


def _text(value: Any) -> str:
    return html.escape(str(value))


default_handlers = [
    (r"/api/openapi\.yaml", OpenApiDocumentHandler),
    (r"/api/docs", ApiReferenceHandler),
]
