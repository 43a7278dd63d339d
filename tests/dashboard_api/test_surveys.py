"""Surveys: definitions by role, what the loader gets, answers from the browser, results, CSV."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from documents import surveys
from tests.support.app import Fetch, Tenant

NPS = {"name": "Recommend us", "questionType": "score",
       "question": "How likely are you to recommend us?", "followUp": "What is the main reason?",
       "pages": ["/product/*"], "delaySeconds": 3, "samplingPercent": 50}


async def _create(fetch: Fetch, tenant: Tenant, body: dict[str, Any] | None = None
                  ) -> dict[str, Any]:
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/surveys", "POST", token=tenant.token,
                         json_body=body or NPS)
    assert answer.code == 201, answer
    return answer.json()


def _days_ago(days: int) -> str:
    """10:00 UTC `days` ago: answers are dated recently, as a client time over 30 days old is
    taken as the time of receipt."""
    return f"{(datetime.now(UTC) - timedelta(days=days)).date().isoformat()}T10:00:00Z"


async def _answer(ingest, survey_id: str, visitor: str, score: int | None, text: str | None = None,
                  *, at: str | None = None, url: str = "https://shop.example/product/mug"
                  ) -> None:
    answers: list[dict[str, Any]] = []
    if score is not None:
        answers.append({"question": NPS["question"], "score": score})
    if text is not None:
        answers.append({"question": NPS["followUp"], "text": text})
    await ingest("surveys", {"visitorId": visitor, "surveyId": survey_id, "answers": answers,
                             "url": url, "occurredAt": at or _days_ago(10)})


async def test_an_owner_creates_a_survey_with_defaults_and_the_creation_is_audited(
        fetch: Fetch, tenant: Tenant, deps):
    survey = await _create(fetch, tenant)
    assert survey["active"] is True and survey["trigger"] == "delay"
    assert survey["oncePerVisitor"] is True and survey["samplingPercent"] == 50
    assert survey["choices"] == []
    listed = await fetch(f"/api/v1/sites/{tenant.site_id}/surveys", token=tenant.token)
    assert [s["id"] for s in listed.json()] == [survey["id"]]
    assert await deps.store.collection("audit_log").find_one(
        {"action": "survey.created", "details.surveyId": survey["id"]}) is not None


async def test_a_viewer_reads_surveys_and_results_but_cannot_change_them(
        fetch: Fetch, tenant: Tenant, viewer_token: str):
    survey = await _create(fetch, tenant)
    base = f"/api/v1/sites/{tenant.site_id}/surveys"
    assert (await fetch(base, token=viewer_token)).code == 200
    assert (await fetch(f"{base}/{survey['id']}/results", token=viewer_token)).code == 200
    refused = await fetch(base, "POST", token=viewer_token, json_body=NPS)
    assert refused.code == 403 and refused.error_code == "role_required"
    assert (await fetch(f"{base}/{survey['id']}", "PATCH", token=viewer_token,
                        json_body={"active": False})).code == 403
    assert (await fetch(f"{base}/{survey['id']}", "DELETE", token=viewer_token)).code == 403
    assert (await fetch(f"{base}/{survey['id']}/answers.csv", token=viewer_token)).code == 403
    assert (await fetch(f"{base}/{survey['id']}", token=tenant.token)).json()["active"] is True


async def test_another_organization_sees_no_survey(fetch: Fetch, tenant: Tenant, make_tenant):
    survey = await _create(fetch, tenant)
    stranger = await make_tenant(name="other")
    for path in ("", f"/{survey['id']}", f"/{survey['id']}/results"):
        answer = await fetch(f"/api/v1/sites/{tenant.site_id}/surveys{path}",
                             token=stranger.token)
        assert answer.code == 404, path
    foreign = await fetch(f"/api/v1/sites/{stranger.site_id}/surveys/{survey['id']}",
                          token=stranger.token)
    assert foreign.code == 404


async def test_bad_definitions_are_refused_naming_the_field(fetch: Fetch, tenant: Tenant):
    base = f"/api/v1/sites/{tenant.site_id}/surveys"
    cases = [
        ({**NPS, "pages": ["/product #reviews"]}, "pages.0"),
        ({**NPS, "questionType": "choice", "followUp": None, "choices": ["Yes"]}, "choices"),
        ({**NPS, "questionType": "rating"}, "followUp"),
        ({**NPS, "samplingPercent": 0}, "samplingPercent"),
        ({**NPS, "pages": []}, "pages"),
        ({**NPS, "colour": "red"}, "colour"),
    ]
    for body, field in cases:
        answer = await fetch(base, "POST", token=tenant.token, json_body=body)
        assert answer.code == 422, (body, answer)
        assert answer.json()["error"]["field"] == field, (body, answer)
    assert (await fetch(base, token=tenant.token)).json() == []


async def test_a_change_is_saved_and_audited_by_field_name(fetch: Fetch, tenant: Tenant, deps):
    survey = await _create(fetch, tenant)
    path = f"/api/v1/sites/{tenant.site_id}/surveys/{survey['id']}"
    changed = await fetch(path, "PATCH", token=tenant.token,
                          json_body={"trigger": "exit", "pages": [" /product/* "],
                                     "active": False})
    assert changed.code == 200, changed
    assert changed.json()["trigger"] == "exit" and changed.json()["active"] is False
    entry = await deps.store.collection("audit_log").find_one({"action": "survey.changed"})
    assert entry["details"]["fields"] == ["active", "trigger"]
    assert (await fetch(path, "DELETE", token=tenant.token)).code == 204
    assert (await fetch(path, token=tenant.token)).code == 404


async def _stored(deps, tenant: Tenant) -> int:
    return await deps.store.collection(surveys.COLLECTION).count_documents(
        {"siteId": tenant.site_id})


async def test_racing_creations_all_count_and_stop_at_the_cap_where_a_delete_frees_a_slot(
        fetch: Fetch, tenant: Tenant, deps):
    base = f"/api/v1/sites/{tenant.site_id}/surveys"

    def six_at_once() -> Any:
        # On the wire store the six transactions really overlap.
        return asyncio.gather(*[fetch(base, "POST", token=tenant.token, json_body=NPS)
                                for _ in range(6)])

    first = await six_at_once()  # the site's first surveys: they also start its counter
    assert [answer.code for answer in first] == [201] * 6, first
    for _ in range(surveys.MAX_SURVEYS_PER_SITE - 2 - 6):
        await _create(fetch, tenant)
    racing = await six_at_once()  # for the last two slots
    assert sorted(answer.code for answer in racing) == [201, 201, 422, 422, 422, 422], racing
    assert {answer.error_code for answer in racing if answer.code == 422} == {
        "too_many_surveys"}
    assert await _stored(deps, tenant) == surveys.MAX_SURVEYS_PER_SITE

    created = next(answer.json()["id"] for answer in racing if answer.code == 201)
    assert (await fetch(f"{base}/{created}", "DELETE", token=tenant.token)).code == 204
    assert (await fetch(base, "POST", token=tenant.token, json_body=NPS)).code == 201
    refused = await fetch(base, "POST", token=tenant.token, json_body=NPS)
    assert refused.code == 422 and refused.error_code == "too_many_surveys"
    assert await _stored(deps, tenant) == surveys.MAX_SURVEYS_PER_SITE


async def test_a_site_whose_surveys_predate_the_counter_is_held_to_the_same_cap(
        fetch: Fetch, tenant: Tenant, deps):
    now = datetime.now(UTC)
    await deps.store.collection(surveys.COLLECTION).insert_many([
        {"_id": str(uuid.uuid4()), "siteId": tenant.site_id, **surveys.DEFAULTS, **NPS,
         "createdAt": now, "updatedAt": now} for _ in range(surveys.MAX_SURVEYS_PER_SITE)])
    base = f"/api/v1/sites/{tenant.site_id}/surveys"
    refused = await fetch(base, "POST", token=tenant.token, json_body=NPS)
    assert refused.code == 422 and refused.error_code == "too_many_surveys"
    oldest = (await fetch(base, token=tenant.token)).json()[-1]["id"]
    assert (await fetch(f"{base}/{oldest}", "DELETE", token=tenant.token)).code == 204
    assert (await fetch(base, "POST", token=tenant.token, json_body=NPS)).code == 201
    assert (await fetch(base, "POST", token=tenant.token, json_body=NPS)).code == 422
    assert await _stored(deps, tenant) == surveys.MAX_SURVEYS_PER_SITE


async def test_the_loader_carries_only_active_surveys_with_only_what_the_widget_needs(
        fetch: Fetch, tenant: Tenant):
    shown = await _create(fetch, tenant)
    hidden = await _create(fetch, tenant, {**NPS, "name": "Paused", "active": False})
    config = await fetch(f"/sdk/v1/{tenant.public_key}/config",
                         headers={"Origin": "https://shop.example"})
    assert config.code == 200, config
    surveys = config.json()["surveys"]
    assert [s["id"] for s in surveys] == [shown["id"]]
    assert hidden["id"] not in config.body.decode()
    assert surveys[0] == {"id": shown["id"], "pages": ["/product/*"], "type": "score",
                          "question": NPS["question"], "followUp": NPS["followUp"],
                          "choices": [], "trigger": "delay", "delay": 3, "sampling": 50,
                          "once": True}


async def test_answers_sent_by_the_browser_are_stored_with_the_page(
        fetch: Fetch, tenant: Tenant, deps):
    survey = await _create(fetch, tenant)
    answer = await fetch(f"/sdk/v1/{tenant.public_key}/surveys", "POST",
                         headers={"Origin": "https://shop.example", "Content-Type": "text/plain"},
                         body=json.dumps({"visitorId": "v-1", "sessionId": "s-1",
                                          "surveyId": survey["id"],
                                          "url": "https://shop.example/product/mug",
                                          "answers": [{"question": "Recommend?", "score": 10}]}))
    assert answer.code == 200, answer
    stored = await deps.store.collection("survey_responses").find_one({"_id": answer.json()["id"]})
    assert stored["visitorId"] == "v-1" and stored["url"] == "https://shop.example/product/mug"
    assert stored["answers"] == [{"question": "Recommend?", "score": 10}]
    refused = await fetch(f"/sdk/v1/{tenant.public_key}/surveys", "POST",
                          headers={"Origin": "https://elsewhere.example"},
                          json_body={"visitorId": "v-1", "surveyId": survey["id"],
                                     "answers": [{"question": "Recommend?", "score": 1}]})
    assert refused.code == 403
    gpc = await fetch(f"/sdk/v1/{tenant.public_key}/surveys", "POST",
                      headers={"Origin": "https://shop.example", "Sec-GPC": "1"},
                      json_body={"visitorId": "v-2", "surveyId": survey["id"],
                                 "answers": [{"question": "Recommend?", "score": 1}]})
    assert gpc.code == 204
    assert await deps.store.collection("survey_responses").count_documents({}) == 1


async def test_results_count_every_score_compute_nps_and_list_free_text_newest_first(
        fetch: Fetch, tenant: Tenant, ingest):
    survey = await _create(fetch, tenant)
    await _answer(ingest, survey["id"], "v-1", 10, "Great mugs", at=_days_ago(10))
    await _answer(ingest, survey["id"], "v-2", 9, at=_days_ago(9))
    await _answer(ingest, survey["id"], "v-3", 3, "Shipping was slow", at=_days_ago(8))
    await _answer(ingest, survey["id"], "v-4", 7, at=_days_ago(7))
    await _answer(ingest, survey["id"], "v-5", 42, at=_days_ago(20))  # off the scale
    results = (await fetch(f"/api/v1/sites/{tenant.site_id}/surveys/{survey['id']}/results",
                           token=tenant.token)).json()
    assert results["responses"] == 5
    counts = {row["value"]: row["count"] for row in results["distribution"]}
    assert list(counts) == list(range(11))
    assert (counts[10], counts[9], counts[7], counts[3], counts[0]) == (1, 1, 1, 1, 0)
    assert results["nps"] == 25  # two promoters, one detractor, of four on the scale
    texts = results["textAnswers"]
    assert [t["text"] for t in texts] == ["Shipping was slow", "Great mugs"]
    assert texts[0]["page"] == "/product/mug" and texts[0]["visitorId"] == "v-3"
    assert texts[0]["score"] == 3 and texts[0]["answeredAt"].startswith(_days_ago(8)[:10])


async def test_a_single_choice_counts_each_choice_and_a_rating_its_five_stars(
        fetch: Fetch, tenant: Tenant, ingest):
    choice = await _create(fetch, tenant, {"name": "Found us", "questionType": "choice",
                                           "question": "How did you find us?",
                                           "choices": ["Search", "Friend", "Ad"],
                                           "pages": ["/*"]})
    for visitor, picked in (("v-1", "Friend"), ("v-2", "Friend"), ("v-3", "Ad")):
        await ingest("surveys", {"visitorId": visitor, "surveyId": choice["id"],
                                 "answers": [{"question": "How did you find us?",
                                              "text": picked}]})
    results = (await fetch(f"/api/v1/sites/{tenant.site_id}/surveys/{choice['id']}/results",
                           token=tenant.token)).json()
    assert results["distribution"] == [{"value": "Search", "count": 0},
                                       {"value": "Friend", "count": 2},
                                       {"value": "Ad", "count": 1}]
    assert results["nps"] is None and results["textAnswers"] == []
    rating = await _create(fetch, tenant, {"name": "Stars", "questionType": "rating",
                                           "question": "Rate this page", "pages": ["/*"]})
    await ingest("surveys", {"visitorId": "v-1", "surveyId": rating["id"],
                             "answers": [{"question": "Rate this page", "score": 4}]})
    results = (await fetch(f"/api/v1/sites/{tenant.site_id}/surveys/{rating['id']}/results",
                           token=tenant.token)).json()
    assert [row["value"] for row in results["distribution"]] == [1, 2, 3, 4, 5]
    assert results["distribution"][3]["count"] == 1


async def test_a_free_text_answer_links_the_recording_running_when_it_was_given(
        fetch: Fetch, tenant: Tenant, ingest):
    survey = await _create(fetch, tenant)
    started = await ingest("recordings/start", {
        "visitorId": "v-1", "recordingId": "6f1c9a52-8d1e-4c7b-9a39-0d3c2b1a0f11",
        "url": "https://shop.example/product/mug"})
    await _answer(ingest, survey["id"], "v-1", 2, "Too expensive", at=_now_iso())
    await _answer(ingest, survey["id"], "v-2", 8, "No recording of me", at=_now_iso())
    results = (await fetch(f"/api/v1/sites/{tenant.site_id}/surveys/{survey['id']}/results",
                           token=tenant.token)).json()
    by_visitor = {t["visitorId"]: t for t in results["textAnswers"]}
    assert by_visitor["v-1"]["recordingId"] == started["id"]
    assert by_visitor["v-2"]["recordingId"] is None


def _now_iso() -> str:
    from datetime import UTC, datetime
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


async def test_the_answers_csv_is_formula_safe_and_leaves_out_restricted_visitors(
        fetch: Fetch, tenant: Tenant, ingest, deps):
    survey = await _create(fetch, tenant)
    await _answer(ingest, survey["id"], "v-1", 0, "=HYPERLINK(\"https://evil.example\")")
    await _answer(ingest, survey["id"], "v-hidden", 10, "Hide me", at=_days_ago(9))
    await ingest("visitors", {"visitorId": "v-hidden"})
    restricted = await fetch(
        f"/api/v1/sites/{tenant.site_id}/visitors/v-hidden/restriction", "PUT",
        token=tenant.token, json_body={"on": True})
    assert restricted.code == 200, restricted
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/surveys/{survey['id']}/answers.csv",
                         token=tenant.token)
    assert answer.code == 200, answer
    assert answer.headers["X-Export-Truncated"] == "false"
    rows = list(csv.reader(io.StringIO(answer.body.decode("utf-8"))))
    assert rows[0] == ["responseId", "answeredAt", "question", "score", "choice", "text", "page",
                       "url", "visitorId", "sessionId"]
    assert len(rows) == 2
    assert rows[1][5].startswith("'=HYPERLINK")
    assert rows[1][3] == "0" and rows[1][6] == "/product/mug" and rows[1][8] == "v-1"
    results = (await fetch(f"/api/v1/sites/{tenant.site_id}/surveys/{survey['id']}/results",
                           token=tenant.token)).json()
    assert results["responses"] == 1
