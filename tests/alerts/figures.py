"""Small factories that write the figures the alert rules read, as the fold and ingest do."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from derived import daily_figures, journeys
from documents import commerce, engagement, error_records, leads
from tests.support.app import Fetch, Tenant


async def rule(fetch: Fetch, tenant: Tenant, kind: str, params: dict[str, Any] | None = None,
               **fields: Any) -> dict[str, Any]:
    """Create a rule through the API."""
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/alert-rules", "POST",
                         token=tenant.token,
                         json_body={"kind": kind, "name": kind, "params": params or {},
                                    **fields})
    assert answer.code == 201, answer
    return answer.json()


async def rule_state(fetch: Fetch, tenant: Tenant, rule_id: str) -> dict[str, Any]:
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/alert-rules/{rule_id}",
                         token=tenant.token)
    return answer.json()["evaluation"]


async def occurrences(store: Any, site_id: str, error_id: str, at: datetime, count: int, *,
                      page: str = "/product/1", sessions: int | None = None) -> None:
    """`count` occurrences of an error at `at`, over `sessions` sessions (one each by default)."""
    spread = sessions or count
    await store.collection(error_records.OCCURRENCES).insert_many([
        {"_id": str(uuid.uuid4()), "siteId": site_id, "errorId": error_id,
         "sessionId": f"s-{error_id}-{n % spread}", "visitorId": None, "page": page,
         "occurredAt": at} for n in range(count)])


async def stage_sessions(store: Any, site_id: str, day: str, sessions: int, converted: int
                         ) -> None:
    """A day's sessions that reached no shop step, `converted` of them paid."""
    for value, count in (("00", sessions - converted), ("01", converted)):
        doc_id = daily_figures.session_day_id(site_id, day, journeys.STAGE, value)
        await store.collection(daily_figures.SESSION_DAYS).update_one(
            {"_id": doc_id},
            {"$set": {"siteId": site_id, "day": day, "dimension": journeys.STAGE,
                      "value": value, "sessions": count}}, upsert=True)


async def error_hits(store: Any, site_id: str, day: str, error_id: str, sessions: int) -> None:
    """`sessions` sessions hit by the error at no shop step, none of them paid."""
    _, outcome = journeys.split_hit(f"0000:{error_id}")
    await store.collection(daily_figures.SESSION_DAYS).insert_one({
        "_id": daily_figures.session_day_id(site_id, day, journeys.ERROR_HIT, error_id),
        "siteId": site_id, "day": day, "dimension": journeys.ERROR_HIT, "value": error_id,
        "sessions": sessions, journeys.HITS: {outcome.partition(".")[2]: sessions}})


async def paid_order(store: Any, site_id: str, paid_at: datetime) -> None:
    order_id = str(uuid.uuid4())
    await store.collection(commerce.ORDERS).insert_one({
        "_id": commerce.order_id(site_id, order_id), "siteId": site_id, "orderId": order_id,
        "status": "paid", "currency": "EUR", "total": 4000, "refunded": 0, "figure": [],
        "placedAt": paid_at - timedelta(minutes=2), "paidAt": paid_at, "updatedAt": paid_at})


async def lead(store: Any, site_id: str, at: datetime) -> str:
    lead_id = str(uuid.uuid4())
    await store.collection(leads.COLLECTION).insert_one({
        "_id": lead_id, "siteId": site_id, "visitorId": "v-lead", "name": "Ada Lovelace",
        "email": "ada@example.com", "createdAt": at})
    return lead_id


async def survey_answer(store: Any, site_id: str, at: datetime, score: int) -> str:
    answer_id = str(uuid.uuid4())
    await store.collection(engagement.SURVEY_RESPONSES).insert_one({
        "_id": answer_id, "siteId": site_id, "surveyId": str(uuid.uuid4()),
        "visitorId": "v-survey", "answeredAt": at, "answers": [{"score": score}]})
    return answer_id
