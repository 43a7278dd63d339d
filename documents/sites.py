"""Sites: their settings, allowed origins and keys.

The API key is shown once (creation, rotation) and stored only as an HMAC under a server-side
pepper; lookups go by that digest and compare in constant time. The public key is public by
design. The product-statement signing key is derived from the API key and must stay
recoverable after the key itself is gone, so it is sealed with AES-256-GCM.

Each process keeps the sites it found by key (`SiteKeyring`), so a returning visitor's request
does not read its site again; every change to a site is announced to every process, which
forgets it (docs/decisions.md, "API keys, public keys and sealed secrets"). The crypto (the
sealer, the statement-key derivation) and the announcements are passed in.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import re
import secrets
import time
import zoneinfo
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

from pymongo import ReturnDocument

from documents.accounts import AuthenticatedUser, new_id
from documents.store import ASCENDING, Index, Store
from errors import Forbidden, InvalidInput, NotFound
from instants import DayClock, format_instant, zone_change_instant

COLLECTION = "sites"

INDEXES = [
    Index(COLLECTION, (("organizationId", ASCENDING), ("createdAt", ASCENDING))),
    Index(COLLECTION, (("apiKeyHash", ASCENDING),), unique=True),
    Index(COLLECTION, (("publicKey", ASCENDING),), unique=True),
]

DEFAULT_SETTINGS: dict[str, Any] = {
    "recordings": True,
    "consoleCapture": False,
    "requireConsent": False,
    "excludedUrls": [],
    # The customer's own pages, recorded masked (privacy/personal_pages.py): WooCommerce's
    # checkout (with order received under it) and My Account, at their default slugs.
    "personalPages": ["/checkout", "/checkout/*", "/my-account", "/my-account/*"],
}

#: The currency of the site's first paid order folded, kept once known: the reporting currency
#: until the owner chooses one (documents/commerce.py `reporting_currency`).
FIRST_CURRENCY = "firstCurrency"
#: The site's time zones in time order, each {"from": instant or None, "zone": IANA name}.
TIME_ZONES = "timeZones"
API_KEY_PREFIX = "sk_"
PUBLIC_KEY_PREFIX = "pk_"


class Sealer(Protocol):
    """Seals secrets bound to a purpose (privacy.sealing.SecretSealer, passed in)."""

    def seal(self, plaintext: str, purpose: str) -> str: ...

    def open(self, sealed: str, purpose: str) -> str: ...


class SiteChanges(Protocol):
    """How a change to a site reaches every process's keyring (realtime/site_changes.py)."""

    def live(self) -> bool:
        """True while every change announced by any process reaches this one."""

    def listen(self, forget: Callable[[str | None], None]) -> None:
        """Call `forget(site_id)` for each site announced as changed, and `forget(None)` when
        announcements may have been missed (the subscription began, or began again)."""

    async def announce(self, site_id: str) -> None:
        """Tell every process the site changed; a transport failure is logged, never raised."""


@dataclass(frozen=True)
class SiteKeys:
    """Key material handed out once; only digests and sealed forms are stored."""

    api_key: str
    public_key: str


class KeyHasher:
    """HMAC-SHA256 of API keys under a pepper derived from SECRET_KEY."""

    def __init__(self, secret_key: bytes) -> None:
        self._pepper = hashlib.sha256(b"visitor-service/api-key-hash/v1\x00" + secret_key).digest()

    def digest(self, api_key: str) -> str:
        """The stored form of an API key."""
        return hmac.new(self._pepper, api_key.encode("utf-8"), "sha256").hexdigest()


def new_api_key() -> str:
    """A fresh secret site API key."""
    return API_KEY_PREFIX + secrets.token_urlsafe(30)


def new_public_key() -> str:
    """A fresh public browser key."""
    return PUBLIC_KEY_PREFIX + secrets.token_urlsafe(18)


