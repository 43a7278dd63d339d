"""Visitor profiles: one document per (site, visitor id), spec §2.

A profile embeds identity, location, device, per-kind counts and the most recent activity
(bounded with `$slice`); the full history lives in activity buckets (documents.activity).
Profiles sharing a `wpUserId` are linked by that field and never merged.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pymongo import ReturnDocument

from documents.retention import Expiry
from documents.store import ASCENDING, DESCENDING, DuplicateKeyError, Index, Store

COLLECTION = "visitors"

INDEXES = [
    # Uniqueness comes from `_id` (profile_id); this index serves queries by visitor id.
    Index(COLLECTION, (("siteId", ASCENDING), ("visitorId", ASCENDING))),
    Index(COLLECTION, (("siteId", ASCENDING), ("lastSeen", DESCENDING))),
    Index(COLLECTION, (("siteId", ASCENDING), ("wpUserId", ASCENDING))),
    Index(COLLECTION, (("siteId", ASCENDING), ("emails", ASCENDING))),
    # The few restricted or objecting visitors of a site: every dashboard list leaves the
    # restricted out, so without these each list would read all of a site's profiles.
    Index(COLLECTION, (("siteId", ASCENDING), ("restricted", ASCENDING))),
    Index(COLLECTION, (("siteId", ASCENDING), ("objected", ASCENDING))),
    # The visitors list filtered to one country or one kind of device, by last seen.
    Index(COLLECTION, (("siteId", ASCENDING), ("location.country", ASCENDING),
                       ("lastSeen", DESCENDING))),
    Index(COLLECTION, (("siteId", ASCENDING), ("device.type", ASCENDING),
                       ("lastSeen", DESCENDING))),
]
#: A profile expires when the visitor has not been seen for its site's retention.
EXPIRY = Expiry(COLLECTION, "lastSeen")

#: How many recent activity entries a profile embeds; the rest is in the buckets.
RECENT_ACTIVITY = 20


@dataclass(frozen=True)
class VisitorFacts:
    """What a profile may keep about the visitor, already anonymised."""

    country: str | None = None
    time_zone: str | None = None
    ip_address: str | None = None
    browser: str | None = None
    os: str | None = None
    device_type: str | None = None
    screen: str | None = None
    language: str | None = None
    wp_user_id: str | None = None

    def as_update(self) -> dict[str, Any]:
        """`$set` fields for the known facts (unknown ones leave the stored value alone)."""
        fields = {
            "location.country": self.country,
            "location.timeZone": self.time_zone,
            "location.ipAddress": self.ip_address,
            "device.browser": self.browser,
            "device.os": self.os,
            "device.type": self.device_type if self.device_type != "unknown" else None,
            "device.screen": self.screen,
            "device.language": self.language,
            "wpUserId": self.wp_user_id,
        }
        return {key: value for key, value in fields.items() if value is not None}


@dataclass(frozen=True)
class PrivacyFlags:
    """Restriction and objection switches (GDPR Art. 18 and 21) of one visitor."""

    restricted: bool = False
    objected: bool = False


#: The two privacy flags a profile can carry; each has a `<flag>At` field for when it was set.
PRIVACY_FLAG_FIELDS = ("restricted", "objected")


class VisitorHeld(Exception):
    """The visitor is restricted or objects (`reason`): a write that refuses held visitors
    raised it, which aborts the transaction it ran in."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class PrivacyHold:
    """A visitor under restriction or objection: the id, the flags and when each was set.

    Only these, because the list is shown while the visitor is hidden from every other read.
    A time is None for a flag set before times were recorded.
    """

    visitor_id: str
    restricted: bool
    restricted_at: datetime | None
    objected: bool
    objected_at: datetime | None

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of one hold."""
        return {"visitorId": self.visitor_id,
                "restricted": self.restricted, "restrictedAt": self.restricted_at,
                "objected": self.objected, "objectedAt": self.objected_at}


def profile_id(site_id: str, visitor_id: str) -> str:
    """The profile's `_id`: the natural key, so every lookup and upsert is by `_id`."""
    return f"{site_id}:{visitor_id}"


