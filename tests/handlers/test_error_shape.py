"""Every failure answers with the one JSON error shape and a fitting status."""

from __future__ import annotations

import pytest

from tests.support.app import Fetch, Tenant


def _assert_error_shape(answer, status: int) -> None:
    assert answer.code == status, answer
    assert answer.headers["Content-Type"].startswith("application/json")
    body = answer.json()
    assert set(body) == {"error"}
    assert isinstance(body["error"]["code"], str) and body["error"]["code"]
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert b"Traceback" not in answer.body and b"<html" not in answer.body.lower()


async def test_an_unknown_path_is_a_json_404(fetch: Fetch):
    _assert_error_shape(await fetch("/no/such/thing"), 404)


async def test_an_unsupported_method_is_a_json_405(fetch: Fetch, tenant: Tenant):
    _assert_error_shape(await fetch("/auth/me", "DELETE", token=tenant.token), 405)


async def test_malformed_json_is_a_400(fetch: Fetch):
    _assert_error_shape(await fetch("/auth/login", "POST", body="{not json",
                                    headers={"Content-Type": "application/json"}), 400)


async def test_json_with_nan_is_a_400(fetch: Fetch):
    _assert_error_shape(await fetch("/auth/login", "POST", body='{"email": NaN}',
                                    headers={"Content-Type": "application/json"}), 400)


async def test_invalid_utf8_is_a_400(fetch: Fetch):
    _assert_error_shape(await fetch("/auth/login", "POST", body=b'{"email": "\xff\xfe"}',
                                    headers={"Content-Type": "application/json"}), 400)


async def test_a_wrong_content_type_is_a_415(fetch: Fetch):
    _assert_error_shape(await fetch("/auth/login", "POST", body="email=a",
                                    headers={"Content-Type": "application/x-www-form-urlencoded"}),
                        415)


async def test_a_schema_violation_is_a_422_naming_the_field(fetch: Fetch):
    answer = await fetch("/auth/login", "POST", json_body={"email": "a@example.com"})
    _assert_error_shape_with_field(answer, "password")


def _assert_error_shape_with_field(answer, field: str) -> None:
    assert answer.code == 422, answer
    assert answer.json()["error"]["field"] == field


async def test_a_body_over_the_limit_is_a_413(fetch: Fetch, settings):
    big = "x" * (settings.max_event_body_bytes + 1)
    _assert_error_shape(await fetch("/auth/login", "POST", body=big,
                                    headers={"Content-Type": "application/json"}), 413)


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
async def test_health_endpoints_answer_without_credentials(fetch: Fetch, path: str):
    answer = await fetch(path)
    assert answer.code == 200
    assert answer.json()["status"] in ("ok", "ready")


async def test_readiness_fails_with_503_when_the_database_does_not_answer(fetch: Fetch, deps):
    async def down() -> None:
        raise ConnectionError("mongo is down")

    deps.readiness_checks["mongodb"] = down
    answer = await fetch("/readyz")
    _assert_error_shape(answer, 503)
    assert answer.headers["Retry-After"]


async def test_metrics_answer_loopback_callers_in_prometheus_text(fetch: Fetch, deps):
    deps.metrics.count("demo_items_total", "Items for the test.", reason="stored")
    answer = await fetch("/metrics")
    assert answer.code == 200
    assert 'demo_items_total{reason="stored"} 1' in answer.body.decode()


@pytest.mark.parametrize("header", [
    ("X-Forwarded-For", "203.0.113.9"), ("X-Real-IP", "203.0.113.9"),
    ("Forwarded", "for=203.0.113.9"), ("Via", "1.1 nginx"),
])
async def test_metrics_refuse_a_loopback_peer_that_is_a_reverse_proxy(fetch: Fetch, header):
    """Behind a proxy on the same host, every outside caller's peer is loopback."""
    answer = await fetch("/metrics", headers=dict([header]))
    _assert_error_shape(answer, 404)


async def test_a_missing_static_file_answers_the_one_json_error_shape(fetch: Fetch):
    _assert_error_shape(await fetch("/static/no-such-file.js"), 404)
