"""Fixtures for the dashboard data API: ingest helpers and a viewer of the tenant's site."""

from __future__ import annotations

from typing import Any

import pytest

from documents import accounts
from tests.support.app import TEST_PASSWORD, Fetch, Tenant
from tests.support.ingest import Ingest


@pytest.fixture
def ingest(fetch: Fetch, tenant: Tenant) -> Ingest:
    """POST to /ingest/<kind> with the tenant's API key: ingest("pageviews", {...})."""

    async def post(kind: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = await fetch(f"/ingest/{kind}", "POST", json_body=body,
                             headers={"X-Service-Key": tenant.api_key})
        assert answer.code == 200, (kind, answer)
        return answer.json()

    return post


@pytest.fixture
async def viewer_token(fetch: Fetch, tenant: Tenant, deps, test_password_hash: str) -> str:
    """An access token of a viewer in the tenant's organization."""
    await accounts.add_member(deps.store, organization_id=tenant.organization_id,
                              email="viewer@example.com", password_hash=test_password_hash,
                              display_name="Viewer", role="viewer")
    login = await fetch("/auth/login", "POST",
                        json_body={"email": "viewer@example.com", "password": TEST_PASSWORD})
    assert login.code == 200, login
    return login.json()["accessToken"]
