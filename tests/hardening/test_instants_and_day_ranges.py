"""Instants and day ranges at the calendar's edges (issue 38 point 5): a time that leaves the
years 1 to 9999 once its UTC offset is applied, and a day range outside 1970-01-01..9998-12-31
(`charts.FIRST_DAY`, `charts.LAST_DAY`), are a 422 naming the field, never a 500 from an
OverflowError. Hypothesis checks the two parsers over any input; the routes are checked at
the edges."""

from __future__ import annotations

import base64
import gzip
import json
import uuid
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import server
from derived.views import charts
from errors import InvalidInput
from ingest.intake import MAX_FUTURE_SKEW, MAX_PAST_AGE, parse_time
from tests.support.app import Fetch, Tenant

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
BEFORE_YEAR_ONE = "0001-01-01T00:00:00+05:00"
AFTER_YEAR_9999 = "9999-12-31T23:59:59-05:00"

#: Any offset a time may carry (Python's limit: under a day either way).
offsets = st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1).map(
    lambda minutes: timezone(timedelta(minutes=minutes)))
#: Times as a client may spell them: any calendar moment, with an offset, "Z" or none.
spelled_times = st.one_of(
    st.builds(lambda moment, zone: moment.replace(tzinfo=zone).isoformat(),
              st.datetimes(), offsets),
    st.datetimes().map(lambda moment: moment.isoformat() + "Z"),
    st.datetimes().map(datetime.isoformat),
    st.text(max_size=40),
)


@given(spelled_times)
@example(BEFORE_YEAR_ONE)
@example(AFTER_YEAR_9999)
@example("0001-01-01T00:00:00-05:00")
@example("9999-12-31T23:59:59+05:00")
def test_a_client_time_is_an_instant_near_now_or_a_refusal_naming_its_field(text: str):
    try:
        parsed = parse_time(text, NOW, field="items.3.at")
    except InvalidInput as refused:
        assert refused.field == "items.3.at"
        # Only a time no instant can hold is refused: it leaves the calendar in UTC.
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        with pytest.raises(OverflowError):
            moment.astimezone(UTC)
        return
    assert parsed.utcoffset() == timedelta(0)
    assert NOW - MAX_PAST_AGE <= parsed <= NOW + MAX_FUTURE_SKEW


days = st.one_of(st.dates().map(date.isoformat), st.text(max_size=12), st.none())


@given(days, days)
@example("0001-01-01", "0001-01-02")
@example("9999-12-30", "9999-12-31")
@example(None, "0001-01-01")
@example("1970-01-01", "1970-01-01")
@example("9998-12-31", "9998-12-31")
def test_a_day_range_is_within_the_supported_span_or_a_refusal_naming_from_or_to(
        start: str | None, end: str | None):
    today = NOW.date()
    try:
        first, last = charts.chart_range(start, end, today)
    except InvalidInput as refused:
        assert refused.field in ("from", "to")
        return
    assert charts.FIRST_DAY <= first <= last <= charts.LAST_DAY
    assert (last - first).days < charts.MAX_CHART_DAYS
    # What the reports work out from a range exists: the period of the same length before
    # it, and the instant after its last day.
    length = last - first + timedelta(days=1)
    assert first - length >= date.min
    assert datetime(last.year, last.month, last.day, tzinfo=UTC) + timedelta(days=1)


#: Routes that read a day range (the recordings list as filters).
RANGE_ROUTES = ["overview", "stats/daily", "error-trends", "heatmaps", "revenue-at-risk/pages",
                "recordings"]


@pytest.mark.parametrize("route", RANGE_ROUTES)
@pytest.mark.parametrize("query, field", [
    ("from=0001-01-01&to=0001-01-02", "from"),
    ("from=9999-12-30&to=9999-12-31", "from"),
    ("to=0001-01-01", "to"),
    ("from=1969-12-31&to=1970-01-02", "from"),
    ("from=9998-12-31&to=9999-01-01", "to"),
])
async def test_a_day_range_outside_the_span_is_refused_naming_the_field(
        fetch: Fetch, tenant: Tenant, route: str, query: str, field: str):
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/{route}?{query}", token=tenant.token)
    assert answer.code == 422, answer
    assert answer.json()["error"]["field"] == field


