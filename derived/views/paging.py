"""Paging and shaping for every dashboard list: keyset cursors, `Page`, the `limit` argument,
`readable` (a row that cannot be shaped is left out, not the list) and the filter that leaves
restricted visitors out.

Lists page by keyset, never by skip: the cursor is the (sort value, `_id`) of the last item
handed out, encoded opaquely, so a page costs the same however deep it is and items inserted
meanwhile neither repeat nor vanish. A list over a large range (sessions, visitors,
recordings) reads it with `windowed_page`, the newest window of the sort field first, so a
page costs about a day's rows however long the range. Both open the collection they are
given, always a family's constant (tests/documents/test_collection_owners.py).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from documents import visitors
from documents.store import DESCENDING, Store
from errors import InvalidInput
from instants import format_instant

#: Largest page a caller may ask for; the default when it asks for none.
MAX_PAGE = 100
DEFAULT_PAGE = 50

log = logging.getLogger(__name__)

T = TypeVar("T")

#: What shaping a stored document the code did not expect raises (a missing or mistyped field).
_UNREADABLE = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def readable(documents: Iterable[dict[str, Any]], shape: Callable[[dict[str, Any]], T],
             what: str) -> list[T]:
    """Each document shaped for the dashboard; one that cannot be shaped is left out, logged.

    A row from an older version, a hand edit or a restore must not break a list or an export
    for every other row. The log names the kind and the failure, never the row's content.
    """
    shaped = []
    for document in documents:
        try:
            shaped.append(shape(document))
        except _UNREADABLE as exc:
            log.warning("left out an unreadable %s row (%s)", what, type(exc).__name__)
    return shaped


@dataclass(frozen=True)
class Page:
    """One page of a list and the cursor of the next (None on the last page)."""

    items: list[dict[str, Any]]
    next_cursor: str | None

    def as_dict(self) -> dict[str, Any]:
        """The JSON answer `{items, nextCursor}`."""
        return {"items": self.items, "nextCursor": self.next_cursor}


# Cursors -------------------------------------------------------------------------------------


def encode_cursor(sort_value: datetime, document_id: str) -> str:
    """An opaque cursor for the position just after this item."""
    raw = json.dumps([format_instant(sort_value), document_id],
                     separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """The (sort value, `_id`) inside a cursor; InvalidInput for anything not made here."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        moment, document_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        at = datetime.fromisoformat(moment)
        # An offset that moves the instant out of the calendar: no store can hold it.
        at.astimezone(UTC)
    except (ValueError, TypeError, UnicodeDecodeError, OverflowError):
        raise InvalidInput("cursor is not one this API handed out", field="cursor") from None
    if not isinstance(document_id, str) or at.tzinfo is None:
        raise InvalidInput("cursor is not one this API handed out", field="cursor")
    return at, document_id


def page_limit(raw: str | None) -> int:
    """The `limit` query argument: 1 to MAX_PAGE, DEFAULT_PAGE when absent."""
    if raw is None or raw == "":
        return DEFAULT_PAGE
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_PAGE:
        raise InvalidInput(f"limit must be a whole number from 1 to {MAX_PAGE}", field="limit")
    return int(raw)


async def keyset_page(store: Store, collection: str, filter_: dict[str, Any], sort_field: str,
                      cursor: str | None, limit: int) -> tuple[list[dict[str, Any]], str | None]:
    """Documents after `cursor` in (sort_field, `_id`) descending order, and the next cursor."""
    query = dict(filter_)
    if cursor:
        after, after_id = decode_cursor(cursor)
        query["$and"] = [*query.get("$and", []), {"$or": [
            {sort_field: {"$lt": after}},
            {sort_field: after, "_id": {"$lt": after_id}},
        ]}]
    found = await store.collection(collection).find(query).sort(
        [(sort_field, DESCENDING), ("_id", DESCENDING)]).limit(limit + 1).to_list(None)
    # One item past the page tells whether a next page exists without a count.
    if len(found) <= limit:
        return found, None
    last = found[limit - 1]
    if not isinstance(last.get(sort_field), datetime):
        # Rows without a date sort after every dated one, and a cursor cannot point past them.
        return found[:limit], None
    return found[:limit], encode_cursor(last[sort_field], last["_id"])


#: The newest window `windowed_page` reads first; the next reaches back WINDOW_GROWTH times as
#: far, and the one after reads the rest: at most three queries, even for a list of a few.
FIRST_WINDOW = timedelta(days=1)
WINDOW_GROWTH = 8


async def windowed_page(store: Store, collection: str, bounded: dict[str, Any],
                        rest: dict[str, Any], sort_field: str, start: datetime | None,
                        end: datetime | None, cursor: str | None, limit: int,
                        keep: Callable[[dict[str, Any]], bool] | None = None
                        ) -> tuple[list[dict[str, Any]], str | None]:
    """`keyset_page` over the documents of `bounded` (equalities that lead an index ending in
    `sort_field`) with `sort_field` in [start, end) (either open when None) that also meet
    `rest`, read a window of `sort_field` at a time from the newest back: a day, eight days,
    then the rest.

    A store sorts what an index range holds before it limits (SecantusDB always, MongoDB
    unless the index ends in (sort_field, _id)), so one query over the range reads all of it
    for a page of 25; the first window reads about a day's. `rest` is matched after the sort,
    never beside the range: SecantusDB scans a collection for a query with a second operator
    beside the range's. `keep`, when given, is one more condition,
    checked here on each window's documents: one the store would answer slowly (SecantusDB
    looks each value of an `$in` up apart)."""
    # The newest window ends at `end`, or at the cursor's item (kept in the window: others may
    # share its instant, and `tie` leaves out those at or before it).
    high, upper, tie = end, "$lt", None
    if cursor:
        after, after_id = decode_cursor(cursor)
        if end is None or after < end:
            high, upper = after, "$lte"
        tie = {"$or": [{sort_field: {"$lt": after}}, {"_id": {"$lt": after_id}}]}
    wanted = [condition for condition in (rest, tie) if condition]
    found: list[dict[str, Any]] = []
    newest = high if high is not None else datetime.now(UTC)
    span = FIRST_WINDOW
    while len(found) <= limit:
        low: datetime | None = newest - span if span < FIRST_WINDOW * WINDOW_GROWTH ** 2 \
            else None
        if start is not None and (low is None or low <= start):
            low = start
        window = {**({"$gte": low} if low is not None else {}),
                  **({upper: high} if high is not None else {})}
        pipeline: list[dict[str, Any]] = [
            {"$match": {**bounded, sort_field: window}},
            {"$sort": {sort_field: DESCENDING, "_id": DESCENDING}}]
        if wanted:
            pipeline.append({"$match": {"$and": wanted}})
        if keep is None:
            pipeline.append({"$limit": limit + 1 - len(found)})
        read = await store.collection(collection).aggregate(pipeline).to_list(None)
        found += read if keep is None else [document for document in read if keep(document)]
        if low is None or low == start or high is not None and low >= high:
            break
        newest, high, upper, span = low, low, "$lt", span * WINDOW_GROWTH
    if len(found) <= limit:
        return found, None
    last = found[limit - 1]
    return found[:limit], encode_cursor(last[sort_field], last["_id"])


# Restriction ---------------------------------------------------------------------------------


async def not_restricted(store: Store, site_id: str) -> dict[str, Any]:
    restricted = await visitors.restricted_visitor_ids(store, site_id)
    return {"visitorId": {"$nin": restricted}} if restricted else {}
