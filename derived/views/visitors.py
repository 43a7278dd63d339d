"""The visitors pages: the visitors list, searched and filtered, and a visitor's profile.

The visitors list filtered by "met an error", which a profile does not hold, or by a saved
segment, reads visitors in (lastSeen, `_id`) order a batch at a time, looks the errors up on
the occurrences' index (or the segment's visitors up in a set), and stops after SEARCH_SCAN of
them: a page can then come back short, with a cursor to search further (decision "Issue 21"
in docs/decisions.md).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from derived.daily_figures import page_path
from derived.views import orders as order_views
from derived.views.leads import lead_view
from derived.views.paging import decode_cursor, encode_cursor, readable, windowed_page
from derived.views.recordings import recording_summary
from documents import engagement, error_records, leads, recordings, sites, visitors
from documents.store import Store
from errors import NotFound
from instants import days_condition

#: How many of each kind of related item the visitor profile embeds.
PROFILE_ITEMS = 50


def visitor_search(q: str) -> dict[str, Any]:
    """The filter of a visitors search: an id prefix, or part of a name or e-mail (any case)."""
    escaped = re.escape(q)
    return {"$or": [
        {"visitorId": {"$regex": "^" + escaped}},
        {"displayName": {"$regex": escaped, "$options": "i"}},
        {"emails": {"$regex": escaped, "$options": "i"}},
    ]}


def visitor_summary(profile: dict[str, Any]) -> dict[str, Any]:
    """A profile as a row of the visitors list."""
    return {
        "visitorId": profile["visitorId"],
        "visitorLabel": visitors.visitor_label(profile["siteId"], profile["visitorId"],
                                               profile.get("displayName")),
        "displayName": profile.get("displayName"),
        "emails": profile.get("emails", []),
        "wpUserId": profile.get("wpUserId"),
        "country": (profile.get("location") or {}).get("country"),
        "device": profile.get("device") or {},
        "counts": profile.get("counts") or {},
        "objected": bool(profile.get("objected")),
        "firstSeen": profile.get("firstSeen"),
        "lastSeen": profile.get("lastSeen"),
    }


async def visitor_profile(store: Store, site_id: str, visitor_id: str) -> dict[str, Any]:
    """The profile page: identity, counts, recent activity, errors hit, recordings, leads,
    orders (as the orders list shows them), what the visitor said (`visitor_said`) and linked
    profiles (same `wpUserId`, listed separately). NotFound for restricted visitors."""
    profile = await visitors.find_profile(store, site_id, visitor_id)
    if profile is None or profile.get("restricted"):
        raise NotFound("visitor not found")
    occurrences = await error_records.latest_occurrences_of_visitor(store, site_id, visitor_id,
                                                                    limit=PROFILE_ITEMS)
    found_leads = await leads.latest_leads_of_visitor(store, site_id, visitor_id,
                                                      limit=PROFILE_ITEMS)
    found_recordings = await recordings.latest_recordings_of_visitor(
        store, site_id, visitor_id, limit=PROFILE_ITEMS)
    found_orders = await order_views.visitor_orders(store, site_id, visitor_id,
                                                    limit=PROFILE_ITEMS)
    linked: list[dict[str, Any]] = []
    if profile.get("wpUserId"):
        linked = await visitors.linked_profiles(store, site_id, profile["wpUserId"], visitor_id,
                                                limit=PROFILE_ITEMS)
    return {
        **visitor_summary(profile),
        "location": {key: value for key, value in (profile.get("location") or {}).items()
                     if key != "ipAddress"},
        "recent": list(reversed(profile.get("recent") or [])),
        "errors": [{"errorId": o["errorId"], "what": f"{o['type']}: {o['message']}",
                    "when": o["occurredAt"]} for o in occurrences],
        "recordings": readable(found_recordings, recording_summary, "recording"),
        "leads": readable(found_leads, lead_view, "lead"),
        "orders": found_orders,
        "said": await visitor_said(store, site_id, visitor_id, profile.get("emails") or []),
        "linkedProfiles": readable(linked, visitor_summary, "visitor"),
    }


def _chat_said(message: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "chat", "at": message["at"], "page": None, "url": None,
            "text": message["text"], "question": None, "score": None,
            "transcriptId": message["transcriptId"]}


def _survey_said(response: dict[str, Any]) -> list[dict[str, Any]]:
    url = response.get("url")
    return [{"kind": "survey", "at": response["answeredAt"], "page": page_path(url), "url": url,
             "text": answer.get("text"), "question": answer["question"],
             "score": answer.get("score"), "surveyId": response.get("surveyId"),
             "responseId": response["_id"]}
            for answer in response.get("answers") or []]


async def visitor_said(store: Store, site_id: str, visitor_id: str, emails: list[str]
                       ) -> list[dict[str, Any]]:
    """What the visitor said, newest first, at most PROFILE_ITEMS: their own chat messages
    (not the agent's or a bot's) and each answer of their survey responses, with the time, the
    page where known (a transcript has none) and the words, score or choice.

    It comes from the records export and erasure already cover (privacy/subject_data.py), so
    an erased visitor has none; the caller hides restricted visitors as for every other part.
    """
    messages = await engagement.latest_chat_messages_of_visitor(
        store, site_id, visitor_id, emails, limit=PROFILE_ITEMS)
    responses = await engagement.latest_survey_responses_of_visitor(
        store, site_id, visitor_id, limit=PROFILE_ITEMS)
    said = readable(messages, _chat_said, "chat message")
    for answers in readable(responses, _survey_said, "survey response"):
        said.extend(answers)
    # Stable: a response's answers keep their order, as asked.
    said.sort(key=lambda item: item["at"], reverse=True)
    return said[:PROFILE_ITEMS]


# Searching by facts --------------------------------------------------------------------------

#: Items read per batch, and at most per request, when a list is filtered by what its documents
#: do not hold.
SEARCH_BATCH = 200
SEARCH_SCAN = 2000

Keep = Callable[[list[dict[str, Any]]], Awaitable[list[dict[str, Any]]]]


@dataclass(frozen=True)
class SearchPage:
    """One page of a filtered list; `searchedTo` is where a short page stopped searching."""

    items: list[dict[str, Any]]
    next_cursor: str | None
    searched_to: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON answer."""
        return {"items": self.items, "nextCursor": self.next_cursor,
                "searchedTo": self.searched_to}


