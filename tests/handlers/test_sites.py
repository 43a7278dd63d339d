"""Sites: keys shown once and stored hashed, settings validated, rotation, roles, audit."""

from __future__ import annotations

from documents import accounts
from tests.support.app import TEST_PASSWORD, Fetch, Tenant, all_documents_text


async def test_the_api_key_is_shown_once_and_stored_only_hashed(
        fetch: Fetch, tenant: Tenant, deps):
    site = await fetch(f"/api/v1/sites/{tenant.site_id}", token=tenant.token)
    assert tenant.api_key not in site.body.decode()
    assert tenant.api_key not in await all_documents_text(deps.store)
    assert site.json()["apiKeyHint"].startswith(tenant.api_key[:6])


async def test_settings_have_safe_defaults(fetch: Fetch, tenant: Tenant):
    settings = (await fetch(f"/api/v1/sites/{tenant.site_id}", token=tenant.token)).json()
    assert settings["settings"] == {
        "recordings": True, "consoleCapture": False, "requireConsent": False, "excludedUrls": [],
        "personalPages": ["/checkout", "/checkout/*", "/my-account", "/my-account/*"]}


async def test_settings_change_and_the_change_is_audited_by_field_name(
        fetch: Fetch, tenant: Tenant, deps):
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", token=tenant.token,
                         json_body={"settings": {"requireConsent": True, "excludedUrls": [
                             {"pattern": "/checkout*", "scope": "all"}, {"pattern": "/account*"},
                         ]}})
    assert answer.code == 200, answer
    settings = answer.json()["settings"]
    assert settings["requireConsent"] is True
    assert settings["excludedUrls"] == [{"pattern": "/checkout*", "scope": "all"},
                                        {"pattern": "/account*", "scope": "replay"}]
    entry = await deps.store.collection("audit_log").find_one({"action": "site.settings_changed"})
    assert entry["actorUserId"] == tenant.user_id
    assert entry["siteId"] == tenant.site_id
    assert entry["organizationId"] == tenant.organization_id
    assert entry["at"] is not None
    assert sorted(entry["details"]["fields"]) == ["settings.excludedUrls",
                                                   "settings.requireConsent"]


async def test_a_bad_setting_is_refused_naming_the_field_and_nothing_changes(
        fetch: Fetch, tenant: Tenant):
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", token=tenant.token,
                         json_body={"settings": {"recordings": "yes please"}})
    assert answer.code == 422
    assert answer.json()["error"]["field"] == "settings.recordings"
    unknown = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", token=tenant.token,
                          json_body={"settings": {"storeFullIp": True}})
    assert unknown.code == 422
    assert unknown.json()["error"]["field"] == "settings.storeFullIp"
    origin = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", token=tenant.token,
                         json_body={"allowedOrigins": ["https://shop.example/path"]})
    assert origin.code == 422
    site = await fetch(f"/api/v1/sites/{tenant.site_id}", token=tenant.token)
    assert site.json()["settings"]["recordings"] is True
    assert site.json()["allowedOrigins"] == ["https://shop.example"]


async def test_rotating_the_key_stops_the_old_key_at_once(fetch: Fetch, tenant: Tenant, deps):
    assert await deps.keyring.site_for_api_key(tenant.api_key) is not None
    rotated = await fetch(f"/api/v1/sites/{tenant.site_id}/api-key/rotate", "POST",
                          token=tenant.token)
    assert rotated.code == 200
    new_key = rotated.json()["apiKey"]
    assert new_key != tenant.api_key
    assert await deps.keyring.site_for_api_key(tenant.api_key) is None
    assert (await deps.keyring.site_for_api_key(new_key))["_id"] == tenant.site_id
    assert await deps.store.collection("audit_log").find_one(
        {"action": "site.api_key_rotated", "siteId": tenant.site_id}) is not None


