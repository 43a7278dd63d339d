"""Survey definitions per site, what the loader shows, and the results of their answers.

A survey asks one question: a 0–10 score (with an optional free-text follow-up), a 1–5
rating, or a single choice. It targets pages by the excluded-URL pattern syntax
(privacy/exclusion.py; the pattern check is passed in, as documents/ imports nothing of
privacy/), shows after a delay or on exit intent, to a sample of visitors, once per visitor
when asked. Answers arrive as ordinary survey responses (`survey_responses`, see
documents/engagement.py) and are summed up here. Decisions: docs/decisions.md, "Surveys".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from documents import engagement, recordings
from documents.accounts import new_id
from documents.store import ASCENDING, DESCENDING, Index, Store
from documents.visitors import restricted_visitor_ids
from errors import InvalidInput, NotFound

COLLECTION = "surveys"
#: One document per site: how many surveys it has, raised and lowered with them (the cap).
COUNTERS = "survey_counters"

INDEXES = [
    # The dashboard's list, newest first, and the loader's active surveys of a site.
    Index(COLLECTION, (("siteId", ASCENDING), ("createdAt", DESCENDING))),
    Index(COLLECTION, (("siteId", ASCENDING), ("active", ASCENDING), ("createdAt", DESCENDING))),
    # One counter per site, so two first creations cannot each start one.
    Index(COUNTERS, (("siteId", ASCENDING),), unique=True),
]

#: A site's surveys; the loader carries every active one, so the number stays small.
MAX_SURVEYS_PER_SITE = 50
#: Free-text answers shown per survey, newest first (the CSV has them all).
TEXT_ANSWERS_SHOWN = 50
#: A recording counts as "around the answer" when it was active this close to it.
RECORDING_SLACK = timedelta(minutes=30)

EDITABLE = ("name", "active", "questionType", "question", "followUp", "choices", "pages",
            "trigger", "delaySeconds", "samplingPercent", "oncePerVisitor")
DEFAULTS: dict[str, Any] = {"active": True, "followUp": None, "choices": [], "trigger": "delay",
                            "delaySeconds": 5, "samplingPercent": 100, "oncePerVisitor": True}

#: One row per response: the main answer's score or choice, and the free text given.
CSV_COLUMNS = ("responseId", "answeredAt", "question", "score", "choice", "text", "page", "url",
               "visitorId", "sessionId")

PatternCheck = Callable[[str], str]


def _checked(survey: dict[str, Any], check_pattern: PatternCheck) -> dict[str, Any]:
    """The definition with its patterns normalised; InvalidInput names what does not fit."""
    pages = []
    for index, pattern in enumerate(survey["pages"]):
        try:
            pages.append(check_pattern(pattern))
        except ValueError as exc:
            raise InvalidInput(str(exc), field=f"pages.{index}") from None
    kind = survey["questionType"]
    if kind == "choice" and len(survey.get("choices") or []) < 2:
        raise InvalidInput("a single-choice question needs at least two choices", field="choices")
    if kind != "choice" and survey.get("choices"):
        raise InvalidInput("only a single-choice question has choices", field="choices")
    if kind != "score" and survey.get("followUp"):
        raise InvalidInput("only a 0–10 score question has a follow-up", field="followUp")
    if len(set(survey.get("choices") or [])) != len(survey.get("choices") or []):
        raise InvalidInput("the choices must differ from each other", field="choices")
    return {**survey, "pages": pages}


def view(survey: dict[str, Any]) -> dict[str, Any]:
    """The dashboard's view of a definition."""
    return {"id": survey["_id"], **{name: survey.get(name, DEFAULTS.get(name))
                                   for name in EDITABLE},
            "createdAt": survey["createdAt"], "updatedAt": survey["updatedAt"]}


async def list_surveys(store: Store, site_id: str) -> list[dict[str, Any]]:
    """The site's surveys, newest first."""
    found = store.collection(COLLECTION).find({"siteId": site_id}).sort(
        [("createdAt", DESCENDING), ("_id", DESCENDING)]).limit(MAX_SURVEYS_PER_SITE)
    return [view(survey) async for survey in found]


async def find_survey(store: Store, site_id: str, survey_id: str, *, session: Any = None
                      ) -> dict[str, Any]:
    """One of the site's surveys; NotFound otherwise."""
    survey = await store.collection(COLLECTION).find_one({"_id": survey_id, "siteId": site_id},
                                                         session=session)
    if survey is None:
        raise NotFound("survey not found")
    return survey


