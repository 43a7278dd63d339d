"""Schemathesis fuzzes every operation in docs/openapi.yaml against the running app.

Each operation runs twice: as an authenticated caller (the tenant's bearer token, its API key on
/ingest, its public key and an allowed Origin on /sdk/v1, its own site id in the path, so the
cases reach past authentication) and as an anonymous caller (everything generated, no
credentials). Both mix valid (positive) and schema-breaking (negative) cases. Every answer must
be a non-5xx, documented status with the documented content type and body, every error must
have the one error shape, and a refused request must leave the store as it was (a dump of every
collection before and after it, but those a refusal is meant to write: see REFUSALS_WRITE).

The app runs on the test's event loop (the `base_url` fixture); the synchronous schemathesis
calls run in a thread so the loop keeps serving. Examples are few and derandomised: a failure
reproduces on every run and the whole module stays within a few minutes.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from handlers.validation import OPENAPI_PATH
from tests.support.app import Tenant

pytestmark = [
    pytest.mark.slow,
    # The server under test runs in this process. Over the wire its driver draws request ids
    # from the global `random` on other threads (while an error job is still being processed,
    # say), and hypothesis takes any change to that state during a draw for a strategy using it.
    pytest.mark.filterwarnings(
        "ignore:Do not use the `random` module inside strategies"
        ":hypothesis.errors.HypothesisDeprecationWarning"),
]

#: Examples per operation, caller and generation mode; small enough for `make test`. Set
#: FUZZ_EXAMPLES for a deeper run (`FUZZ_EXAMPLES=50 pytest tests/hardening/test_fuzz_openapi.py`).
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "5"))

#: Operations not fuzzed over plain HTTP, and why.
NOT_FUZZED = {
    # A WebSocket upgrade; tests/realtime drives it with a real WebSocket client.
    "GET /dashboard/live": "websocket",
}

#: Operations whose errors may differ from the one error shape, and why.
OTHER_ERROR_SHAPES: dict[str, str] = {}

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance]

ALLOWED_ORIGIN = "https://shop.example"

#: Collections a refused request is meant to write, and why.
REFUSALS_WRITE = {
    "login_throttle": "a failed login is counted, to throttle guessing",
    "refresh_tokens": "a reused refresh token revokes its whole family",
    "dsr_requests": "a data-subject request that fails is logged as failed, with its due date",
    "audit_log": "the audit trail records refused administrative actions too",
}


def _operation_labels() -> list[str]:
    with open(OPENAPI_PATH, encoding="utf-8") as handle:
        document = yaml.safe_load(handle)
    labels = []
    for path, item in document["paths"].items():
        for method in ("get", "post", "put", "patch", "delete", "options"):
            if method in item and f"{method.upper()} {path}" not in NOT_FUZZED:
                labels.append(f"{method.upper()} {path}")
    return labels


@pytest.fixture(scope="module")
def api_schema() -> Any:
    """The OpenAPI document as schemathesis sees it."""
    return schemathesis.openapi.from_path(OPENAPI_PATH)


@pytest.fixture(scope="module")
def error_shape() -> Draft202012Validator:
    """A validator for the one error shape, `#/components/schemas/Error`."""
    with open(OPENAPI_PATH, encoding="utf-8") as handle:
        document = yaml.safe_load(handle)
    return Draft202012Validator({"$ref": "#/components/schemas/Error",
                                 "components": document["components"]})


def _security(operation: Any) -> set[str]:
    raw = operation.definition.raw
    requirements = raw.get("security", operation.schema.raw_schema.get("security", []))
    return {name for requirement in requirements for name in requirement}


def _authenticated(operation: Any, tenant: Tenant) -> tuple[dict[str, Any], dict[str, str]]:
    """Fixed path parameters and headers that make `tenant` the caller."""
    security = _security(operation)
    path_names = {p.name for p in operation.path_parameters}
    fixed_path: dict[str, Any] = {}
    headers: dict[str, str] = {}
    if "siteId" in path_names:
        fixed_path["siteId"] = tenant.site_id
    if "bearerAuth" in security:
        headers["Authorization"] = f"Bearer {tenant.token}"
    if "serviceKey" in security:
        headers["X-Service-Key"] = tenant.api_key
    if "publicKey" in security or "publicKey" in path_names:
        fixed_path["publicKey"] = tenant.public_key
        headers["Origin"] = ALLOWED_ORIGIN
    return fixed_path, headers


def _fixed_query(operation: Any, tenant: Tenant) -> dict[str, Any]:
    """The loader takes the public key as `?key=`; the tenant's makes the case reach the site."""
    return {"key": tenant.public_key} if operation.label == "GET /sdk/v1/loader.js" else {}


