"""One stored row the code did not expect never breaks a list, a CSV or an export for the rest.

A row can be malformed in ways no writer of today produces: data from an older version, a hand
edit, a restore. Each case stores one good item through ingest and one broken document beside
it; every site-wide list and CSV still answers with the good item, and the visitor's access
export still answers, holding the broken document's data as far as it can be read.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.support.app import Fetch, Tenant

PAGE = "https://shop.example/products/blue-mug"
AT = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)

#: (collection, the broken document's fields besides `_id` and `siteId`)
BROKEN_ROWS = [
    ("visitors", {}),
    ("visitors", {"visitorId": 7, "lastSeen": "yesterday", "counts": "many", "location": 3,
                  "device": ["x"], "emails": "a@b"}),
    ("leads", {"visitorId": "v-good"}),
    ("leads", {"visitorId": "v-good", "createdAt": "2026-11-20", "fields": "x", "email": 5}),
    ("recordings", {"visitorId": "v-good"}),
    ("recordings", {"visitorId": "v-good", "startedAt": "2026-11-20", "endedAt": 12,
                    "status": "active", "pages": ["not a page"], "lastActivityAt": None}),
    ("recordings", {"visitorId": "v-good", "startedAt": AT, "endedAt": "later",
                    "pages": [{"at": AT}]}),
    ("errors", {}),
    ("errors", {"lastSeen": "2026-11-20", "firstSeen": 3, "occurrenceCount": "lots",
                "context": "x"}),
]

#: A value of the good item that each list and CSV must still show beside the broken row.
GOOD = {"visitors": "v-good", "leads": "ada@example.com", "recordings": "v-good",
        "errors": "x is undefined"}

SITE_WIDE = ["visitors", "errors", "leads", "recordings", "errors.csv", "leads.csv",
             "recordings.csv", "privacy-holds", "stats/daily"]


async def _send_good_data(fetch: Fetch, tenant: Tenant) -> None:
    key = {"X-Service-Key": tenant.api_key}
    for kind, body in [
        ("pageviews", {"visitorId": "v-good", "url": PAGE, "occurredAt": "2026-11-20T10:00:00Z"}),
        ("leads", {"visitorId": "v-good", "email": "ada@example.com", "url": PAGE}),
        ("recordings/start", {"visitorId": "v-good", "url": PAGE}),
        ("errors", {"visitorId": "v-good", "source": "javascript", "type": "TypeError",
                    "message": "x is undefined", "url": PAGE}),
    ]:
        answer = await fetch(f"/ingest/{kind}", "POST", json_body=body, headers=key)
        assert answer.code in (200, 202), (kind, answer)


@pytest.mark.parametrize(("collection", "fields"), BROKEN_ROWS,
                         ids=[f"{c}-{n}" for n, (c, _) in enumerate(BROKEN_ROWS)])
async def test_a_broken_row_leaves_every_list_csv_and_export_answering(
        fetch: Fetch, tenant: Tenant, deps: Any, collection: str, fields: dict[str, Any]):
    await _send_good_data(fetch, tenant)
    join = getattr(deps.queue, "join", None)
    if join is not None:
        await join()
    await deps.store.collection(collection).insert_one(
        {"_id": f"broken-{collection}", "siteId": tenant.site_id, **fields})

    for listing in SITE_WIDE:
        answer = await fetch(f"/api/v1/sites/{tenant.site_id}/{listing}", token=tenant.token)
        assert answer.code == 200, (listing, answer)
        if listing.endswith(".csv"):
            rows = list(csv.reader(io.StringIO(answer.body.decode())))
            assert any(GOOD[listing.removesuffix(".csv")] in row for row in rows[1:]), rows
        elif listing in GOOD:
            items = answer.json()["items"]
            assert any(GOOD[listing] in item.values() for item in items), (listing, items)

    export = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/v-good/export.json",
                         token=tenant.token)
    assert export.code == 200, export
    assert "ada@example.com" in export.body.decode()
