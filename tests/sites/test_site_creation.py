"""Creating a site from the dashboard (issue 43 point 3): its time zone is an IANA name, kept
as `settings.timeZone`, which the figures read (documents.sites.time_zone)."""

from __future__ import annotations

from documents import sites
from tests.support.app import Fetch, Tenant


async def test_a_new_site_keeps_an_iana_time_zone_and_refuses_an_unknown_one(
        fetch: Fetch, tenant: Tenant, deps):
    unknown = await fetch("/api/v1/sites", "POST", token=tenant.token, json_body={
        "name": "Moon shop", "settings": {"timeZone": "Mars/Olympus"}})
    assert unknown.code == 422 and unknown.json()["error"]["field"] == "settings.timeZone"
    created = await fetch("/api/v1/sites", "POST", token=tenant.token, json_body={
        "name": "Berlin shop", "allowedOrigins": ["https://berlin.example"],
        "settings": {"timeZone": "Europe/Berlin"}})
    assert created.code == 201
    site_id = created.json()["id"]
    read = (await fetch(f"/api/v1/sites/{site_id}", token=tenant.token)).json()
    assert read["settings"]["timeZone"] == "Europe/Berlin"
    stored = await sites.find_site(deps.store, site_id)
    assert str(sites.time_zone(stored)) == "Europe/Berlin"
