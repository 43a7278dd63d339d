"""Methods a route does not take answer 405 with `Allow`; HEAD of the loader answers like GET
(issue 28: TRACE answered 405 without `Allow`; an uptime monitor's HEAD of the loader got 405).
"""

from __future__ import annotations

import re

import server
from tests.support.app import Fetch, Tenant

from .test_route_sweep import _concrete, _routes

STANDARD = {"GET", "HEAD", "POST", "DELETE", "PATCH", "PUT", "OPTIONS"}


async def test_every_route_answers_trace_with_405_and_the_methods_it_allows(
        fetch: Fetch, settings, deps: server.Deps, tenant: Tenant):
    for pattern, _handler in _routes(settings, deps):
        if pattern.startswith(".*"):
            continue  # the catch-all: every path it takes is unknown
        path = _concrete(pattern, tenant.site_id)
        for method in ("TRACE", "CONNECT", "PROPFIND"):
            answer = await fetch(path, method)
            assert answer.code == 405, f"{method} {path}: {answer}"
            allowed = {m.strip() for m in answer.headers.get("Allow", "").split(",")}
            assert allowed and allowed <= STANDARD, f"{method} {path}: Allow {allowed}"
            assert answer.json()["error"]["code"] == "method_not_allowed"


async def test_a_method_a_route_does_not_implement_names_the_ones_it_does(
        fetch: Fetch, tenant: Tenant):
    answer = await fetch("/auth/me", "PUT", token=tenant.token, json_body={})
    assert answer.code == 405
    assert "GET" in re.split(r",\s*", answer.headers["Allow"])
    assert "PUT" not in answer.headers["Allow"]


async def test_head_of_the_loader_answers_like_get_without_a_body(fetch: Fetch, tenant: Tenant):
    path = f"/sdk/v1/loader.js?key={tenant.public_key}"
    got = await fetch(path)
    head = await fetch(path, "HEAD")

    assert got.code == head.code == 200, head
    assert head.body == b""
    assert head.headers["Content-Type"] == got.headers["Content-Type"]
    for header in ("Content-Length", "Content-Encoding", "Cache-Control"):
        assert head.headers.get(header) == got.headers.get(header), header
    unknown = await fetch("/sdk/v1/loader.js?key=pk_nobody", "HEAD")
    assert unknown.code == 404 and unknown.body == b""
