"""Dashboard changes and their audit entries land together or not at all.

The same drill as tests/hardening/test_partial_writes.py, for every dashboard write: the store
fails at each of the request's writes in turn, the answer is 503, nothing is left behind (no
change without its audit entry or request-log entry, no audit entry for a change that did not
happen), and the retry does it all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.hardening.test_partial_writes import PAGE, WritePath, _ingest, assert_all_or_nothing
from tests.support.app import Answer, Fetch, Tenant
from tests.support.faulty_store import FaultPlan


def _dashboard(method: str, path: Callable[[Tenant, int], str],
               body: Callable[[int], dict[str, Any]] | None = None
               ) -> Callable[[Fetch, Tenant, int], Awaitable[Answer]]:
    async def send(fetch: Fetch, tenant: Tenant, n: int) -> Answer:
        kwargs: dict[str, Any] = {"json_body": body(n)} if body is not None else {}
        return await fetch(path(tenant, n), method, token=tenant.token, **kwargs)
    return send


ERROR_ID = "5d1f0c3e-7a2b-4c8d-9e0f-112233445566"


def _site(tenant: Tenant, suffix: str = "") -> str:
    return f"/api/v1/sites/{tenant.site_id}{suffix}"


_lead = _ingest("leads", lambda n: {"visitorId": f"v-{n}", "leadId": f"lead-{n}",
                                    "email": f"ada{n}@example.com", "name": "Ada", "url": PAGE})
_visit = _ingest("pageviews", lambda n: {"visitorId": f"v-{n}", "url": PAGE})

PATHS = [
    WritePath("create a site", _dashboard("POST", lambda t, n: "/api/v1/sites",
                                          lambda n: {"name": f"Shop {n}"})),
    WritePath("change a site", _dashboard("PATCH", lambda t, n: _site(t),
                                          lambda n: {"name": f"Shop {n}"})),
    WritePath("rotate the API key", _dashboard("POST", lambda t, n: _site(t, "/api-key/rotate"))),
    WritePath("rectify a lead", _dashboard(
        "PATCH", lambda t, n: _site(t, f"/leads/lead-{n}"),
        lambda n: {"name": f"Ada Lovelace {n}", "email": f"ada.l{n}@example.com"}),
        prepare=_lead, logged_request=True),
    WritePath("restrict a visitor", _dashboard(
        "PUT", lambda t, n: _site(t, f"/visitors/v-{n}/restriction"), lambda n: {"on": True}),
        prepare=_visit, logged_request=True),
    WritePath("record an objection", _dashboard(
        "PUT", lambda t, n: _site(t, f"/visitors/v-{n}/objection"), lambda n: {"on": True}),
        prepare=_visit, logged_request=True),
    WritePath("erase a visitor", _dashboard(
        "DELETE", lambda t, n: _site(t, f"/visitors/v-{n}/data")),
        prepare=_lead, logged_request=True),
    WritePath("change the notification channels", _dashboard(
        "PUT", lambda t, n: _site(t, "/notifications"),
        lambda n: {"email": {"enabled": bool(n % 2), "recipients": [f"ops{n}@example.com"],
                             "from": "alerts@example.com", "smtpHost": "127.0.0.1",
                             "smtpPort": 2525}})),
]


@pytest.mark.parametrize("path", PATHS, ids=[path.name for path in PATHS])
async def test_a_store_failure_at_any_dashboard_write_leaves_all_of_it_or_none(
        fetch: Fetch, tenant: Tenant, deps: Any, faults: FaultPlan, path: WritePath):
    await assert_all_or_nothing(fetch, tenant, deps, faults, path)


SURVEY = {"name": "Recommend us", "questionType": "score",
          "question": "How likely are you to recommend us?", "pages": ["/product/*"]}


async def _survey_id(fetch: Fetch, tenant: Tenant, n: int) -> str:
    """The id of survey n, created on first use."""
    listed = (await fetch(_site(tenant, "/surveys"), token=tenant.token)).json()
    named = {survey["name"]: survey["id"] for survey in listed}
    if f"Survey {n}" not in named:
        created = await fetch(_site(tenant, "/surveys"), "POST", token=tenant.token,
                              json_body={**SURVEY, "name": f"Survey {n}"})
        return created.json()["id"]
    return named[f"Survey {n}"]


def _on_survey(method: str, body: dict[str, Any] | None = None
               ) -> Callable[[Fetch, Tenant, int], Awaitable[Answer]]:
    async def send(fetch: Fetch, tenant: Tenant, n: int) -> Answer:
        path = _site(tenant, f"/surveys/{await _survey_id(fetch, tenant, n)}")
        kwargs: dict[str, Any] = {"json_body": body} if body is not None else {}
        return await fetch(path, method, token=tenant.token, **kwargs)
    return send


async def _make_survey(fetch: Fetch, tenant: Tenant, n: int) -> Answer:
    await _survey_id(fetch, tenant, n)
    return await fetch(_site(tenant, "/surveys"), token=tenant.token)


SURVEY_PATHS = [
    WritePath("create a survey", _dashboard("POST", lambda t, n: _site(t, "/surveys"),
                                            lambda n: {**SURVEY, "name": f"New survey {n}"})),
    WritePath("change a survey", _on_survey("PATCH", {"question": "Would you recommend us?"}),
              prepare=_make_survey),
    WritePath("delete a survey", _on_survey("DELETE"), prepare=_make_survey),
]


@pytest.mark.parametrize("path", SURVEY_PATHS, ids=[path.name for path in SURVEY_PATHS])
async def test_a_survey_definition_and_its_audit_entry_land_together_or_not_at_all(
        fetch: Fetch, tenant: Tenant, deps: Any, faults: FaultPlan, path: WritePath):
    await assert_all_or_nothing(fetch, tenant, deps, faults, path)


async def test_an_error_status_change_and_its_audit_entry_land_together_or_not_at_all(
        fetch: Fetch, tenant: Tenant, deps: Any, faults: FaultPlan):
    # An error record as the worker stores it, written here so no background job runs during
    # the drill.
    await deps.store.collection("errors").insert_one({
        "_id": ERROR_ID, "siteId": tenant.site_id, "type": "TypeError", "message": "x",
        "source": "javascript", "status": "open", "occurrenceCount": 1})
    await assert_all_or_nothing(fetch, tenant, deps, faults, WritePath(
        "change an error's status", _dashboard(
            "PATCH", lambda t, n: _site(t, f"/errors/{ERROR_ID}"),
            lambda n: {"status": "resolved" if n % 2 else "ignored"})))