async def test_statements_under_the_old_key_verify_only_during_the_grace(
        fetch: Fetch, tenant: Tenant, deps):
    from datetime import UTC, datetime, timedelta

    from privacy.statements import derive_statement_key

    old_key = derive_statement_key(tenant.api_key)
    await fetch(f"/api/v1/sites/{tenant.site_id}/api-key/rotate", "POST", token=tenant.token)
    site = await deps.store.collection("sites").find_one({"_id": tenant.site_id})
    now = datetime.now(UTC)
    assert old_key in deps.keyring.statement_keys(site, now)
    later = now + timedelta(seconds=deps.settings.key_rotation_grace_seconds + 1)
    assert old_key not in deps.keyring.statement_keys(site, later)


async def test_a_viewer_can_read_but_not_change_or_rotate(
        fetch: Fetch, tenant: Tenant, deps, test_password_hash):
    await accounts.add_member(deps.store, organization_id=tenant.organization_id,
                              email="viewer@example.com", password_hash=test_password_hash,
                              display_name="Viewer", role="viewer")
    login = await fetch("/auth/login", "POST",
                        json_body={"email": "viewer@example.com", "password": TEST_PASSWORD})
    token = login.json()["accessToken"]
    assert (await fetch(f"/api/v1/sites/{tenant.site_id}", token=token)).code == 200
    patch = await fetch(f"/api/v1/sites/{tenant.site_id}", "PATCH", token=token,
                        json_body={"name": "viewer was here"})
    assert patch.code == 403
    rotate = await fetch(f"/api/v1/sites/{tenant.site_id}/api-key/rotate", "POST", token=token)
    assert rotate.code == 403
    create = await fetch("/api/v1/sites", "POST", token=token,
                         json_body={"name": "x", "organizationId": tenant.organization_id})
    assert create.code == 403
    assert await deps.keyring.site_for_api_key(tenant.api_key) is not None


async def test_the_statement_key_is_sealed_not_stored_plain(fetch: Fetch, tenant: Tenant, deps):
    from privacy.statements import derive_statement_key

    plain = derive_statement_key(tenant.api_key).hex()
    assert plain not in await all_documents_text(deps.store)
    site = await deps.store.collection("sites").find_one({"_id": tenant.site_id})
    assert site["statementKeySealed"].startswith("v1.")


async def test_saving_the_settings_form_with_new_origins_audits_only_the_origins(
        fetch: Fetch, tenant: Tenant, deps):
    """The dashboard's form sends every setting; the audit entry names what changed (issue 28
    point 15), and a save that changes nothing writes no entry."""
    site = f"/api/v1/sites/{tenant.site_id}"
    form = {"settings": {"recordings": True, "consoleCapture": False, "requireConsent": False,
                         "excludedUrls": [{"pattern": "/account*", "scope": "replay"}]}}
    first = await fetch(site, "PATCH", token=tenant.token,
                        json_body={**form, "allowedOrigins": ["https://shop.example"]})
    assert first.code == 200, first
    audit = deps.store.collection("audit_log")
    [entry] = await audit.find({"action": "site.settings_changed"}).to_list(None)
    assert entry["details"]["fields"] == ["settings.excludedUrls"]
    answer = await fetch(site, "PATCH", token=tenant.token, json_body={
        **form, "allowedOrigins": ["https://shop.example", "https://www.shop.example"]})
    assert answer.code == 200, answer
    assert answer.json()["allowedOrigins"] == ["https://shop.example", "https://www.shop.example"]
    latest = await audit.find({"action": "site.settings_changed"}).sort("at", -1).to_list(None)
    assert len(latest) == 2 and latest[0]["details"]["fields"] == ["allowedOrigins"]
    again = await fetch(site, "PATCH", token=tenant.token, json_body={
        **form, "allowedOrigins": ["https://www.shop.example", "https://shop.example"]})
    assert again.code == 200, again
    assert await audit.count_documents({"action": "site.settings_changed"}) == 2
