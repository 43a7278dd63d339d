"""`paging.windowed_page` hands out, page after page, exactly what one sorted query over the whole
range would: newest first, then by id, with no gap or repeat where a page or a window ends,
also for items that share an instant across a page's end and items on a window's edge.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from derived import visits
from derived.views.paging import FIRST_WINDOW, WINDOW_GROWTH, windowed_page
from documents.store import Store

END = datetime(2026, 11, 20, tzinfo=UTC)
START = END - timedelta(days=40)


def _visit(number: int, at: datetime, site: str = "site", pageviews: int = 1) -> dict[str, Any]:
    return {"_id": f"v{number:03d}", "siteId": site, "startedAt": at, "pageviews": pageviews}


async def _all_pages(store: Store, limit: int, rest: dict[str, Any]) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        found, cursor = await windowed_page(store, visits.COLLECTION, {"siteId": "site"}, rest,
                                            "startedAt", START, END, cursor, limit)
        pages.append([visit["_id"] for visit in found])
        if cursor is None:
            return pages


@pytest.mark.parametrize("limit", [1, 3, 7, 100])
async def test_pages_are_the_sorted_range_with_no_gap_or_repeat(store: Store, limit: int):
    rng = random.Random(limit)
    moments = [START + timedelta(minutes=rng.randrange(40 * 24 * 60)) for _ in range(60)]
    # Items sharing an instant, on the edges of the first windows, and on the range's ends.
    shared = END - timedelta(days=2, hours=5)
    moments += [shared] * 5 + [END - FIRST_WINDOW, END - (1 + WINDOW_GROWTH) * FIRST_WINDOW,
                               START,
                               END - timedelta(milliseconds=1), END]
    documents = [_visit(n, at, pageviews=n % 4) for n, at in enumerate(moments)]
    documents += [_visit(900 + n, END - timedelta(hours=n), site="other") for n in range(5)]
    await store.collection(visits.COLLECTION).insert_many(documents)

    kept = sorted((doc for doc in documents if doc["siteId"] == "site"
                   and START <= doc["startedAt"] < END and doc["pageviews"] > 0),
                  key=lambda doc: (doc["startedAt"], doc["_id"]), reverse=True)
    pages = await _all_pages(store, limit, {"pageviews": {"$gt": 0}})

    assert [visit for page in pages for visit in page] == [doc["_id"] for doc in kept]
    assert all(len(page) == limit for page in pages[:-1])
    assert 0 < len(pages[-1]) <= limit


async def test_an_empty_range_is_one_empty_page(store: Store):
    await store.collection(visits.COLLECTION).insert_many(
        [_visit(1, START - timedelta(seconds=1)), _visit(2, END)])
    assert await _all_pages(store, 5, {}) == [[]]


async def test_an_open_range_with_a_kept_set_pages_back_past_every_window(store: Store):
    # No start or end (the visitors and recordings lists without dates), and `keep` checked
    # on each window's documents: items two years back are reached, and only the kept ones.
    now = datetime.now(UTC)
    ages = [timedelta(hours=1), timedelta(days=3), timedelta(days=30), timedelta(days=800)]
    documents = [_visit(n, now - age - timedelta(minutes=k)) for n, (age, k) in
                 enumerate((age, k) for age in ages for k in range(3))]
    await store.collection(visits.COLLECTION).insert_many(documents)
    wanted = {doc["_id"] for doc in documents if int(doc["_id"][1:]) % 2 == 0}
    pages, cursor = [], None
    while True:
        found, cursor = await windowed_page(store, visits.COLLECTION, {"siteId": "site"}, {},
                                            "startedAt", None, None, cursor, 2,
                                            keep=lambda doc: doc["_id"] in wanted)
        pages.append([doc["_id"] for doc in found])
        if cursor is None:
            break
    newest_first = sorted((doc for doc in documents if doc["_id"] in wanted),
                          key=lambda doc: doc["startedAt"], reverse=True)
    assert [item for page in pages for item in page] == [doc["_id"] for doc in newest_first]