#: One label of a host name as a browser sends it in `Origin` (letters, digits, hyphens; the
#: underscore some hosts carry). No wildcard: `Origin` never holds one, so `https://*` could
#: only ever be stored literally and match nothing.
_HOST_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")


def normalise_origin(origin: str) -> str:
    """`scheme://host[:port]` in lower case, or InvalidInput.

    The host is a DNS name (an international one in its ASCII form) or an IP address; a
    wildcard, an empty label or any other character is not an origin a browser sends.
    """
    refused = InvalidInput(f"'{origin}' is not an origin like https://shop.example",
                           field="allowedOrigins")
    text = origin.strip(" ")
    if any(ord(char) <= 0x20 or 0x7F <= ord(char) <= 0x9F for char in text):
        raise refused
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") \
            or parts.query or parts.fragment or parts.username or parts.password \
            or parts.netloc.endswith(":"):
        raise refused
    default_port = {"http": 80, "https": 443}[parts.scheme]
    try:
        port = parts.port
    except ValueError:
        raise InvalidInput(f"'{origin}' has a bad port", field="allowedOrigins") from None
    if port == 0:
        raise InvalidInput(f"'{origin}' has a bad port", field="allowedOrigins")
    host = _origin_host(parts.hostname)
    if host is None:
        raise refused
    return f"{parts.scheme}://{host}" + (f":{port}" if port and port != default_port else "")


def _origin_host(hostname: str) -> str | None:
    """The host as it appears in an origin (IPv6 in brackets), or None when it is not one."""
    if "%" in hostname:  # an IPv6 zone is the server's own business
        return None
    if ":" in hostname or hostname.replace(".", "").isdigit():
        try:
            address = ipaddress.ip_address(hostname)
        except ValueError:
            return None
        return f"[{address.compressed}]" if address.version == 6 else str(address)
    try:
        host = hostname.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return None
    labels = host.split(".")
    if len(host) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        return None
    return host


