"""After every kind of ingest, a search, an export and an erasure: what the store and the logs hold.

No stored document holds a visitor's full IPv4 or IPv6 address (privacy rule 1), and no log
record, with all its `extra` fields, holds a full address, an e-mail address or a search query:
logs outlive erasure (spec §4.3), so they carry only our own record ids and counts.
"""

from __future__ import annotations

import logging
import re

from tests.support.app import Fetch, Tenant, all_documents_text
from tests.support.visitor_data import seed_visitor

FULL_V4 = "198.51.100.23"
FULL_V6 = "2001:db8:abcd:12:3456:789a:bcde:f012"
EMAIL = "ada.lovelace@example.com"
SEARCH = "lovelace-search-term"
EMAIL_PATTERN = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")


def _everything_logged(caplog) -> str:
    return "\n".join(repr(vars(record)) + record.getMessage() for record in caplog.records)


async def test_no_full_address_is_stored_and_no_address_email_or_search_is_logged(
        fetch: Fetch, tenant: Tenant, deps, caplog):
    caplog.set_level(logging.DEBUG)
    seeded = await seed_visitor(fetch, tenant, deps, email=EMAIL, full_ip=FULL_V4)
    await seed_visitor(fetch, tenant, deps, visitor_id="grace-2", email="grace@example.com",
                       full_ip=FULL_V6)
    key = {"X-Service-Key": tenant.api_key}
    for body in ({"visitorId": "v-3", "url": f"https://shop.example/?from={FULL_V4}",
                  "referrer": f"http://[{FULL_V6}]/", "ip": FULL_V6},
                 {"visitorId": "v-4", "url": "https://shop.example/", "ip": f" {FULL_V4} "}):
        answer = await fetch("/ingest/pageviews", "POST", json_body=body, headers=key)
        assert answer.code == 200, answer
    searched = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors?q={SEARCH}",
                           token=tenant.token)
    assert searched.code == 200, searched
    by_email = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors?q={EMAIL}",
                           token=tenant.token)
    assert by_email.code == 200, by_email
    export = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/{seeded.visitor_id}"
                         "/export.json", token=tenant.token)
    assert export.code == 200, export
    erased = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors/{seeded.visitor_id}/data",
                         "DELETE", token=tenant.token)
    assert erased.code == 200, erased
    await deps.queue.join()  # type: ignore[attr-defined]  # the embedded queue

    stored = await all_documents_text(deps.store)
    assert FULL_V4 not in stored and FULL_V6 not in stored
    assert "198.51.100.0" in stored and "2001:db8:abcd::" in stored  # the anonymised forms
    logged = _everything_logged(caplog)
    assert caplog.records, "nothing was logged: the scan would prove nothing"
    for needle in (FULL_V4, FULL_V6, SEARCH, seeded.visitor_id, "grace-2"):
        assert needle not in logged, needle
    assert EMAIL_PATTERN.findall(logged) == [], EMAIL_PATTERN.findall(logged)[:3]