async def create_survey(store: Store, site_id: str, body: dict[str, Any],
                        check_pattern: PatternCheck, *, session: Any = None) -> dict[str, Any]:
    """Store a new definition, in the caller's transaction; at most MAX_SURVEYS_PER_SITE per
    site."""
    await _take_slot(store, site_id, session)
    now = datetime.now(UTC)
    survey = {"_id": new_id(), "siteId": site_id, **DEFAULTS,
              **_checked({**DEFAULTS, **body}, check_pattern), "createdAt": now, "updatedAt": now}
    await store.collection(COLLECTION).insert_one(survey, session=session)
    return survey


async def _take_slot(store: Store, site_id: str, session: Any) -> None:
    """Raise the site's survey counter by one, or refuse when it is at the cap.

    One conditional `$inc` decides, so two creations racing for the last slot cannot both pass,
    as both could when each counted the surveys before inserting. It runs in the creation's
    transaction: a creation that fails later gives the slot back with the rest of its writes.
    """
    counters = store.collection(COUNTERS)
    if await counters.find_one({"siteId": site_id}, session=session) is None:
        # The site's first creation, or the first since the counter came: it starts at what
        # the site has. A creation starting it at the same time collides on the unique index
        # and, losing the write conflict, is run again by the driver. (An insert rather than an
        # upsert keeps `_id` first, as the embedded store's rollback writes a document back.)
        held = await store.collection(COLLECTION).count_documents({"siteId": site_id},
                                                                  session=session)
        await counters.insert_one({"_id": new_id(), "siteId": site_id, "count": held},
                                  session=session)
    taken = await counters.update_one(
        {"siteId": site_id, "count": {"$lt": MAX_SURVEYS_PER_SITE}}, {"$inc": {"count": 1}},
        session=session)
    if not taken.modified_count:
        raise InvalidInput(f"a site has at most {MAX_SURVEYS_PER_SITE} surveys; delete one first",
                           code="too_many_surveys")


async def update_survey(store: Store, site_id: str, survey_id: str, changes: dict[str, Any],
                        check_pattern: PatternCheck, *, session: Any = None
                        ) -> tuple[dict[str, Any], list[str]]:
    """Apply changes to a definition: the new survey and the names of the changed fields."""
    survey = await find_survey(store, site_id, survey_id, session=session)
    merged = _checked({**DEFAULTS, **survey, **changes}, check_pattern)
    changed = sorted(name for name in changes if survey.get(name) != merged[name])
    if changed:
        merged["updatedAt"] = datetime.now(UTC)
        await store.collection(COLLECTION).update_one(
            {"_id": survey_id, "siteId": site_id},
            {"$set": {**{name: merged[name] for name in changed},
                      "updatedAt": merged["updatedAt"]}}, session=session)
    return merged, changed


async def delete_survey(store: Store, site_id: str, survey_id: str, *,
                        session: Any = None) -> None:
    """Delete a definition and give its slot back; its answers stay (they are the visitors'
    data, erased with them)."""
    result = await store.collection(COLLECTION).delete_one({"_id": survey_id, "siteId": site_id},
                                                           session=session)
    if not result.deleted_count:
        raise NotFound("survey not found")
    await store.collection(COUNTERS).update_one({"siteId": site_id}, {"$inc": {"count": -1}},
                                                session=session)


async def widget_surveys(store: Store, site_id: str) -> list[dict[str, Any]]:
    """The active surveys as the loader and the widget need them, and nothing more."""
    found = store.collection(COLLECTION).find({"siteId": site_id, "active": True}).sort(
        [("createdAt", DESCENDING), ("_id", DESCENDING)]).limit(MAX_SURVEYS_PER_SITE)
    return [{"id": survey["_id"], "pages": survey["pages"], "type": survey["questionType"],
             "question": survey["question"], "followUp": survey.get("followUp"),
             "choices": survey.get("choices") or [], "trigger": survey["trigger"],
             "delay": survey["delaySeconds"], "sampling": survey["samplingPercent"],
             "once": survey["oncePerVisitor"]} async for survey in found]


# Results ---------------------------------------------------------------------------------


async def _answers_filter(store: Store, site_id: str, survey_id: str) -> dict[str, Any]:
    """A survey's answers, without those of restricted visitors (hidden in the dashboard)."""
    filter_: dict[str, Any] = {"siteId": site_id, "surveyId": survey_id}
    restricted = await restricted_visitor_ids(store, site_id)
    if restricted:
        filter_["visitorId"] = {"$nin": restricted}
    return filter_


