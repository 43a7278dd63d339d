"""After a restore from a backup older than an erasure, replaying the log erases the visitor again.

The backup and the restore are simulated on the store itself: every collection is copied, and
later put back, except the request log and the audit trail, which the operator's guide keeps
from after the backup (docs/operations.md, "Backup and restore").
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

import server
from privacy.replay import replay_erasures
from tests.support.app import Fetch, Tenant

KEPT_CURRENT = {"dsr_requests", "audit_log", "audit_events"}


async def _backup(deps: server.Deps) -> dict[str, list[dict[str, Any]]]:
    return {name: copy.deepcopy([doc async for doc in deps.store.collection(name).find({})])
            for name in await deps.store.collection_names()}


async def _restore(deps: server.Deps, backup: dict[str, list[dict[str, Any]]]) -> None:
    for name, documents in backup.items():
        if name in KEPT_CURRENT:
            continue
        collection = deps.store.collection(name)
        await collection.delete_many({})
        if documents:
            await collection.insert_many(copy.deepcopy(documents))


async def _ingest_visitor(fetch: Fetch, tenant: Tenant, visitor_id: str) -> None:
    headers = {"X-Service-Key": tenant.api_key}
    for path, body in (
        ("/ingest/pageviews", {"visitorId": visitor_id, "url": "https://shop.example/"}),
        ("/ingest/leads", {"visitorId": visitor_id, "email": f"{visitor_id}@example.com"}),
    ):
        answer = await fetch(path, "POST", json_body=body, headers=headers)
        assert answer.code == 200, answer


async def _holds(deps: server.Deps, site_id: str, visitor_id: str) -> int:
    held = 0
    for name in ("visitors", "pageview_buckets", "leads"):
        held += await deps.store.collection(name).count_documents(
            {"siteId": site_id, "visitorId": visitor_id})
    return held


async def test_a_restore_brings_an_erased_visitor_back_and_the_replay_erases_it_again(
        fetch: Fetch, tenant: Tenant, deps: server.Deps):
    await _ingest_visitor(fetch, tenant, "v-erased")
    await _ingest_visitor(fetch, tenant, "v-kept")
    backup_taken = datetime.now(UTC)
    backup = await _backup(deps)
    erased = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/v-erased/data", "DELETE",
                         token=tenant.token)
    assert erased.code == 200, erased
    assert await _holds(deps, tenant.site_id, "v-erased") == 0

    await _restore(deps, backup)
    assert await _holds(deps, tenant.site_id, "v-erased") == 3  # back from the backup

    report = await replay_erasures(deps.store, deps.subject_digester, backup_taken)
    assert report.erasures_in_log == 1 and report.visitors_erased_again == 1
    assert sum(report.deleted.values()) >= 3
    assert await _holds(deps, tenant.site_id, "v-erased") == 0
    assert await _holds(deps, tenant.site_id, "v-kept") == 3
    assert "v-erased" not in repr(report.as_dict())

    again = await replay_erasures(deps.store, deps.subject_digester, backup_taken)
    assert again.visitors_erased_again == 0
    log = [r async for r in deps.store.collection("dsr_requests").find({"type": "erasure"})]
    assert len(log) == 2 and any(r["details"].get("replayOf") for r in log)


async def test_erasures_completed_before_the_given_time_are_not_replayed(
        fetch: Fetch, tenant: Tenant, deps: server.Deps):
    await _ingest_visitor(fetch, tenant, "v-old")
    backup = await _backup(deps)
    erased = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/v-old/data", "DELETE",
                         token=tenant.token)
    assert erased.code == 200, erased
    await _restore(deps, backup)
    report = await replay_erasures(deps.store, deps.subject_digester, datetime.now(UTC))
    assert report.erasures_in_log == 0 and report.visitors_erased_again == 0
    assert await _holds(deps, tenant.site_id, "v-old") == 3


def test_the_command_reads_since_as_utc_and_refuses_a_malformed_date():
    args = server._parser().parse_args(["replay-erasures", "--since", "2026-11-01"])
    assert args.since == datetime(2026, 11, 1, tzinfo=UTC)
    with pytest.raises(SystemExit):
        server._parser().parse_args(["replay-erasures", "--since", "last week"])


def test_the_command_needs_a_real_mongodb(monkeypatch, capsys):
    monkeypatch.delenv("MONGODB_URI", raising=False)
    assert server.cli(["replay-erasures", "--since", "2026-11-01"]) == 2
    assert "MONGODB_URI" in capsys.readouterr().err
