"""Saved segments (issue 41 point 5): a site's named sets of session filters, reused by the
sessions list, the recordings and visitors lists and funnel reports.

A segment holds what a session did, not when: the date range stays the page's, so one segment
serves any range. Its filters are the sessions list's own (`SessionFilters`), parsed and
checked here by `parse_filters` for both, so a segment can hold nothing a list would refuse.
Which sessions they match is derived/visits.py `matching`. A name is unique per site whatever
its case (`nameKey`, a unique index). The collection is `saved_segments`: `segments` is the
recordings' footage bucket (documents/recordings.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from documents.accounts import new_id
from documents.store import ASCENDING, DuplicateKeyError, Index, Store
from errors import Conflict, InvalidInput, NotFound

COLLECTION = "saved_segments"
#: A site's segments: each is a line of a picker, so the list stays short.
MAX_SEGMENTS_PER_SITE = 100
MAX_NAME = 80

INDEXES = [
    Index(COLLECTION, (("siteId", ASCENDING), ("nameKey", ASCENDING)), unique=True),
]

#: A page filter: a path, or a path prefix ending in "*" ("/product/*").
_PAGE = re.compile(r"^/[^\s]{0,511}$")
_AMOUNT = re.compile(r"^[0-9]{1,13}(\.[0-9]{1,3})?$")
_COUNTRY = re.compile(r"^[A-Za-z]{2}$")
_DEVICE = re.compile(r"^[a-z]{1,20}$")
#: What a UTM value, a source or an error id may be (the visits keep labels of 100).
_LABEL = 100


@dataclass(frozen=True)
class SessionFilters:
    """What sessions are found by; None means any.

    `min_value` and `max_value` are decimal text in the site's reporting currency: a session's
    value is the net revenue of its paid orders in it. Page filters (`entry`, `exit`, `page`,
    `frustration`) are paths; one ending in "*" matches every path it starts."""

    converted: bool | None = None
    min_value: str | None = None
    max_value: str | None = None
    utm_campaign: str | None = None
    utm_source: str | None = None
    source: str | None = None
    entry: str | None = None
    exit: str | None = None
    page: str | None = None
    error: str | None = None
    frustration: str | None = None
    device: str | None = None
    country: str | None = None

    def is_empty(self) -> bool:
        return not self.as_dict()

    def as_dict(self) -> dict[str, Any]:
        """The filters that are set, by query parameter name (a segment's `filters`)."""
        return {PARAMETERS[name]: value for name, value in asdict(self).items()
                if value is not None}


#: Each filter's query parameter, in the order a page shows them.
PARAMETERS = {field.name: re.sub(r"_(\w)", lambda m: m.group(1).upper(), field.name)
              for field in fields(SessionFilters)}
FILTER_NAMES = tuple(PARAMETERS.values())


def _text(raw: Any, name: str, *, limit: int = _LABEL) -> str | None:
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str) or not raw.strip() or len(raw.strip()) > limit:
        raise InvalidInput(f"{name} is text of 1 to {limit} characters", field=name)
    return raw.strip()


def _matched(raw: Any, name: str, pattern: re.Pattern[str], what: str) -> str | None:
    value = _text(raw, name, limit=512)
    if value is not None and not pattern.match(value):
        raise InvalidInput(f"{name} is {what}", field=name)
    return value


def parse_filters(raw: Mapping[str, Any]) -> SessionFilters:
    """The session filters named in `raw` (query arguments or a segment's `filters`), checked
    and written one way (UTM values lower case, as visits keep them; countries upper case);
    names that are not filters are ignored. InvalidInput names the first that does not fit."""
    converted = raw.get("converted")
    if converted not in (None, "", True, False, "true", "false"):
        raise InvalidInput("converted is true or false", field="converted")
    flag = None if converted in (None, "") else converted in (True, "true")
    amounts = {name: _matched(raw.get(name), name, _AMOUNT, 'a decimal amount like "45.50"')
               for name in ("minValue", "maxValue")}
    if amounts["minValue"] and amounts["maxValue"] \
            and Decimal(amounts["minValue"]) > Decimal(amounts["maxValue"]):
        raise InvalidInput("minValue is more than maxValue", field="minValue")
    if flag is False and (amounts["minValue"] or amounts["maxValue"]):
        raise InvalidInput("an order value finds sessions that ordered: not with "
                           "converted=false", field="converted")
    pages = {name: _matched(raw.get(name), name, _PAGE, 'a path like "/cart" or "/product/*"')
             for name in ("entry", "exit", "page", "frustration")}
    utm = {name: (value.lower() if (value := _text(raw.get(name), name)) else None)
           for name in ("utmCampaign", "utmSource")}
    country = _matched(raw.get("country"), "country", _COUNTRY, "a two-letter country code")
    return SessionFilters(
        converted=flag, min_value=amounts["minValue"], max_value=amounts["maxValue"],
        utm_campaign=utm["utmCampaign"], utm_source=utm["utmSource"],
        source=_text(raw.get("source"), "source"), **pages,
        error=_text(raw.get("error"), "error"),
        device=_matched(raw.get("device"), "device", _DEVICE, 'a device type like "mobile"'),
        country=country.upper() if country else None)


