"""The account export: everything of the account, no secret and no hash of one."""

from __future__ import annotations

from tests.support.app import TEST_PASSWORD, Fetch, Tenant


async def test_the_account_export_leaves_out_every_secret_and_redacts_settings(
        fetch: Fetch, tenant: Tenant, deps):
    from privacy.statements import derive_statement_key

    smtp_password = "smtp-password-never-exported"
    webhook_secret = "webhook-secret-never-exported-123"
    configured = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications", "PUT",
                             token=tenant.token, json_body={
        "email": {"enabled": True, "recipients": ["ops@shop.example"],
                  "from": "alerts@shop.example", "smtpHost": "smtp.shop.example",
                  "smtpPort": 587, "smtpUsername": "alerts", "smtpPassword": smtp_password},
        "webhook": {"enabled": True, "url": "https://93.184.216.34/hook",
                    "secret": webhook_secret},
    })
    assert configured.code == 200, configured
    survey = await fetch(f"/api/v1/sites/{tenant.site_id}/surveys", "POST", token=tenant.token,
                         json_body={"name": "Stars", "questionType": "rating",
                                    "question": "Rate this page", "pages": ["/*"]})
    assert survey.code == 201, survey
    rotated = await fetch(f"/api/v1/sites/{tenant.site_id}/api-key/rotate", "POST",
                          token=tenant.token)
    new_key = rotated.json()["apiKey"]
    site = await deps.store.collection("sites").find_one({"_id": tenant.site_id})
    user = await deps.store.collection("users").find_one({"_id": tenant.user_id})
    channels = await deps.store.collection("notification_channels").find_one(
        {"_id": tenant.site_id})

    answer = await fetch("/auth/me/export.json", token=tenant.token)
    assert answer.code == 200, answer
    text = answer.body.decode()
    secrets = {
        "old API key": tenant.api_key, "new API key": new_key, "public key": tenant.public_key,
        "API key digest": site["apiKeyHash"], "sealed statement key": site["statementKeySealed"],
        "previous sealed statement key": site["previousStatementKeySealed"],
        "statement key": derive_statement_key(new_key).hex(),
        "password": TEST_PASSWORD, "password hash": user["passwordHash"],
        "SMTP password": smtp_password, "webhook secret": webhook_secret,
        "sealed SMTP password": channels["email"]["smtpPasswordSealed"],
        "sealed webhook secret": channels["webhook"]["secretSealed"],
        "refresh token": tenant.refresh_token, "access token": tenant.token,
    }
    for label, value in secrets.items():
        assert value not in text, f"{label} is in the account export"

    export = answer.json()
    assert export["account"]["_id"] == tenant.account_id
    assert [o["_id"] for o in export["organizations"]] == [tenant.organization_id]
    assert export["users"][0]["email"] == tenant.email
    exported_site = export["sites"][0]
    assert exported_site["settings"]["recordings"] is True
    assert exported_site["allowedOrigins"] == ["https://shop.example"]
    assert exported_site["notifications"]["webhook"]["url"] == "<redacted>"
    assert exported_site["notifications"]["email"]["smtpHost"] == "<redacted>"
    assert [s["question"] for s in exported_site["surveys"]] == ["Rate this page"]
    assert export["invoices"] == []
    actions = {entry["action"] for entry in export["auditTrail"]}
    assert {"auth.login", "site.created", "site.api_key_rotated"} <= actions


async def test_another_accounts_data_is_not_in_the_export(fetch: Fetch, make_tenant):
    mine = await make_tenant("mine")
    theirs = await make_tenant("theirs")
    export = (await fetch("/auth/me/export.json", token=mine.token)).json()
    assert theirs.site_id not in str(export) and theirs.email not in str(export)
