"""Commerce events sent as a shop's server sends them, and what the shop owner then sees of
them: the orders CSV and the drop counter in /metrics."""

from __future__ import annotations

import csv
import io
from typing import Any

from tests.support.app import Answer, Fetch, Tenant


async def send(fetch: Fetch, tenant: Tenant, body: dict[str, Any]) -> Answer:
    """POST one event to /ingest/commerce with the site's API key, whatever the answer."""
    return await fetch("/ingest/commerce", "POST", json_body=body,
                       headers={"X-Service-Key": tenant.api_key})


async def orders_csv(fetch: Fetch, tenant: Tenant) -> dict[str, dict[str, str]]:
    """The rows of the site's orders.csv, by order id."""
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/orders.csv", token=tenant.token)
    assert answer.code == 200, answer
    return {row["orderId"]: row for row in csv.DictReader(io.StringIO(answer.body.decode()))}


async def commerce_drops(fetch: Fetch, reason: str) -> int:
    """How many commerce items /metrics says were dropped for `reason`."""
    line = ('ingest_items_total{kind="commerce",outcome="dropped",'
            f'reason="{reason}"}} ')
    for row in (await fetch("/metrics")).body.decode().splitlines():
        if row.startswith(line):
            return int(float(row.removeprefix(line)))
    return 0
