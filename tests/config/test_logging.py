"""Secrets never reach a log line: headers, query values, tokens and keys are redacted."""

from __future__ import annotations

import io
import json
import logging

import pytest

from config.logging import configure_logging, loggable_uri, redact
from tests.support.app import Fetch, Tenant


@pytest.fixture
def log_lines():
    """Every log line, at DEBUG; the levels and handlers are put back afterwards, or later
    tests would capture every library's debug records (the driver's, on the wire)."""
    root, tornado_general = logging.getLogger(), logging.getLogger("tornado.general")
    levels = root.level, tornado_general.level
    handlers = list(root.handlers)
    stream = io.StringIO()
    handler = configure_logging("DEBUG", stream)
    yield stream
    root.removeHandler(handler)
    for kept in handlers:
        root.addHandler(kept)
    root.setLevel(levels[0])
    tornado_general.setLevel(levels[1])


async def test_credentials_sent_in_every_channel_never_reach_any_log(
        fetch: Fetch, tenant: Tenant, log_lines):
    logging.getLogger("tornado.general").setLevel(logging.DEBUG)
    secrets_sent = {
        "authorization": tenant.token,
        "cookie": "svc_refresh=cookie-secret-value-123",
        "service key": tenant.api_key,
        "query key": "query-key-secret-456",
        "query token": "query-token-secret-789",
    }
    await fetch("/auth/me", token=tenant.token)
    await fetch("/auth/me", headers={"Cookie": "svc_refresh=cookie-secret-value-123"})
    await fetch("/api/v1/sites", headers={"X-Service-Key": tenant.api_key})
    await fetch("/healthz?key=query-key-secret-456&token=query-token-secret-789")
    await fetch("/nowhere?token=query-token-secret-789")
    # A careless log call with the raw values is redacted too.
    logging.getLogger("careless").warning(
        "headers were Authorization: Bearer %s, X-Service-Key: %s", tenant.token, tenant.api_key)
    text = log_lines.getvalue()
    assert "/healthz?key=[redacted]&token=[redacted]" in text
    for label, value in secrets_sent.items():
        assert value.split("=")[-1] not in text, f"{label} leaked into the log"
    for line in text.strip().splitlines():
        entry = json.loads(line)
        assert {"time", "level", "logger", "message"} <= set(entry)


@pytest.mark.parametrize(("raw", "expected"), [
    ("GET /x?key=abc&y=1", "GET /x?key=[redacted]&y=1"),
    ("Authorization: Bearer eyJ.a.b", "Authorization: [redacted]"),
    ('{"X-Service-Key": "sk_abcdefghijkl"}', '{"X-Service-Key": "[redacted]"}'),
    ("monkey=1&donkey=2", "monkey=1&donkey=2"),
])
def test_redaction_replaces_values_and_leaves_other_text(raw: str, expected: str):
    assert redact(raw) == expected


async def test_searches_and_visitor_ids_never_reach_the_access_log(
        fetch: Fetch, tenant: Tenant, log_lines):
    """Logs outlive erasure: what names or finds a visitor stays out of them."""
    await fetch("/api/v1/sites/" + tenant.site_id + "/visitors?q=ada.lovelace%40example.com",
                token=tenant.token)
    await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/visitor-ada-77/export.json",
                token=tenant.token)
    text = log_lines.getvalue()
    assert "ada.lovelace" not in text and "visitor-ada-77" not in text
    assert f"/api/v1/sites/{tenant.site_id}/visitors?q=[redacted]" in text
    assert f"/api/v1/sites/{tenant.site_id}/visitors/[redacted]/export.json" in text


@pytest.mark.parametrize(("uri", "expected"), [
    ("/api/v1/sites/s1/visitors/v-9/data", "/api/v1/sites/s1/visitors/[redacted]/data"),
    ("/dashboard/visitors/abc/sessions?x=1&y", "/dashboard/visitors/[redacted]/sessions"
                                                "?x=[redacted]&y=[redacted]"),
    ("/healthz", "/healthz"),
])
def test_loggable_uris_keep_the_route_and_our_own_ids_only(uri: str, expected: str):
    assert loggable_uri(uri) == expected