def default_display_name(visitor_id: str) -> str:
    """The name shown until a lead gives one: 'Visitor #' plus the id (spec §2)."""
    return f"Visitor #{visitor_id}"


# Readable labels -----------------------------------------------------------------------------

#: The words of a visitor's label; changing either list changes every label shown.
LABEL_ADJECTIVES = (
    "Agile", "Alert", "Amber", "Azure", "Balmy", "Bold", "Brave", "Breezy", "Bright", "Bubbly",
    "Calm", "Cheery", "Civil", "Clever", "Cobalt", "Coral", "Cosy", "Crisp", "Curious",
    "Dainty", "Dandy", "Dapper", "Dreamy", "Dusky", "Eager", "Early", "Elegant", "Epic", "Fair",
    "Fancy", "Fearless", "Festive", "Fleet", "Fluffy", "Frank", "Frosty", "Fuzzy", "Gallant",
    "Gentle", "Giddy", "Glad", "Gleaming", "Golden", "Graceful", "Grand", "Happy", "Hardy",
    "Hazel", "Hearty", "Honest", "Hopeful", "Humble", "Icy", "Ivory", "Jade", "Jolly", "Jovial",
    "Keen", "Kind", "Lavish", "Lemon", "Lilac", "Lively", "Loyal", "Lucky", "Lunar", "Mellow",
    "Merry", "Mighty", "Mint", "Misty", "Modest", "Mossy", "Nifty", "Nimble", "Noble", "Olive",
    "Patient", "Peachy", "Pearl", "Perky", "Placid", "Plucky", "Plum", "Polar", "Polite",
    "Proud", "Quick", "Quiet", "Rapid", "Ready", "Regal", "Rosy", "Royal", "Ruby", "Rugged",
    "Rustic", "Sage", "Sandy", "Scarlet", "Serene", "Shiny", "Silent", "Silver", "Simple",
    "Sleek", "Smart", "Snowy", "Snug", "Solar", "Spicy", "Spry", "Steady", "Stellar", "Stout",
    "Sturdy", "Sunny", "Swift", "Tawny", "Tender", "Tidy", "Velvet", "Vivid", "Warm", "Windy",
    "Wise", "Witty", "Zesty",
)
LABEL_ANIMALS = (
    "Alpaca", "Antelope", "Armadillo", "Badger", "Beaver", "Bison", "Bobcat", "Buffalo",
    "Butterfly", "Camel", "Capybara", "Caribou", "Cheetah", "Chinchilla", "Cougar", "Coyote",
    "Crane", "Cricket", "Deer", "Dingo", "Dolphin", "Donkey", "Dove", "Eagle", "Egret",
    "Elephant", "Elk", "Falcon", "Ferret", "Finch", "Flamingo", "Fox", "Frog", "Gazelle",
    "Gecko", "Gibbon", "Giraffe", "Goose", "Gopher", "Gorilla", "Grouse", "Hamster", "Hare",
    "Hawk", "Hedgehog", "Heron", "Hippo", "Horse", "Hummingbird", "Ibex", "Ibis", "Iguana",
    "Impala", "Jackal", "Jaguar", "Jay", "Kangaroo", "Kestrel", "Kingfisher", "Kiwi", "Koala",
    "Lark", "Lemur", "Leopard", "Lion", "Llama", "Lobster", "Lynx", "Macaw", "Magpie",
    "Manatee", "Marmot", "Meerkat", "Mink", "Mole", "Moose", "Narwhal", "Newt", "Nightingale",
    "Ocelot", "Octopus", "Okapi", "Opossum", "Orca", "Osprey", "Ostrich", "Otter", "Owl",
    "Panda", "Panther", "Parrot", "Pelican", "Penguin", "Pheasant", "Pigeon", "Platypus",
    "Pony", "Porcupine", "Puffin", "Puma", "Quail", "Rabbit", "Raccoon", "Raven", "Reindeer",
    "Robin", "Salmon", "Seal", "Shark", "Sparrow", "Squirrel", "Starling", "Stork", "Swallow",
    "Swan", "Tapir", "Tiger", "Toucan", "Turtle", "Walrus", "Weasel", "Whale", "Wolf", "Wombat",
    "Woodpecker", "Wren", "Yak", "Zebra",
)
#: The label's number runs from 100 to 999, so every label has three digits.
LABEL_NUMBERS = 900
#: How many labels there are: 128 × 128 × 900 = 14,745,600.
LABEL_SPACE = len(LABEL_ADJECTIVES) * len(LABEL_ANIMALS) * LABEL_NUMBERS