async def _search(store: Store, collection: str, bounded: dict[str, Any], rest: dict[str, Any],
                  sort_field: str, between: dict[str, Any], cursor: str | None, limit: int,
                  keep: Keep) -> SearchPage:
    """Items of `bounded` and `rest` (`paging.windowed_page`) with `sort_field` `between`
    ($gte, $lt, either open) after `cursor`, newest first, that `keep` keeps, read a batch at
    a time; at most SEARCH_SCAN are read, then the page ends early with a cursor."""
    kept: list[dict[str, Any]] = []
    scanned = 0
    position = cursor
    while scanned < SEARCH_SCAN:
        batch, after = await windowed_page(store, collection, bounded, rest, sort_field,
                                           between.get("$gte"), between.get("$lt"), position,
                                           SEARCH_BATCH)
        scanned += len(batch)
        for item in await keep(batch):
            kept.append(item)
            if len(kept) > limit:
                last = kept[limit - 1]
                return SearchPage(kept[:limit], encode_cursor(last[sort_field], last["_id"]))
        if after is None:
            return SearchPage(kept, None)
        position = after
    # Searched as far as one request may: hand back what was found and where to go on.
    return SearchPage(kept, position, decode_cursor(position)[0])


# The visitors list, searched and filtered ----------------------------------------------------


@dataclass(frozen=True)
class VisitorFilters:
    """What the visitors list is searched and filtered by; None means any."""

    q: str | None = None
    country: str | None = None
    device: str | None = None
    logged_in: bool | None = None
    has_lead: bool | None = None
    has_error: bool | None = None
    first_seen_from: date | None = None
    first_seen_to: date | None = None
    last_seen_from: date | None = None
    last_seen_to: date | None = None
    #: Only these visitors (those with a session of a saved segment), when given.
    visitors: tuple[str, ...] | None = None


async def search_visitors(store: Store, site_id: str, filters: VisitorFilters, *,
                          cursor: str | None, limit: int) -> SearchPage:
    """Visitors by last seen, newest first, searched and filtered. Whether a visitor met an
    error is looked up per batch in the occurrences; everything else is on the profile."""
    # One equality beside the site, which an index of (siteId, it, lastSeen) seeks; the rest
    # is matched after (`paging.windowed_page`).
    bounded: dict[str, Any] = {"siteId": site_id}
    rest: dict[str, Any] = {"restricted": {"$ne": True}}
    if filters.q:
        rest.update(visitor_search(filters.q))
    if filters.country:
        bounded["location.country"] = filters.country.upper()
    if filters.device:
        (rest if filters.country else bounded)["device.type"] = filters.device
    if filters.logged_in is not None:
        rest["wpUserId"] = {"$nin": [None, ""]} if filters.logged_in else {"$in": [None, ""]}
    if filters.has_lead is not None:
        rest["counts.leads"] = {"$gt": 0} if filters.has_lead else {"$not": {"$gt": 0}}
    clock = await sites.site_clock(store, site_id)
    if bound := days_condition(filters.first_seen_from, filters.first_seen_to, clock):
        rest["firstSeen"] = bound
    # A segment's visitors (up to 10,000) are kept as a batch is read, like those who met an
    # error: SecantusDB looks each value of an `$in` up apart, half a millisecond each.
    wanted = set(filters.visitors) if filters.visitors is not None else None

    async def keep(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if wanted is not None:
            batch = [profile for profile in batch if profile.get("visitorId") in wanted]
        shaped = readable(batch, lambda p: {**p, "row": visitor_summary(p)},
                                  "visitor")
        hit = await _visitors_with_errors(store, site_id, [p["visitorId"] for p in shaped])
        if filters.has_error is not None:
            shaped = [p for p in shaped if (p["visitorId"] in hit) == filters.has_error]
        return [{**p, "hadError": p["visitorId"] in hit} for p in shaped]

    found = await _search(store, visitors.COLLECTION, bounded, rest, "lastSeen",
                          days_condition(filters.last_seen_from, filters.last_seen_to, clock),
                          cursor, limit, keep)
    return SearchPage([{**p["row"], "hasError": p["hadError"]} for p in found.items],
                      found.next_cursor, found.searched_to)


async def _visitors_with_errors(store: Store, site_id: str, visitor_ids: list[str]) -> set[str]:
    if not visitor_ids:
        return set()
    return await error_records.visitors_with_errors(store, site_id, visitor_ids)
