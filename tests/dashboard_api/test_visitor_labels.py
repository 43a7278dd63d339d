"""Readable visitor labels (issue 41 point 6): a short label per visitor, the same in every list
and answer that names the visitor, with the lead's name in its place once a lead gives one."""

from __future__ import annotations

import random
import re
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

from documents.visitors import LABEL_ADJECTIVES, LABEL_ANIMALS, LABEL_SPACE, visitor_label
from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest, send_errors

SHOP = "https://shop.example"
VISITOR = "0f0e0d0c-0b0a-4909-8807-060504030201"
RECORDING = "1f0e0d0c-0b0a-4909-8807-060504030201"
LABEL = re.compile(r"[A-Z][a-z]+ [A-Z][a-z]+ [1-9][0-9]{2}")


def _ids(count: int, seed: int) -> list[str]:
    """`count` distinct visitor ids in the loader's form, the same on every run."""
    rng = random.Random(seed)
    return [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(count)]


def test_the_label_is_drawn_from_the_site_and_the_id_and_never_changes():
    # Pinned: a change of the word lists or the hash renames every visitor everywhere.
    assert visitor_label("site-1", VISITOR) == visitor_label("site-1", VISITOR)
    assert LABEL.fullmatch(visitor_label("site-1", VISITOR))
    assert visitor_label("site-1", VISITOR) == "Smart Giraffe 780"
    # The same browser on another site reads differently: nothing links the two.
    assert visitor_label("site-2", VISITOR) != visitor_label("site-1", VISITOR)
    # The default display name is no name; a lead's is.
    assert visitor_label("site-1", VISITOR, f"Visitor #{VISITOR}") == "Smart Giraffe 780"
    assert visitor_label("site-1", VISITOR, VISITOR) == "Smart Giraffe 780"
    assert visitor_label("site-1", VISITOR, "Grace Hopper") == "Grace Hopper"


def test_the_word_lists_have_no_repeats_and_make_the_documented_space():
    assert len(set(LABEL_ADJECTIVES)) == len(LABEL_ADJECTIVES) == 128
    assert len(set(LABEL_ANIMALS)) == len(LABEL_ANIMALS) == 128
    assert LABEL_SPACE == 14_745_600


def test_a_thousand_visitors_of_a_site_get_a_thousand_different_labels():
    labels = [visitor_label("site-1", visitor) for visitor in _ids(1000, seed=41)]
    assert len(set(labels)) == 1000


def test_labels_collide_no_more_often_than_the_docstring_says():
    # 20,000 visitors: n(n - 1) / (2 × LABEL_SPACE) = 13.6 colliding pairs expected.
    count = 20_000
    seen = Counter(visitor_label("site-1", visitor) for visitor in _ids(count, seed=6))
    pairs = sum(n * (n - 1) // 2 for n in seen.values())
    expected = count * (count - 1) / (2 * LABEL_SPACE)
    assert round(expected, 1) == 13.6
    # A Poisson count of mean 13.6 stays under twice its mean with a chance of 99.8 %.
    assert pairs <= 2 * expected, pairs


async def test_a_visitor_reads_the_same_label_in_every_list_and_answer(
        fetch: Fetch, tenant: Tenant, ingest: Ingest, deps, viewer_token: str):
    now = datetime.now(UTC).replace(microsecond=0)
    context = {"visitorId": VISITOR, "sessionId": "s-1", "url": f"{SHOP}/cart"}
    await ingest("pageviews", {**context, "occurredAt": (now - timedelta(minutes=5)).isoformat()})
    await ingest("recordings/start", {**context, "recordingId": RECORDING})
    await ingest("commerce", {"eventId": "o1-placed", "type": "order_placed", **context,
                              "orderId": "o1", "total": "12.00", "currency": "EUR",
                              "occurredAt": now.isoformat()})
    await send_errors(ingest, deps, [{
        **context, "source": "javascript", "type": "TypeError", "message": "price is undefined",
        "occurredAt": now.isoformat()}])
    await deps.derivation.fold()
    expected = visitor_label(tenant.site_id, VISITOR)
    assert LABEL.fullmatch(expected)
    site = f"/api/v1/sites/{tenant.site_id}"

    async def read(path: str) -> dict:
        answer = await fetch(f"{site}{path}", token=viewer_token)
        assert answer.code == 200, (path, answer)
        return answer.json()

    async def labels() -> list[str]:
        errors = (await read("/error-trends"))["items"]
        breakdown = await read(f"/errors/{errors[0]['id']}/breakdown")
        return [
            (await read("/visitors"))["items"][0]["visitorLabel"],
            (await read(f"/visitors/{VISITOR}"))["visitorLabel"],
            (await read("/recordings"))["items"][0]["visitorLabel"],
            (await read("/orders"))["items"][0]["visitorLabel"],
            (await read(f"/visitors/{VISITOR}"))["orders"][0]["visitorLabel"],
            breakdown["visitors"][0]["visitorLabel"],
            breakdown["latest"][0]["visitorLabel"],
        ]

    assert await labels() == [expected] * 7
    # A lead's name is the label from then on, everywhere; the id stays the visitor's.
    await ingest("leads", {"visitorId": VISITOR, "email": "grace@example.com",
                           "name": "Grace Hopper"})
    assert await labels() == ["Grace Hopper"] * 7
    assert (await read("/leads"))["items"][0]["visitorLabel"] == "Grace Hopper"
    profile = await read(f"/visitors/{VISITOR}")
    assert profile["visitorId"] == VISITOR and profile["displayName"] == "Grace Hopper"