def visitor_label(site_id: str, visitor_id: str, display_name: str | None = None) -> str:
    """The short name a visitor is shown by: the display name a lead gave, else a pseudonym
    such as "Amber Otter 482" drawn from a hash of (site id, visitor id).

    The pseudonym is the same on every page and answer, and differs between sites for the same
    browser, so it links nothing across sites. Labels are not unique: among n visitors of a
    site, one shares its label with another with a chance of about (n − 1) / LABEL_SPACE
    (0.007 % at 1,000 visitors, 0.7 % at 100,000), and n(n − 1) / (2 × LABEL_SPACE) pairs
    collide on average (0.03 at 1,000, 3.4 at 10,000); the full id stays beside it.
    """
    if display_name and display_name not in (visitor_id, default_display_name(visitor_id)):
        return display_name
    digest = hashlib.blake2b(f"{site_id}\x00{visitor_id}".encode(), digest_size=8).digest()
    number = int.from_bytes(digest, "big")
    number, adjective = divmod(number, len(LABEL_ADJECTIVES))
    number, animal = divmod(number, len(LABEL_ANIMALS))
    return (f"{LABEL_ADJECTIVES[adjective]} {LABEL_ANIMALS[animal]} "
            f"{100 + number % LABEL_NUMBERS}")


def listed_label(site_id: str, visitor_id: Any, names: dict[tuple[str, str], str]
                 ) -> str | None:
    """`visitor_label` for a row of a list that looked its visitors' names up with
    `display_names`; None for a row without a visitor."""
    if not isinstance(visitor_id, str) or not visitor_id:
        return None
    return visitor_label(site_id, visitor_id, names.get((site_id, visitor_id)))


async def privacy_flags(store: Store, site_id: str, visitor_id: str | None, *,
                        session: Any = None) -> PrivacyFlags:
    """The visitor's restriction and objection flags (none for unknown visitors)."""
    if not visitor_id:
        return PrivacyFlags()
    doc = await store.collection(COLLECTION).find_one(
        {"_id": profile_id(site_id, visitor_id)}, {"restricted": 1, "objected": 1},
        session=session)
    if doc is None:
        return PrivacyFlags()
    return PrivacyFlags(bool(doc.get("restricted")), bool(doc.get("objected")))


async def restricted_among(store: Store, site_id: str, visitor_ids: list[str], *,
                           session: Any = None) -> set[str]:
    """Which of these visitors are restricted, in one query."""
    if not visitor_ids:
        return set()
    return set(await store.collection(COLLECTION).distinct(
        "visitorId", {"_id": {"$in": [profile_id(site_id, v) for v in visitor_ids]},
                      "restricted": True}, session=session))


async def set_privacy_flag(store: Store, site_id: str, visitor_id: str, flag: str, on: bool,
                           *, now: datetime, session: Any = None) -> bool | None:
    """Switch `restricted` or `objected` on or off; returns the flag as it was before, None
    when there is no profile.

    Switching on keeps the time of the first switch while the flag stays on (`$min`), so
    pressing the button twice does not make a restriction look newer than it is; switching off
    drops the time, so a later switch starts afresh.
    """
    if flag not in PRIVACY_FLAG_FIELDS:
        raise ValueError(f"not a privacy flag: {flag!r}")
    update: dict[str, Any] = (
        {"$set": {flag: True}, "$min": {f"{flag}At": now}} if on
        else {"$set": {flag: False}, "$unset": {f"{flag}At": ""}})
    before = await store.collection(COLLECTION).find_one_and_update(
        {"_id": profile_id(site_id, visitor_id)}, update, projection={flag: 1},
        session=session)
    return None if before is None else bool(before.get(flag))