def view(segment: dict[str, Any]) -> dict[str, Any]:
    """A segment as the API shows it."""
    return {"id": segment["_id"], "name": segment["name"], "filters": segment["filters"],
            "createdAt": segment.get("createdAt"), "updatedAt": segment.get("updatedAt")}


def filters_of(segment: dict[str, Any]) -> SessionFilters:
    """A stored segment's filters, parsed again (a stored value is checked as a typed one)."""
    return parse_filters(segment.get("filters") or {})


def _name(raw: Any) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidInput("a segment has a name", field="name")
    if len(raw.strip()) > MAX_NAME:
        raise InvalidInput(f"a segment's name has at most {MAX_NAME} characters", field="name")
    return raw.strip()


def _filters(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise InvalidInput("filters is an object of session filters", field="filters")
    unknown = sorted(set(raw) - set(FILTER_NAMES))
    if unknown:
        raise InvalidInput(f"{unknown[0]} is not a session filter", field=f"filters.{unknown[0]}")
    try:
        parsed = parse_filters(raw)
    except InvalidInput as exc:
        raise InvalidInput(exc.message, field=f"filters.{exc.field}") from None
    if parsed.is_empty():
        raise InvalidInput("a segment has at least one filter", field="filters")
    return parsed.as_dict()


# Reads and writes -----------------------------------------------------------------------------


async def list_segments(store: Store, site_id: str) -> list[dict[str, Any]]:
    """The site's segments by name."""
    cursor = store.collection(COLLECTION).find({"siteId": site_id}).sort(
        [("nameKey", ASCENDING)]).limit(MAX_SEGMENTS_PER_SITE)
    return [segment async for segment in cursor]


async def find_segment(store: Store, site_id: str, segment_id: str) -> dict[str, Any]:
    """One segment of the site; NotFound otherwise."""
    segment = await store.collection(COLLECTION).find_one({"_id": segment_id, "siteId": site_id})
    if segment is None:
        raise NotFound("segment not found")
    return segment


def _taken(name: str) -> Conflict:
    return Conflict(f"the site has a segment named {name!r}", code="segment_name_taken")


async def create_segment(store: Store, site_id: str, body: dict[str, Any], *, session: Any
                         ) -> dict[str, Any]:
    """Store a new segment of the site; Conflict when its name is taken."""
    name, filters = _name(body.get("name")), _filters(body.get("filters"))
    if await store.collection(COLLECTION).count_documents(
            {"siteId": site_id}, session=session) >= MAX_SEGMENTS_PER_SITE:
        raise InvalidInput(f"a site has at most {MAX_SEGMENTS_PER_SITE} segments")
    now = datetime.now(UTC)
    segment = {"_id": new_id(), "siteId": site_id, "name": name, "nameKey": name.casefold(),
               "filters": filters, "createdAt": now, "updatedAt": now}
    try:
        await store.collection(COLLECTION).insert_one(segment, session=session)
    except DuplicateKeyError:
        raise _taken(name) from None
    return segment


async def update_segment(store: Store, site_id: str, segment_id: str, body: dict[str, Any], *,
                         session: Any) -> tuple[dict[str, Any], list[str]]:
    """Rename a segment or replace its filters; returns it and the fields that changed."""
    segment = await store.collection(COLLECTION).find_one(
        {"_id": segment_id, "siteId": site_id}, session=session)
    if segment is None:
        raise NotFound("segment not found")
    changes: dict[str, Any] = {}
    if "name" in body and (name := _name(body["name"])) != segment["name"]:
        changes.update(name=name, nameKey=name.casefold())
    if "filters" in body and (filters := _filters(body["filters"])) != segment["filters"]:
        changes["filters"] = filters
    if not changes:
        return segment, []
    try:
        await store.collection(COLLECTION).update_one(
            {"_id": segment_id, "siteId": site_id},
            {"$set": {**changes, "updatedAt": datetime.now(UTC)}}, session=session)
    except DuplicateKeyError:
        raise _taken(changes["name"]) from None
    return {**segment, **changes}, sorted(set(changes) - {"nameKey"})


async def delete_segment(store: Store, site_id: str, segment_id: str, *, session: Any) -> None:
    deleted = await store.collection(COLLECTION).delete_one(
        {"_id": segment_id, "siteId": site_id}, session=session)
    if not deleted.deleted_count:
        raise NotFound("segment not found")
