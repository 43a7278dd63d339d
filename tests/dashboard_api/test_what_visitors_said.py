"""What a visitor said on their profile (issue 41 point 9): their chat messages and survey
answers, sent through the real ingest endpoints, newest first, under the profile's privacy rules.

The shop (minutes before now):

| at | what                                                             | on ada's profile |
|----|------------------------------------------------------------------|------------------|
| 60 | chat t1 (ada): visitor "Is the mug dishwasher safe?"             | yes              |
| 59 | chat t1: agent "Yes, up to 60 °C."                               | no: not hers     |
| 58 | chat t1: visitor "Thanks!"                                       | yes              |
| 30 | survey r1 (ada) on /product/mug: score 9, then "Fast delivery"   | yes, two answers |
| 20 | chat t3 (bob, with ada's e-mail): visitor "I am bob"             | no: bob's        |
| 15 | survey r2 (bob): score 2                                         | no               |
| 10 | chat t2 (no visitor, her lead's e-mail): visitor "Where is it?"  | yes              |
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from derived import store_setup
from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest

SHOP = "https://shop.example"
NOW = datetime.now(UTC).replace(microsecond=0)
QUESTION = "How likely are you to recommend us?"
FOLLOW_UP = "What is the main reason?"


def _ago(minutes: int) -> str:
    return (NOW - timedelta(minutes=minutes)).isoformat()


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def _seed(ingest: Ingest) -> None:
    await ingest("pageviews", {"visitorId": "ada", "url": f"{SHOP}/", "occurredAt": _ago(90)})
    await ingest("leads", {"visitorId": "ada", "email": "Ada@Example.com", "name": "Ada",
                           "occurredAt": _ago(80)})
    await ingest("pageviews", {"visitorId": "bob", "url": f"{SHOP}/", "occurredAt": _ago(25)})
    await ingest("chats", {"transcriptId": "t1", "visitorId": "ada", "messages": [
        {"from": "visitor", "text": "Is the mug dishwasher safe?", "at": _ago(60)},
        {"from": "agent", "text": "Yes, up to 60 °C.", "at": _ago(59)},
        {"from": "visitor", "text": "Thanks!", "at": _ago(58)}]})
    await ingest("surveys", {"responseId": "r1", "visitorId": "ada", "surveyId": "nps",
                             "url": f"{SHOP}/product/mug", "occurredAt": _ago(30),
                             "answers": [{"question": QUESTION, "score": 9},
                                         {"question": FOLLOW_UP, "text": "Fast delivery"}]})
    await ingest("chats", {"transcriptId": "t3", "visitorId": "bob",
                           "emails": ["ada@example.com"],
                           "messages": [{"from": "visitor", "text": "I am bob", "at": _ago(20)}]})
    await ingest("surveys", {"responseId": "r2", "visitorId": "bob", "surveyId": "nps",
                             "url": f"{SHOP}/", "occurredAt": _ago(15),
                             "answers": [{"question": QUESTION, "score": 2}]})
    await ingest("chats", {"transcriptId": "t2", "emails": ["ada@example.com"], "messages": [
        {"from": "visitor", "text": "Where is it?", "at": _ago(10)}]})


def _profile(tenant: Tenant, visitor: str = "ada") -> str:
    return f"/api/v1/sites/{tenant.site_id}/visitors/{visitor}"


def _said(item: dict[str, Any]) -> tuple[Any, ...]:
    return (item["kind"], item["at"] and _instant(item["at"]), item["page"], item["question"],
            item["score"], item["text"])


async def test_the_profile_shows_what_the_visitor_said_newest_first(
        fetch: Fetch, tenant: Tenant, ingest: Ingest, viewer_token: str):
    await _seed(ingest)
    # A viewer reads it as they read the rest of the profile.
    answer = await fetch(_profile(tenant), token=viewer_token)
    assert answer.code == 200, answer
    said = answer.json()["said"]
    at = {minutes: NOW - timedelta(minutes=minutes) for minutes in (10, 30, 58, 60)}
    assert [_said(item) for item in said] == [
        ("chat", at[10], None, None, None, "Where is it?"),
        ("survey", at[30], "/product/mug", QUESTION, 9, None),
        ("survey", at[30], "/product/mug", FOLLOW_UP, None, "Fast delivery"),
        ("chat", at[58], None, None, None, "Thanks!"),
        ("chat", at[60], None, None, None, "Is the mug dishwasher safe?"),
    ]
    assert [item.get("transcriptId") or item.get("responseId") for item in said] == [
        "t2", "r1", "r1", "t1", "t1"]
    assert said[1]["url"] == f"{SHOP}/product/mug" and said[1]["surveyId"] == "nps"
    # Bob's own profile has his words only.
    bob = (await fetch(_profile(tenant, "bob"), token=tenant.token)).json()["said"]
    assert [_said(item)[-1] for item in bob] == [None, "I am bob"]
    assert [item["score"] for item in bob] == [2, None]


async def test_the_profile_shows_the_newest_fifty_things_said(
        fetch: Fetch, tenant: Tenant, ingest: Ingest):
    await ingest("pageviews", {"visitorId": "ada", "url": f"{SHOP}/", "occurredAt": _ago(200)})
    await ingest("chats", {"visitorId": "ada", "messages": [
        {"from": "visitor", "text": f"message {n}", "at": _ago(100 - n)} for n in range(60)]})
    said = (await fetch(_profile(tenant), token=tenant.token)).json()["said"]
    assert [item["text"] for item in said] == [f"message {n}" for n in range(59, 9, -1)]


async def test_an_erased_visitor_said_nothing_even_when_they_come_back(
        fetch: Fetch, tenant: Tenant, ingest: Ingest):
    await _seed(ingest)
    erased = await fetch(f"{_profile(tenant)}/data", "DELETE", token=tenant.token)
    assert erased.code == 200, erased
    assert (await fetch(_profile(tenant), token=tenant.token)).code == 404
    await ingest("pageviews", {"visitorId": "ada", "url": f"{SHOP}/", "occurredAt": _ago(1)})
    back = await fetch(_profile(tenant), token=tenant.token)
    assert back.code == 200, back
    assert back.json()["said"] == []
    # Bob keeps his survey answer; his transcript carrying ada's e-mail went with her data, as
    # erasure finds transcripts by her addresses too (privacy/subject_data.py).
    bob = (await fetch(_profile(tenant, "bob"), token=tenant.token)).json()["said"]
    assert [(item["kind"], item["score"]) for item in bob] == [("survey", 2)]


async def test_a_restricted_visitors_words_are_not_readable(
        fetch: Fetch, tenant: Tenant, ingest: Ingest, viewer_token: str):
    await _seed(ingest)
    held = await fetch(f"{_profile(tenant)}/restriction", "PUT", token=tenant.token,
                       json_body={"on": True})
    assert held.code == 200, held
    for token in (tenant.token, viewer_token):
        answer = await fetch(_profile(tenant), token=token)
        assert answer.code == 404
        assert b"dishwasher" not in answer.body and b"Fast delivery" not in answer.body


def test_a_visitors_newest_answers_and_transcripts_are_read_by_a_declared_index():
    declared = {(index.collection, tuple(field for field, _ in index.keys))
                for index in store_setup.declared_indexes()}
    assert ("survey_responses", ("siteId", "visitorId", "answeredAt")) in declared
    assert ("chat_transcripts", ("siteId", "visitorId", "startedAt")) in declared