async def privacy_holds(store: Store, site_id: str) -> list[PrivacyHold]:
    """The site's restricted or objecting visitors, the most recently held first.

    Not paged: each hold is set by hand through a data-subject request, so the list stays as
    short as the one `restricted_visitor_ids` reads on every dashboard list.
    """
    found = store.collection(COLLECTION).find(
        {"siteId": site_id, "$or": [{flag: True} for flag in PRIVACY_FLAG_FIELDS]},
        {"visitorId": 1, "restricted": 1, "restrictedAt": 1, "objected": 1, "objectedAt": 1})
    holds = [PrivacyHold(
        visitor_id=doc["visitorId"],
        restricted=bool(doc.get("restricted")),
        restricted_at=doc.get("restrictedAt") if doc.get("restricted") else None,
        objected=bool(doc.get("objected")),
        objected_at=doc.get("objectedAt") if doc.get("objected") else None,
    ) async for doc in found]
    # Two stable sorts: newest hold first, unknown times last, ties in visitor id order.
    holds.sort(key=lambda hold: hold.visitor_id)
    holds.sort(key=_latest_hold_time, reverse=True)
    return holds


async def display_names(store: Store, subjects: list[tuple[str, str]]
                        ) -> dict[tuple[str, str], str]:
    """The display names of these (site, visitor) profiles that exist, by profile key."""
    if not subjects:
        return {}
    found = store.collection(COLLECTION).find(
        {"_id": {"$in": sorted({profile_id(site, visitor) for site, visitor in subjects})}},
        {"siteId": 1, "visitorId": 1, "displayName": 1})
    return {(doc["siteId"], doc["visitorId"]): doc.get("displayName") or doc["visitorId"]
            async for doc in found}


def _latest_hold_time(hold: PrivacyHold) -> datetime:
    times = [at for at in (hold.restricted_at, hold.objected_at) if at is not None]
    return max(times) if times else datetime.min.replace(tzinfo=UTC)


async def touch(store: Store, site_id: str, visitor_id: str, *, seen_at: datetime,
                facts: VisitorFacts, activity: dict[str, Any] | None = None,
                counts: dict[str, int] | None = None, display_name: str | None = None,
                email: str | None = None, refuse_held: bool = False,
                session: Any = None) -> dict[str, Any]:
    """Create or update the profile in one atomic upsert; returns its counts afterwards.

    With `refuse_held` a restricted or objecting visitor raises `VisitorHeld` after the update,
    so the caller's transaction aborts and nothing of it stays: the gate's visitor rule is then
    decided by the write itself, in the same round trip and with no gap between check and write.
    It is meant for a transaction's write (`session`): outside one the update would stay.
    """
    set_fields = facts.as_update()
    on_insert: dict[str, Any] = {"siteId": site_id, "visitorId": visitor_id,
                                 "restricted": False, "objected": False}
    if display_name:
        set_fields["displayName"] = display_name
        set_fields["displayNameSource"] = "lead"
    else:
        on_insert["displayName"] = default_display_name(visitor_id)
        on_insert["displayNameSource"] = "default"
    update: dict[str, Any] = {
        "$setOnInsert": on_insert,
        "$min": {"firstSeen": seen_at},
        "$max": {"lastSeen": seen_at},
    }
    if set_fields:
        update["$set"] = set_fields
    if activity is not None:
        update["$push"] = {"recent": {"$each": [activity], "$slice": -RECENT_ACTIVITY}}
    if counts:
        update["$inc"] = {f"counts.{key}": value for key, value in counts.items()}
    if email:
        update["$addToSet"] = {"emails": email}
    key = {"_id": profile_id(site_id, visitor_id)}
    visitors = store.collection(COLLECTION)
    projection = {"counts": 1, **dict.fromkeys(PRIVACY_FLAG_FIELDS, 1)}
    # The pre-image plus this update's increments is the post-image: the update is atomic, and
    # asking for the pre-image spares the engine a second read of the whole profile.
    try:
        before = await visitors.find_one_and_update(
            key, update, upsert=True, projection=projection,
            return_document=ReturnDocument.BEFORE, session=session)
    except DuplicateKeyError:
        if session is not None:
            # Inside a transaction the race is a write conflict that the driver retries; a
            # duplicate key here has aborted the transaction, and no second try may run in it.
            raise
        # Two first requests raced to create the profile; the loser's update now matches.
        before = await visitors.find_one_and_update(
            key, update, upsert=True, projection=projection,
            return_document=ReturnDocument.BEFORE)
    if refuse_held and before is not None:
        # In the gate's order (privacy/gate.py): restriction, then objection.
        for flag in PRIVACY_FLAG_FIELDS:
            if before.get(flag):
                raise VisitorHeld(flag)
    after = dict((before or {}).get("counts") or {})
    for counter, amount in (counts or {}).items():
        after[counter] = after.get(counter, 0) + amount
    return after