def _check_error_shape(label: str, response: Any, validator: Draft202012Validator) -> None:
    if response.status_code < 400 or label in OTHER_ERROR_SHAPES:
        return
    content_type = response.headers.get("content-type", [""])[0]
    assert content_type.startswith("application/json"), (
        f"{response.status_code} answered as {content_type!r}: {response.text[:200]!r}")
    body = response.json()
    errors = sorted(validator.iter_errors(body), key=str)
    assert not errors, f"{response.status_code} is not the one error shape: {body!r}: {errors[0]}"


async def _store_dump(deps: Any) -> dict[str, list[str]]:
    """Every collection's documents as text, sorted, once background work has settled."""
    join = getattr(deps.queue, "join", None)
    if join is not None:
        await join()  # the embedded error queue: jobs accepted earlier are finished first
    dump = {}
    for name in await deps.store.collection_names():
        if name not in REFUSALS_WRITE:
            documents = await deps.store.collection(name).find({}).to_list(None)
            dump[name] = sorted(repr(document) for document in documents)
    return dump


def _fuzz(operation: Any, base_url: str, fixed: tuple[dict[str, Any], dict[str, Any]],
          headers: dict[str, str], error_shape: Draft202012Validator,
          snapshot: Callable[[], dict[str, list[str]]]) -> int:
    """Run the bounded, derandomised hypothesis search for one operation; return cases sent."""
    fixed_path, fixed_query = fixed
    strategy = st.one_of(*(
        operation.as_strategy(mode, path_parameters=fixed_path or None,
                              query=fixed_query or None)
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    ))
    sent = [0]

    @settings(max_examples=EXAMPLES * 2, derandomize=True, database=None, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                     HealthCheck.data_too_large])
    @given(case=strategy)
    def run(case: Any) -> None:
        before = snapshot()
        response = case.call(base_url=base_url, headers=headers, timeout=30)
        sent[0] += 1
        case.validate_response(response, checks=CHECKS, headers=headers)
        _check_error_shape(operation.label, response, error_shape)
        if response.status_code >= 400:
            after = snapshot()
            changed = sorted(name for name in {*before, *after}
                             if before.get(name) != after.get(name))
            assert not changed, f"a refused {operation.label} ({response.status_code}) " \
                                f"changed {changed}"

    run()
    return sent[0]


@pytest.mark.parametrize("label", _operation_labels())
@pytest.mark.parametrize("caller", ["authenticated", "anonymous"])
async def test_every_operation_answers_as_documented_under_fuzzing(
    label: str, caller: str, api_schema: Any, error_shape: Draft202012Validator,
    base_url: str, tenant: Tenant, deps: Any,
) -> None:
    method, path = label.split(" ", 1)
    operation = api_schema[path][method]
    if caller == "anonymous":
        fixed: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
        headers: dict[str, str] = {}
    else:
        fixed_path, headers = _authenticated(operation, tenant)
        fixed = (fixed_path, _fixed_query(operation, tenant))
    loop = asyncio.get_running_loop()

    def snapshot() -> dict[str, list[str]]:
        return asyncio.run_coroutine_threadsafe(_store_dump(deps), loop).result(timeout=60)

    sent = await asyncio.to_thread(_fuzz, operation, base_url, fixed, headers, error_shape,
                                   snapshot)
    assert sent > 0
