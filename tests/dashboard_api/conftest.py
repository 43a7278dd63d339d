"""Fixtures for the dashboard data API: ingest helpers and a viewer of the tenant's site."""

from __future__ import annotations

import pytest

from documents import accounts
from tests.support.app import TEST_PASSWORD, Fetch, Tenant


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
