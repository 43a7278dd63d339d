"""CSV exports of errors, leads and recordings: streamed, neutralised, capped."""

from __future__ import annotations

import csv
import io

import pytest

from tests.support.app import Fetch, Tenant

CAP = 3


@pytest.fixture
def settings_env(settings_env: dict[str, str]) -> dict[str, str]:
    """A tiny row cap, so truncation is reached with a handful of rows."""
    return {**settings_env, "CSV_ROW_CAP": str(CAP)}


def _rows(body: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(body.decode("utf-8"))))


async def _leads(ingest, count: int, name: str = "Ada") -> None:
    for n in range(count):
        await ingest("leads", {"visitorId": f"v-{n}", "leadId": f"lead-{n}", "name": name,
                               "email": f"lead{n}@example.com",
                               "occurredAt": f"2026-01-0{n + 1}T10:00:00Z"})


async def test_a_leads_export_under_the_cap_is_complete_and_not_marked(
        fetch: Fetch, tenant: Tenant, deps, ingest):
    await _leads(ingest, CAP)
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/leads.csv", token=tenant.token)
    assert answer.code == 200, answer
    assert answer.headers["Content-Type"].startswith("text/csv")
    assert answer.headers["Content-Disposition"].startswith("attachment;")
    assert answer.headers["X-Export-Truncated"] == "false"
    rows = _rows(answer.body)
    assert rows[0][:3] == ["id", "createdAt", "visitorId"]
    assert [row[0] for row in rows[1:]] == ["lead-2", "lead-1", "lead-0"]
    entry = await deps.store.collection("audit_log").find_one({"action": "site.csv_exported"})
    assert entry["details"] == {"kind": "leads", "rows": CAP, "truncated": False}


async def test_an_export_over_the_cap_ends_with_a_marker_row_and_says_so_in_a_header(
        fetch: Fetch, tenant: Tenant, ingest):
    await _leads(ingest, CAP + 2)
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/leads.csv", token=tenant.token)
    assert answer.headers["X-Export-Truncated"] == "true"
    assert answer.headers["X-Export-Row-Cap"] == str(CAP)
    rows = _rows(answer.body)
    assert len(rows) == 1 + CAP + 1
    assert rows[-1][0] == "#truncated"


async def test_formula_cells_are_neutralised(fetch: Fetch, tenant: Tenant, ingest):
    await _leads(ingest, 1, name="=HYPERLINK(\"https://evil.example\",\"click\")")
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/leads.csv", token=tenant.token)
    name_column = _rows(answer.body)[0].index("name")
    assert _rows(answer.body)[1][name_column] == "'=HYPERLINK(\"https://evil.example\",\"click\")"


async def test_errors_and_recordings_export_too(fetch: Fetch, tenant: Tenant, deps):
    from tests.support.visitor_data import seed_visitor

    seeded = await seed_visitor(fetch, tenant, deps)
    errors = _rows((await fetch(f"/api/v1/sites/{tenant.site_id}/errors.csv",
                                token=tenant.token)).body)
    assert errors[0][:2] == ["id", "type"] and errors[1][1:3] == ["TypeError",
                                                                  "cart is undefined"]
    recordings = _rows((await fetch(f"/api/v1/sites/{tenant.site_id}/recordings.csv",
                                    token=tenant.token)).body)
    assert seeded.recording_id in [row[0] for row in recordings[1:]]


async def test_a_viewer_cannot_download_csv_exports(fetch: Fetch, tenant: Tenant,
                                                    viewer_token: str):
    for kind in ("errors", "leads", "recordings"):
        answer = await fetch(f"/api/v1/sites/{tenant.site_id}/{kind}.csv", token=viewer_token)
        assert answer.code == 403, kind
