"""One spelling of an instant everywhere (instants.py): the API, an export, a live event and a
CSV row write the same moment as the same text, `2026-11-26T05:00:00.123Z`."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime, timedelta, timezone

from instants import format_instant
from tests.support.app import Fetch, Tenant
from tests.support.code_scan import ROOT, matching_lines, places, production_modules
from tests.support.ingest import Ingest


def test_an_instant_is_utc_with_milliseconds_and_z():
    berlin = timezone(timedelta(hours=1))
    assert format_instant(datetime(2026, 11, 26, 6, 0, 0, 123456, tzinfo=berlin)) == (
        "2026-11-26T05:00:00.123Z")
    assert format_instant(datetime(2026, 11, 26, 5, tzinfo=UTC)) == "2026-11-26T05:00:00.000Z"
    assert format_instant(datetime(2026, 11, 26, 5)) == "2026-11-26T05:00:00.000Z"  # naive: UTC
    assert format_instant(None) is None


async def test_the_api_an_export_a_live_event_and_a_csv_row_spell_one_instant_alike(
        fetch: Fetch, tenant: Tenant, ingest: Ingest, ws_connect):
    at = (datetime.now(UTC) - timedelta(minutes=5)).replace(microsecond=123456)
    spelled = at.strftime("%Y-%m-%dT%H:%M:%S") + ".123Z"
    live = await ws_connect(token=tenant.token, site_ids=(tenant.site_id,))
    # Sent with an offset and microseconds: how it arrives is not how it is written.
    sent = at.astimezone(timezone(timedelta(hours=-5))).isoformat()
    await ingest("leads", {"visitorId": "ada", "email": "ada@example.com", "occurredAt": sent})
    site = f"/api/v1/sites/{tenant.site_id}"

    event = await live.receive_type("new_lead")
    listed = (await fetch(f"{site}/leads", token=tenant.token)).json()["items"][0]
    exported = (await fetch(f"{site}/visitors/ada/export.json", token=tenant.token)).json()
    rows = list(csv.DictReader(io.StringIO(
        (await fetch(f"{site}/leads.csv", token=tenant.token)).body.decode())))

    assert event["time"] == spelled
    assert listed["createdAt"] == spelled
    assert exported["leads"][0]["createdAt"] == spelled
    assert rows[0]["createdAt"] == spelled


#: A private formatter: a datetime's ISO text patched into `Z`, or converted to UTC and written.
PRIVATE_FORMATTER = re.compile(r'replace\("\+00:00"|astimezone\(UTC\)\.isoformat\(')


def test_no_module_but_instants_py_formats_an_instant_itself():
    modules = [path for path in production_modules() if path != ROOT / "instants.py"]
    assert places(PRIVATE_FORMATTER, modules) == []
    assert matching_lines(PRIVATE_FORMATTER, 'at.isoformat().replace("+00:00", "Z")') == [1]