def _main_answer(response: dict[str, Any]) -> dict[str, Any]:
    answers = response.get("answers") or [{}]
    return answers[0]


def _free_text(response: dict[str, Any]) -> str | None:
    texts = [a["text"] for a in response.get("answers") or [] if a.get("text")]
    return "\n".join(texts) if texts else None


def net_promoter_score(distribution: dict[int, int]) -> int | None:
    """NPS: the share of 9–10 minus the share of 0–6, in whole percent; None without answers."""
    total = sum(distribution.values())
    if not total:
        return None
    promoters = sum(n for score, n in distribution.items() if score >= 9)
    detractors = sum(n for score, n in distribution.items() if score <= 6)
    return round(100 * (promoters - detractors) / total)


async def _recording_around(store: Store, site_id: str, response: dict[str, Any]
                            ) -> str | None:
    """The visitor's recording that was running when the answer was given, if any."""
    if not response.get("visitorId") or not response.get("answeredAt"):
        return None
    at = response["answeredAt"]
    recording = await recordings.last_started_by(store, site_id, response["visitorId"], at)
    if recording is None:
        return None
    last = recording.get("endedAt") or recording.get("lastActivityAt") or recording["startedAt"]
    return recording["_id"] if last >= at - RECORDING_SLACK else None


def _page(url: str | None) -> str | None:
    if not url:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    return parts.path or "/"


async def survey_results(store: Store, site_id: str, survey_id: str) -> dict[str, Any]:
    """Counts per score or choice, NPS for 0–10, and the newest free-text answers."""
    survey = await find_survey(store, site_id, survey_id)
    filter_ = await _answers_filter(store, site_id, survey_id)
    if survey["questionType"] == "choice":
        buckets: list[Any] = list(survey.get("choices") or [])
    else:
        low, high = (0, 10) if survey["questionType"] == "score" else (1, 5)
        buckets = list(range(low, high + 1))
    counts: Counter[Any] = Counter()
    total = 0
    texts: list[dict[str, Any]] = []
    cursor = engagement.survey_answers(store, filter_)
    async for response in cursor:
        total += 1
        main = _main_answer(response)
        key = main.get("score") if survey["questionType"] != "choice" else main.get("text")
        # A value off the scale, or a choice since renamed, counts as a response only.
        if key in buckets:
            counts[key] += 1
        text = _free_text(response) if survey["questionType"] != "choice" else None
        if text and len(texts) < TEXT_ANSWERS_SHOWN:
            texts.append({"responseId": response["_id"], "text": text,
                          "score": main.get("score"), "url": response.get("url"),
                          "page": _page(response.get("url")),
                          "answeredAt": response.get("answeredAt"),
                          "visitorId": response.get("visitorId"),
                          "recordingId": await _recording_around(store, site_id, response)})
    distribution = [{"value": value, "count": counts.get(value, 0)} for value in buckets]
    nps = None
    if survey["questionType"] == "score":
        nps = net_promoter_score(dict(counts))
    return {"survey": view(survey), "responses": total, "distribution": distribution,
            "nps": nps, "textAnswers": texts}


async def count_answer_rows(store: Store, site_id: str, survey_id: str, *, up_to: int) -> int:
    """How many rows the answers' CSV has (one per response), counting no further than up_to."""
    await find_survey(store, site_id, survey_id)
    return await engagement.count_survey_answers(
        store, await _answers_filter(store, site_id, survey_id), up_to=up_to)


async def answer_rows(store: Store, site_id: str, survey_id: str, *, limit: int
                      ) -> AsyncIterator[list[Any]]:
    """The answers' CSV rows (CSV_COLUMNS), newest first, one per response."""
    survey = await find_survey(store, site_id, survey_id)
    cursor = engagement.survey_answers(
        store, await _answers_filter(store, site_id, survey_id)).limit(limit)
    async for response in cursor:
        main = _main_answer(response)
        answered = response.get("answeredAt")
        choice = main.get("text") if survey["questionType"] == "choice" else None
        yield [response["_id"], answered,
               main.get("question"), main.get("score"), choice,
               None if choice is not None else _free_text(response),
               _page(response.get("url")), response.get("url"), response.get("visitorId"),
               response.get("sessionId")]