async def keep_seen(store: Store, site_id: str, visitor_id: str, *, seen_at: datetime,
                    session: Any) -> None:
    """Move an existing profile's last seen, which retention reads (`expired_visitor_ids`), to
    `seen_at` when later, as `touch` does, without creating a profile.

    A restricted or objecting visitor raises `VisitorHeld` after the update, as with
    `touch(refuse_held=True)`: meant for a transaction's write, which that aborts.
    """
    before = await store.collection(COLLECTION).find_one_and_update(
        {"_id": profile_id(site_id, visitor_id)}, {"$max": {"lastSeen": seen_at}},
        projection=dict.fromkeys(PRIVACY_FLAG_FIELDS, 1), session=session)
    for flag in PRIVACY_FLAG_FIELDS:
        if before is not None and before.get(flag):
            raise VisitorHeld(flag)


async def countries_and_devices(store: Store, site_id: str, visitor_ids: list[str], *,
                                session: Any = None) -> dict[str, tuple[str | None, str | None]]:
    """The country (upper case) and device type each of these visitors' profiles holds, by
    visitor id; what is not a text counts as unknown."""
    found: dict[str, tuple[str | None, str | None]] = {}
    async for profile in store.collection(COLLECTION).find(
            {"_id": {"$in": [profile_id(site_id, visitor_id) for visitor_id in visitor_ids]}},
            {"visitorId": 1, "location.country": 1, "device.type": 1}, session=session):
        location, device = profile.get("location"), profile.get("device")
        country = location.get("country") if isinstance(location, dict) else None
        kind = device.get("type") if isinstance(device, dict) else None
        found[profile["visitorId"]] = (country.upper() if isinstance(country, str) else None,
                                       kind if isinstance(kind, str) else None)
    return found


async def find_profile(store: Store, site_id: str, visitor_id: str) -> dict[str, Any] | None:
    """The profile, or None."""
    return await store.collection(COLLECTION).find_one({"_id": profile_id(site_id, visitor_id)})


async def expired_visitor_ids(store: Store, site_id: str, before: datetime, *, limit: int,
                              session: Any = None) -> list[str]:
    """The visitor ids of up to `limit` of the site's profiles not seen since `before`."""
    cursor = store.collection(COLLECTION).find(
        EXPIRY.query(site_id, before), {"visitorId": 1}, session=session,
    ).sort(EXPIRY.time_field, ASCENDING).limit(limit)
    return [doc["visitorId"] async for doc in cursor]