def normalise_settings(current: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """Merge setting changes, already checked (privacy.exclusion.checked_settings), into the
    current settings. Retentions are merged kind by kind: a change names only the kinds it
    changes."""
    merged = {**DEFAULT_SETTINGS, **current, **changes}
    if "retentionDays" in changes:
        merged["retentionDays"] = {**current.get("retentionDays", {}),
                                   **changes["retentionDays"]}
    return merged


def time_zone(site: dict[str, Any]) -> ZoneInfo:
    """The site's time zone (`settings.timeZone`, an IANA name): its days run from midnight
    to midnight there (from when a change takes effect: `day_clock`). UTC until one is set."""
    return ZoneInfo((site.get("settings") or {}).get("timeZone") or "UTC")


@functools.cache
def _time_zone_names() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def known_time_zone(name: str) -> bool:
    """Whether `name` is a time zone the system's database knows (Europe/Berlin, UTC)."""
    return name in _time_zone_names()


def day_clock(site: dict[str, Any]) -> DayClock:
    """Where the site's days begin and end: in each zone it had, from when it had it
    (`timeZones`, kept by `zone_history`), else in its zone."""
    history = site.get(TIME_ZONES)
    if not history:
        return DayClock(((None, time_zone(site)),))
    return DayClock(tuple((_utc(entry["from"]), ZoneInfo(entry["zone"])) for entry in history))


async def site_clock(store: Store, site_id: str, *, session: Any = None) -> DayClock:
    """The days of the site with this id (`day_clock`), for a caller that has only the id."""
    site = await find_site(store, site_id, {"settings": 1, TIME_ZONES: 1}, session=session)
    return day_clock(site or {})


def _utc(moment: datetime | None) -> datetime | None:
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment


def zone_history(site: dict[str, Any], zone_name: str, now: datetime) -> list[dict[str, Any]]:
    """The site's zones once it changes to `zone_name` at `now`: the change takes effect when
    the site's current day ends (`instants.zone_change_instant`), so the days already folded
    keep their cut; a change not in effect yet is replaced."""
    history = [dict(entry) for entry in site.get(TIME_ZONES) or [
        {"from": None, "zone": time_zone(site).key}]]
    while len(history) > 1 and _utc(history[-1]["from"]) > now:
        history.pop()
    if history[-1]["zone"] == zone_name:
        return history
    settled = DayClock(tuple((_utc(e["from"]), ZoneInfo(e["zone"])) for e in history))
    return [*history, {"from": zone_change_instant(settled, now), "zone": zone_name}]


def public_view(site: dict[str, Any]) -> dict[str, Any]:
    """The site as the dashboard API shows it: no key digests, no sealed material."""
    return {
        "id": site["_id"],
        "organizationId": site["organizationId"],
        "name": site["name"],
        "allowedOrigins": site.get("allowedOrigins", []),
        "settings": {**DEFAULT_SETTINGS, **site.get("settings", {})},
        "publicKey": site["publicKey"],
        "apiKeyHint": site.get("apiKeyHint"),
        "apiKeyRotatedAt": format_instant(site.get("apiKeyRotatedAt")),
        "timeZoneChanges": [{"at": format_instant(_utc(entry["from"])), "zone": entry["zone"]}
                            for entry in site.get(TIME_ZONES) or [] if entry["from"]],
        "createdAt": format_instant(site.get("createdAt")),
        "updatedAt": format_instant(site.get("updatedAt")),
    }


def _statement_purpose(site_id: str) -> str:
    return f"statement-key:{site_id}"


@dataclass(frozen=True)
class _Kept:
    """A site found by key, and when the read that found it began (monotonic seconds)."""

    site: dict[str, Any]
    read_at: float


class SiteKeyring:
    """Creates, changes, rotates and resolves site keys, and keeps the sites it found by key.

    A site found by API key digest or public key is kept for the next lookups in this process
    (at most `cache_size` entries, one per key, least recently used dropped first, none older than
    `max_age_seconds`), but only while `changes.live()`: while every change made by any process
    reaches this one. Otherwise (no `changes`, the subscription not up yet or lost) every lookup
    reads the store, and whatever was kept is forgotten when the subscription comes back. A key
    that finds no site is not kept.

    Every write here forgets the site in this process once its transaction has ended, before
    the caller can answer, and announces it to the others. A lookup whose read began before a
    change was forgotten does not keep what it read, since that may be the old site. So a
    rotated key, a changed setting or origin applies to this process's next request, and to
    another process's as soon as the announcement arrives there; an announcement lost between
    the write and Redis is bounded by `max_age_seconds`.

    A kept site is shared by the requests that find it: read it, never change it.
    """

    def __init__(self, store: Store, hasher: KeyHasher, sealer: Sealer,
                 derive_statement_key: Callable[[str], bytes], *,
                 changes: SiteChanges | None = None, cache_size: int = 0,
                 max_age_seconds: float = 0.0) -> None:
        self._store = store
        self._hasher = hasher
        self._sealer = sealer
        self._derive_statement_key = derive_statement_key
        self._changes = changes
        self._cache_size = cache_size
        self._max_age = max_age_seconds
        # "api:<digest>" or "public:<key>" -> the site that lookup found.
        self._kept: OrderedDict[str, _Kept] = OrderedDict()
        # Moves with every forgetting: a lookup keeps its site only if it has not moved since
        # the lookup's read began.
        self._forgotten = 0
        if changes is not None:
            changes.listen(self._forget)

    def _key_fields(self, site_id: str, api_key: str) -> dict[str, Any]:
        statement_key = self._derive_statement_key(api_key)
        return {
            "apiKeyHash": self._hasher.digest(api_key),
            "apiKeyHint": api_key[:6] + "…" + api_key[-4:],
            "statementKeySealed": self._sealer.seal(statement_key.hex(),
                                                    _statement_purpose(site_id)),
        }

    async def create_site(self, user: AuthenticatedUser, organization_id: str, name: str,
                          allowed_origins: list[str], settings: dict[str, Any], *,
                          session: Any = None) -> tuple[dict[str, Any], SiteKeys]:
        """A new site in the organization; the keys are returned once, here.

        Nothing to forget: no lookup can have kept keys that did not exist."""
        require_admin(user, organization_id)
        site_id = new_id()
        api_key, public_key = new_api_key(), new_public_key()
        now = datetime.now(UTC)
        site = {
            "_id": site_id,
            "organizationId": organization_id,
            "name": name,
            "allowedOrigins": sorted({normalise_origin(o) for o in allowed_origins}),
            "settings": normalise_settings({}, settings),
            TIME_ZONES: [{"from": None, "zone": settings.get("timeZone") or "UTC"}],
            "publicKey": public_key,
            "createdAt": now,
            "updatedAt": now,
            "apiKeyRotatedAt": None,
            **self._key_fields(site_id, api_key),
        }
        await self._store.collection(COLLECTION).insert_one(site, session=session)
        return site, SiteKeys(api_key, public_key)

    async def update_site(self, user: AuthenticatedUser, site: dict[str, Any],
                          changes: dict[str, Any], *, session: Any = None
                          ) -> tuple[dict[str, Any], list[str]]:
        """Apply name/origin/settings changes; returns the site and the names of the fields
        whose value differs from what was stored (a form sends every field; only changes are
        audited)."""
        require_admin(user, site["organizationId"])
        update: dict[str, Any] = {}
        changed: list[str] = []
        if "name" in changes and changes["name"] != site.get("name"):
            update["name"] = changes["name"]
            changed.append("name")
        if "allowedOrigins" in changes:
            origins = sorted({normalise_origin(o) for o in changes["allowedOrigins"]})
            if origins != sorted(site.get("allowedOrigins", [])):
                update["allowedOrigins"] = origins
                changed.append("allowedOrigins")
        if "settings" in changes:
            before = normalise_settings(site.get("settings", {}), {})
            after = normalise_settings(site.get("settings", {}), changes["settings"])
            moved = [key for key in changes["settings"] if after[key] != before.get(key)]
            if moved:
                update["settings"] = after
                changed.extend(f"settings.{key}" for key in moved)
            if "timeZone" in moved:
                update[TIME_ZONES] = zone_history(site, after["timeZone"] or "UTC",
                                                  datetime.now(UTC))
        if not update:
            return site, []
        update["updatedAt"] = datetime.now(UTC)
        updated = await self._store.collection(COLLECTION).find_one_and_update(
            {"_id": site["_id"]}, {"$set": update},
            return_document=ReturnDocument.AFTER, session=session
        )
        await self._store.after_transaction(session, lambda: self.site_changed(site["_id"]))
        if updated is None:
            raise NotFound("site not found")
        return updated, changed

    async def restore_identity(self, site: dict[str, Any], site_id: str, keys: SiteKeys
                               ) -> dict[str, Any]:
        """The site just made, under an id and keys it had before (the embedded demo keeps its
        identity across restarts, never its data): the keys' stored forms made under this
        process's secrets, and the document `create_site` made gone."""
        again = {**site, "_id": site_id, "publicKey": keys.public_key,
                 **self._key_fields(site_id, keys.api_key)}
        await self._store.collection(COLLECTION).insert_one(again)
        await remove_site(self._store, site["_id"])
        return again

    async def adopt_time_zone(self, site: dict[str, Any], zone_name: str) -> str:
        """The shop's own time zone (its plugin says it), taken as the site's when the owner
        never chose one; returns the site's zone either way. From the end of the site's
        current day, as any change of zone (`zone_history`)."""
        chosen = (site.get("settings") or {}).get("timeZone")
        if chosen:
            return chosen
        now = datetime.now(UTC)
        adopted = await self._store.collection(COLLECTION).find_one_and_update(
            {"_id": site["_id"], "settings.timeZone": None},
            {"$set": {"settings.timeZone": zone_name, "updatedAt": now,
                      TIME_ZONES: zone_history(site, zone_name, now)}},
            return_document=ReturnDocument.AFTER)
        await self.site_changed(site["_id"])
        if adopted is None:  # chosen meanwhile
            found = await find_site(self._store, site["_id"], {"settings": 1})
            return ((found or {}).get("settings") or {}).get("timeZone") or zone_name
        return zone_name

    async def rotate_api_key(self, site: dict[str, Any], grace_seconds: int, *,
                             session: Any = None) -> tuple[dict[str, Any], str]:
        """Replace the API key; the old one stops at once, its statements after the grace."""
        api_key = new_api_key()
        now = datetime.now(UTC)
        updated = await self._store.collection(COLLECTION).find_one_and_update(
            {"_id": site["_id"]},
            {"$set": {
                **self._key_fields(site["_id"], api_key),
                "previousStatementKeySealed": site.get("statementKeySealed"),
                "previousStatementKeyUntil": now + timedelta(seconds=grace_seconds),
                "apiKeyRotatedAt": now,
                "updatedAt": now,
            }},
            return_document=ReturnDocument.AFTER, session=session,
        )
        await self._store.after_transaction(session, lambda: self.site_changed(site["_id"]))
        if updated is None:
            raise NotFound("site not found")
        return updated, api_key

    async def site_changed(self, site_id: str) -> None:
        """Forget the site here and announce it to every other process. The keyring's own
        writes call it once they are final; a change made to `sites` in any other way must
        call it too, or processes keep the old site up to `max_age_seconds`."""
        self._forget(site_id)
        if self._changes is not None:
            await self._changes.announce(site_id)

    def _forget(self, site_id: str | None) -> None:
        """Drop what is kept of this site (of every site for None)."""
        self._forgotten += 1
        if site_id is None:
            self._kept.clear()
            return
        for lookup in [lookup for lookup, kept in self._kept.items()
                       if kept.site["_id"] == site_id]:
            del self._kept[lookup]

    async def site_for_api_key(self, api_key: str) -> dict[str, Any] | None:
        """The site owning this API key, or None; the digest comparison is constant-time."""
        digest = self._hasher.digest(api_key)
        site = await self._site_where(f"api:{digest}", "apiKeyHash", digest)
        if site is None or not hmac.compare_digest(site["apiKeyHash"], digest):
            return None
        return site

    async def site_for_public_key(self, public_key: str) -> dict[str, Any] | None:
        """The site with this public browser key, or None."""
        if not public_key.startswith(PUBLIC_KEY_PREFIX):
            return None
        return await self._site_where(f"public:{public_key}", "publicKey", public_key)

    async def _site_where(self, lookup: str, field: str, value: str) -> dict[str, Any] | None:
        """The site whose `field` is `value`: the kept one while it may be used, else read."""
        keeps = self._cache_size > 0 and self._changes is not None and self._changes.live()
        began = time.monotonic()
        kept = self._kept.get(lookup) if keeps else None
        if kept is not None and began - kept.read_at < self._max_age:
            self._kept.move_to_end(lookup)
            return kept.site
        forgotten = self._forgotten
        site = await self._store.collection(COLLECTION).find_one({field: value})
        # Kept only if nothing was forgotten while the read ran (it may have read the site as
        # it was before that change) and changes still reach this process.
        if site is not None and keeps and forgotten == self._forgotten \
                and self._changes is not None and self._changes.live():
            self._kept[lookup] = _Kept(site, began)
            self._kept.move_to_end(lookup)
            while len(self._kept) > self._cache_size:
                self._kept.popitem(last=False)
        else:
            self._kept.pop(lookup, None)
        return site

    def statement_keys(self, site: dict[str, Any], now: datetime) -> list[bytes]:
        """The keys product statements may be signed with now: current, then previous in grace."""
        keys = [bytes.fromhex(self._sealer.open(site["statementKeySealed"],
                                                _statement_purpose(site["_id"])))]
        until = site.get("previousStatementKeyUntil")
        if site.get("previousStatementKeySealed") and until is not None:
            if until.replace(tzinfo=UTC) > now:
                keys.append(bytes.fromhex(self._sealer.open(site["previousStatementKeySealed"],
                                                            _statement_purpose(site["_id"]))))
        return keys


def require_admin(user: AuthenticatedUser, organization_id: str) -> None:
    """Forbidden unless an owner or admin of the organization; NotFound for non-members."""
    role = user.role_in(organization_id)
    if role is None:
        raise NotFound("organization not found")
    if not user.can_administer(organization_id):
        raise Forbidden("this action needs the owner or admin role", code="role_required")


async def find_site(store: Store, site_id: str, projection: dict[str, Any] | None = None, *,
                    session: Any = None) -> dict[str, Any] | None:
    """The site by its id (only the `projection`'s fields when given), or None."""
    return await store.collection(COLLECTION).find_one({"_id": site_id}, projection,
                                                        session=session)


async def keep_first_currency(store: Store, site_id: str, currency: str, *,
                              session: Any = None) -> None:
    """Keep `currency` as the site's first currency unless it has one already."""
    await store.collection(COLLECTION).update_one(
        {"_id": site_id, FIRST_CURRENCY: None}, {"$set": {FIRST_CURRENCY: currency}},
        session=session)


async def site_ids(store: Store) -> list[str]:
    """The id of every site."""
    return await store.collection(COLLECTION).distinct("_id")


async def site_for_user(store: Store, user: AuthenticatedUser, site_id: str) -> dict[str, Any]:
    """The site if the user belongs to its organization; NotFound otherwise (no existence leak)."""
    site = await find_site(store, site_id)
    if site is None or user.role_in(site["organizationId"]) is None:
        raise NotFound("site not found")
    return site


async def sites_for_user(store: Store, user: AuthenticatedUser) -> list[dict[str, Any]]:
    """Every site of every organization the user belongs to, oldest first."""
    cursor = store.collection(COLLECTION).find(
        {"organizationId": {"$in": list(user.roles)}}
    ).sort([("organizationId", ASCENDING), ("createdAt", ASCENDING)])
    return await cursor.to_list(None)


async def all_sites(store: Store) -> list[dict[str, Any]]:
    """Every site's id, organization and settings, in id order (the retention purge's walk)."""
    cursor = store.collection(COLLECTION).find(
        {}, {"organizationId": 1, "settings": 1, "name": 1}).sort("_id", ASCENDING)
    return await cursor.to_list(None)


async def sites_of_organizations(store: Store, organization_ids: list[str]
                                 ) -> list[dict[str, Any]]:
    """Every site of these organizations, oldest first."""
    return await store.collection(COLLECTION).find(
        {"organizationId": {"$in": organization_ids}}).sort("createdAt", ASCENDING).to_list(None)


async def retire_keys(store: Store, site_id: str) -> None:
    """Make the site's keys find nothing (a deletion's first step): its API key digest and
    public key become values no key hashes to (unique, like the keys), its statement keys go.
    The caller tells the keyring (`site_changed`), so every process forgets them at once."""
    await store.collection(COLLECTION).update_one(
        {"_id": site_id},
        {"$set": {"apiKeyHash": f"retired:{new_id()}", "publicKey": f"retired:{new_id()}",
                  "deletingAt": datetime.now(UTC)},
         "$unset": {"statementKeySealed": "", "previousStatementKeySealed": "",
                    "previousStatementKeyUntil": ""}})


async def remove_site(store: Store, site_id: str) -> None:
    """Delete the site's own document (a deletion's last step, after its data)."""
    await store.collection(COLLECTION).delete_one({"_id": site_id})
