"""Retention as a shop owner meets it: set in the site's settings and audited, previewed before
it is shortened, proven per kind after each purge, stated in the exports and in /metrics."""

from __future__ import annotations

from datetime import timedelta

from documents import retention
from tests.retention.conftest import Seeded
from tests.support.app import Fetch, Tenant


def _site(tenant: Tenant) -> str:
    return f"/api/v1/sites/{tenant.site_id}"


async def test_retentions_are_changed_kind_by_kind_and_audited(fetch: Fetch, tenant: Tenant,
                                                               deps):
    answer = await fetch(_site(tenant), "PATCH", token=tenant.token,
                         json_body={"settings": {"retentionDays": {"recordings": 30}}})
    assert answer.code == 200, answer
    answer = await fetch(_site(tenant), "PATCH", token=tenant.token,
                         json_body={"settings": {"retentionDays": {"chats": 60}}})
    assert answer.code == 200, answer
    assert answer.json()["settings"]["retentionDays"] == {"recordings": 30, "chats": 60}
    entries = await deps.store.collection("audit_log").find(
        {"action": "site.settings_changed"}).sort("at", 1).to_list(None)
    assert [entry["details"]["retentionDays"] for entry in entries] == [
        {"recordings": {"from": 90, "to": 30}}, {"chats": {"from": 365, "to": 60}}]

    status = (await fetch(f"{_site(tenant)}/retention", token=tenant.token)).json()
    days = {kind["kind"]: kind["retentionDays"] for kind in status["kinds"]}
    assert days == {"recordings": 30, "heatmaps": 90, "errors": 90, "activity": 761,
                    "leads": 1095, "surveys": 365, "chats": 60, "consent": 1826,
                    "visitors": 761, "requestLog": 1826}


async def test_a_retention_outside_its_range_or_fixed_by_law_is_refused(fetch: Fetch,
                                                                        tenant: Tenant):
    for change in ({"recordings": 6}, {"activity": 762}, {"consent": 365},
                   {"requestLog": 3000}, {"recordings": "90"}):
        answer = await fetch(_site(tenant), "PATCH", token=tenant.token,
                             json_body={"settings": {"retentionDays": change}})
        assert answer.code == 422, (change, answer)


async def test_shortening_shows_what_the_next_run_removes_and_deletes_nothing_yet(
        seeded: Seeded, fetch: Fetch, tenant: Tenant, deps):
    answer = await fetch(f"{_site(tenant)}/retention/preview", "POST", token=tenant.token,
                         json_body={"retentionDays": {"recordings": 7, "activity": 30}})
    assert answer.code == 200, answer
    preview = answer.json()
    assert preview["retentionDays"]["recordings"] == 7
    # Today only the two legacy recordings of 2024 are older than a week; the pageviews
    # and interactions are days old at most.
    assert preview["wouldRemove"] == {kind.key: 0 for kind in retention.KINDS} | {
        "recordings": 2}
    assert await deps.store.collection("recordings").count_documents({}) == 4
    bad = await fetch(f"{_site(tenant)}/retention/preview", "POST", token=tenant.token,
                      json_body={"retentionDays": {"recordings": 1}})
    assert bad.code == 422


async def test_the_privacy_figures_prove_each_purge(seeded: Seeded, fetch: Fetch,
                                                    tenant: Tenant, deps):
    before = (await fetch(f"{_site(tenant)}/retention", token=tenant.token)).json()
    recordings = next(k for k in before["kinds"] if k["kind"] == "recordings")
    assert recordings["oldestHeldAt"].startswith("2024-01-01")
    assert recordings["lastPurgeAt"] is None and before["lastRunCompletedAt"] is None

    now = seeded.at + timedelta(days=91)
    await deps.purge.purge(now)
    after = (await fetch(f"{_site(tenant)}/retention", token=tenant.token)).json()
    kinds = {kind["kind"]: kind for kind in after["kinds"]}
    assert kinds["recordings"]["oldestHeldAt"] is None
    assert (kinds["recordings"]["removedLastRun"], kinds["recordings"]["removedTotal"]) == (4, 4)
    assert kinds["errors"]["removedLastRun"] == 5
    assert kinds["leads"]["removedLastRun"] == 0 and kinds["leads"]["oldestHeldAt"] is not None
    assert kinds["recordings"]["lastPurgeAt"] is not None
    assert after["lastRunCompletedAt"] is not None and after["runInProgress"] is False

    metrics = (await fetch("/metrics")).body.decode()
    assert 'retention_purge_removed_total{kind="recordings"} 4' in metrics
    assert 'retention_purge_removed_total{kind="errors"} 5' in metrics
    last = next(line for line in metrics.splitlines()
                if line.startswith("retention_purge_last_success_timestamp "))
    # Stores keep milliseconds.
    assert float(last.split()[1]) == int(now.timestamp() * 1000) / 1000


async def test_the_exports_state_the_retentions_and_lose_what_was_purged(
        seeded: Seeded, fetch: Fetch, tenant: Tenant, deps):
    await fetch(_site(tenant), "PATCH", token=tenant.token,
                json_body={"settings": {"retentionDays": {"surveys": 30}}})
    path = f"{_site(tenant)}/visitors/{seeded.ada.visitor_id}/export.json"
    export = (await fetch(path, token=tenant.token)).json()
    periods = {period["kind"]: period for period in export["information"]["retentionPeriods"]}
    assert periods["recordings"]["days"] == 90
    assert periods["surveys"]["days"] == 30
    assert periods["recordings"]["sections"] == ["recordings", "recordingSegments"]
    assert len(export["surveyResponses"]) == 1 and len(export["recordings"]) == 2

    await deps.purge.purge(seeded.at + timedelta(days=31))
    export = (await fetch(path, token=tenant.token)).json()
    assert export["surveyResponses"] == []
    assert [r["id"] for r in export["recordings"]] == [seeded.ada.recording_id]

    account = (await fetch("/auth/me/export.json", token=tenant.token)).json()
    (site,) = account["sites"]
    assert site["retentionDays"]["surveys"] == 30 and site["retentionDays"]["activity"] == 761