async def trim_recent(store: Store, site_id: str, before: datetime, kind: str, *, limit: int,
                      session: Any = None) -> tuple[int, int]:
    """Take the `kind` entries older than `before` out of the recent activity of up to `limit`
    of the site's profiles (copies of records past their retention); returns (profiles found,
    profiles changed)."""
    old = {"kind": kind, "at": {"$lt": before}}
    ids = [doc["_id"] async for doc in store.collection(COLLECTION).find(
        {"siteId": site_id, "recent": {"$elemMatch": old}}, {"_id": 1},
        session=session).limit(limit)]
    if not ids:
        return 0, 0
    changed = await store.collection(COLLECTION).update_many(
        {"_id": {"$in": ids}}, {"$pull": {"recent": old}}, session=session)
    return len(ids), changed.modified_count


async def restricted_visitor_ids(store: Store, site_id: str, *, session: Any = None
                                 ) -> list[str]:
    """Ids of the site's restricted visitors, to leave out of dashboard lists and charts.

    The list is as long as the number of restrictions, which are rare and made by hand.
    """
    return sorted(await store.collection(COLLECTION).distinct(
        "visitorId", {"siteId": site_id, "restricted": True}, session=session))


async def linked_profiles(store: Store, site_id: str, wp_user_id: Any, visitor_id: str, *,
                          limit: int) -> list[dict[str, Any]]:
    """The site's other unrestricted profiles of the same WordPress user, last seen first."""
    return await store.collection(COLLECTION).find({
        "siteId": site_id, "wpUserId": wp_user_id,
        "visitorId": {"$ne": visitor_id}, "restricted": {"$ne": True},
    }).sort("lastSeen", DESCENDING).limit(limit).to_list(None)


async def last_pageview_seen(store: Store, site_id: str) -> datetime | None:
    """When the site's most recently seen visitor with a pageview was last seen; None before
    the first pageview. The visitors-by-last-seen index finds it in one step once data flows."""
    found = await store.collection(COLLECTION).find(
        {"siteId": site_id, "counts.pageviews": {"$gt": 0}}, {"lastSeen": 1}).sort(
        "lastSeen", DESCENDING).limit(1).to_list(None)
    return found[0]["lastSeen"] if found else None


async def visitors_with_email(store: Store, site_id: str, address: str) -> list[Any]:
    """The visitor ids of the site's profiles holding this (normalised) address."""
    return await store.collection(COLLECTION).distinct(
        "visitorId", {"siteId": site_id, "emails": address})


async def same_user_visitor_ids(store: Store, site_id: str, visitor_ids: list[str]) -> list[Any]:
    """The visitor ids of every profile sharing a WordPress user with these visitors (none when
    none of them has one)."""
    users = await store.collection(COLLECTION).distinct(
        "wpUserId", {"siteId": site_id, "visitorId": {"$in": visitor_ids},
                     "wpUserId": {"$nin": [None, ""]}})
    if not users:
        return []
    return await store.collection(COLLECTION).distinct(
        "visitorId", {"siteId": site_id, "wpUserId": {"$in": users}})


async def name_profile(store: Store, site_id: str, visitor_id: str, update: dict[str, Any], *,
                       session: Any = None) -> None:
    """Set fields of the profile (its e-mails and name after a lead changes)."""
    await store.collection(COLLECTION).update_one(
        {"_id": profile_id(site_id, visitor_id)}, {"$set": update}, session=session)


async def profiles_for_rebuild(store: Store, site_id: str,
                               visitor_ids: list[str] | None = None, *, session: Any = None
                               ) -> dict[str, dict[str, Any]]:
    """Every profile of the site (or of those visitors) with its restriction, country and
    device, by visitor id."""
    query: dict[str, Any] = {"siteId": site_id}
    if visitor_ids is not None:
        query["visitorId"] = {"$in": visitor_ids}
    return {doc["visitorId"]: doc async for doc in store.collection(COLLECTION).find(
        query, {"visitorId": 1, "restricted": 1, "location.country": 1, "device.type": 1},
        session=session)}