@pytest.mark.parametrize("route", [*RANGE_ROUTES, "visitors"])
@pytest.mark.parametrize("query", ["from=1970-01-01&to=1970-01-31",
                                   "from=9998-12-01&to=9998-12-31"])
async def test_the_first_and_last_days_of_the_span_answer(
        fetch: Fetch, tenant: Tenant, route: str, query: str):
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/{route}?{query}", token=tenant.token)
    assert answer.code == 200, answer


@pytest.mark.parametrize("name", ["firstSeenFrom", "firstSeenTo", "lastSeenFrom", "lastSeenTo"])
async def test_a_visitor_filter_day_outside_the_span_is_refused_naming_it(
        fetch: Fetch, tenant: Tenant, name: str):
    for day in ("0001-01-01", "9999-12-31"):
        answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors?{name}={day}",
                             token=tenant.token)
        assert answer.code == 422, answer
        assert answer.json()["error"]["field"] == name


def _key(tenant: Tenant) -> dict[str, str]:
    return {"X-Service-Key": tenant.api_key}


@pytest.mark.parametrize("path, body, field", [
    ("/ingest/pageviews", {"visitorId": "ada", "url": "https://shop.example/",
                           "occurredAt": BEFORE_YEAR_ONE}, "occurredAt"),
    ("/ingest/commerce", {"eventId": "e1", "type": "order_placed", "orderId": "1",
                          "total": "1.00", "currency": "EUR",
                          "occurredAt": BEFORE_YEAR_ONE}, "occurredAt"),
    ("/ingest/errors", {"source": "javascript", "type": "TypeError", "message": "x",
                        "occurredAt": AFTER_YEAR_9999}, "occurredAt"),
    ("/ingest/chats", {"visitorId": "ada", "messages": [
        {"from": "visitor", "text": "hi"},
        {"from": "agent", "text": "hello", "at": AFTER_YEAR_9999}]}, "messages.1.at"),
    ("/ingest/recordings/interactions", {"visitorId": "ada", "interactions": [
        {"kind": "click", "url": "https://shop.example/", "x": 1, "y": 1},
        {"kind": "click", "url": "https://shop.example/", "x": 1, "y": 1,
         "at": AFTER_YEAR_9999}]}, "interactions.1.at"),
])
async def test_an_instant_outside_the_calendar_in_utc_is_refused_naming_its_field(
        fetch: Fetch, tenant: Tenant, deps, path: str, body: dict[str, Any], field: str):
    answer = await fetch(path, "POST", json_body=body, headers=_key(tenant))
    assert answer.code == 422, answer
    assert answer.json()["error"]["field"] == field
    assert "OverflowError" not in answer.body.decode()


@pytest.mark.parametrize("header", ["X-Segment-Started-At", "X-Segment-Ended-At"])
async def test_a_segment_time_outside_the_calendar_is_refused_naming_its_header(
        fetch: Fetch, tenant: Tenant, header: str):
    answer = await fetch("/ingest/recordings/segment", "POST", body=gzip.compress(b"[]"),
                         headers={**_key(tenant), "Content-Type": "application/octet-stream",
                                  "X-Recording-Id": str(uuid.uuid4()), "X-Segment-Seq": "0",
                                  "X-Visitor-Id": "ada", "X-Page-Url": "https://shop.example/",
                                  header: BEFORE_YEAR_ONE})
    assert answer.code == 422, answer
    assert answer.json()["error"]["field"] == header


async def test_a_cursor_holding_an_instant_outside_the_calendar_is_refused(
        fetch: Fetch, tenant: Tenant):
    forged = base64.urlsafe_b64encode(json.dumps([BEFORE_YEAR_ONE, "x"]).encode()).decode()
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/visitors?cursor={forged.rstrip('=')}",
                         token=tenant.token)
    assert answer.code == 422, answer
    assert answer.json()["error"]["field"] == "cursor"


def test_the_replay_command_refuses_a_since_outside_the_calendar():
    with pytest.raises(SystemExit):
        server._parser().parse_args(["replay-erasures", "--since", BEFORE_YEAR_ONE])
