"""Alert rules in the API: owners and admins create, change, mute and delete them, audited;
viewers read them."""

from __future__ import annotations

from tests.support.app import Fetch, Tenant


async def test_an_owner_creates_changes_mutes_and_deletes_a_rule_and_each_step_is_audited(
        fetch: Fetch, tenant: Tenant, deps, viewer_token: str):
    base = f"/api/v1/sites/{tenant.site_id}/alert-rules"
    created = await fetch(base, "POST", token=tenant.token, json_body={
        "kind": "checkoutErrors", "name": "Checkout broken", "params": {"sessions": 3},
        "channels": ["email", "slack"]})
    assert created.code == 201, created
    rule = created.json()
    assert (rule["params"], rule["channels"], rule["muted"], rule["evaluation"]) == (
        {"sessions": 3, "pages": ["/checkout", "/cart"]}, ["email", "slack"], False, None)

    muted = await fetch(f"{base}/{rule['id']}", "PATCH", token=tenant.token,
                        json_body={"muted": True, "params": {"sessions": 8}})
    assert muted.code == 200, muted
    assert (muted.json()["muted"], muted.json()["params"]["sessions"]) == (True, 8)

    listed = await fetch(base, token=viewer_token)
    assert [r["id"] for r in listed.json()["rules"]] == [rule["id"]]
    assert "orderSilence" in [kind["kind"] for kind in listed.json()["kinds"]]
    refused = await fetch(f"{base}/{rule['id']}", "DELETE", token=viewer_token)
    assert refused.code == 403, refused

    deleted = await fetch(f"{base}/{rule['id']}", "DELETE", token=tenant.token)
    assert deleted.code == 204, deleted
    assert (await fetch(f"{base}/{rule['id']}", token=tenant.token)).code == 404
    entries = [entry async for entry in deps.store.collection("audit_log").find(
        {"siteId": tenant.site_id, "action": {"$regex": "^alert_rule"}})]
    assert sorted(entry["action"] for entry in entries) == [
        "alert_rule.changed", "alert_rule.created", "alert_rule.deleted"]
    changed = next(entry for entry in entries if entry["action"] == "alert_rule.changed")
    assert changed["details"]["fields"] == ["muted", "params"]


async def test_a_viewer_cannot_create_a_rule_and_a_survey_rule_needs_its_score(
        fetch: Fetch, tenant: Tenant, viewer_token: str):
    base = f"/api/v1/sites/{tenant.site_id}/alert-rules"
    body = {"kind": "lead", "name": "Leads"}
    assert (await fetch(base, "POST", token=viewer_token, json_body=body)).code == 403
    missing = await fetch(base, "POST", token=tenant.token,
                          json_body={"kind": "surveyScore", "name": "Unhappy"})
    assert missing.code == 422 and missing.json()["error"]["field"] == "params.below"
    unknown = await fetch(base, "POST", token=tenant.token,
                          json_body={"kind": "weather", "name": "Rain"})
    assert unknown.code in (400, 422), unknown
