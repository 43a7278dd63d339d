"""The server publishes its OpenAPI document and a readable API reference made from it."""

from __future__ import annotations

import yaml

from handlers.validation import OPENAPI_PATH
from tests.support.app import Fetch


async def test_the_openapi_document_is_served_as_it_is_in_the_repository(fetch: Fetch):
    answer = await fetch("/api/openapi.yaml")
    assert answer.code == 200
    assert answer.headers["Content-Type"].startswith("application/yaml")
    assert answer.body.decode() == OPENAPI_PATH.read_text(encoding="utf-8")
    assert yaml.safe_load(answer.body)["openapi"].startswith("3.")


async def test_the_reference_page_lists_every_operation_and_loads_nothing_else(fetch: Fetch):
    answer = await fetch("/api/docs")
    assert answer.code == 200
    assert answer.headers["Content-Type"].startswith("text/html")
    assert "script-src 'self'" in answer.headers["Content-Security-Policy"]
    page = answer.body.decode()
    document = yaml.safe_load(OPENAPI_PATH.read_text(encoding="utf-8"))
    for path, item in document["paths"].items():
        for method in ("get", "post", "put", "patch", "delete"):
            if method in item:
                assert f"{method.upper()}</span> <code>{path}</code>" in page, (method, path)
    assert 'id="schema-PageviewIngest"' in page
    assert '<a href="#schema-PageviewIngest">' in page  # the request body links its schema
    assert "<script" not in page and "http" not in page.split("<body>")[0]  # no CDN
