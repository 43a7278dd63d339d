"""Admission and enrichment shared by every ingest path (/ingest and /sdk/v1).

`VisitorIntake.admit` applies the privacy gate to an item, leaves out bots and headless browsers
(`bot_reason`), and counts a drop with its reason (per process for /metrics and, for the reasons
a site's owner can act on, per site and day in documents/ingest_drops.py for the first-run
checklist);
`VisitorIntake.describe_visitor` turns the raw visitor context into what a profile may keep:
the country from the full IP address, then only the anonymised address, and the parsed device.
The full address never leaves this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from config import Settings
from config.metrics import Metrics
from documents import ingest_drops, visitors
from documents import sites as site_documents
from documents.store import Store
from errors import InvalidInput
from privacy.exclusion import site_exclusion_rules
from privacy.gate import CollectionContext, GateDecision, ItemKind, decide
from privacy.geo import CountryResolver, NullCountryResolver
from privacy.ipaddr import (
    anonymise_address,
    anonymise_request_texts,
    own_hosts,
    parse_client_ip,
)
from privacy.url_secrets import secret_parameters, strip_item_urls
from privacy.useragent import UserAgentParser

ITEMS_METRIC = "ingest_items_total"
ITEMS_HELP = "Items received by ingest, by kind and outcome (stored or dropped with a reason)."

#: Drop reasons of items sent by automation rather than a visitor.
BOT = "bot"
HEADLESS = "headless_browser"
#: A browser request from a page whose origin the site does not allow (handlers/sdk.py).
ORIGIN_NOT_ALLOWED = "origin_not_allowed"
#: Drop reasons also counted per site (`count_site_drop`): those that tell an owner setting up
#: a site why their own visit is missing. A visitor's own choices (restricted, objected) and
#: the site's switches (recordings off) are not a setup problem.
SITE_COUNTED = frozenset({BOT, HEADLESS, "gpc", "consent_missing", "excluded_url",
                          ORIGIN_NOT_ALLOWED})

#: Client clocks drift; times further ahead than this are taken as "now".
MAX_FUTURE_SKEW = timedelta(minutes=5)
#: Times older than this are taken as "now" too: a clock reset to 1970 or a replayed old
#: payload must not become a visitor's first or last visit. 30 days, as Sentry's ingest does
#: (Relay's max_secs_in_past); the plugin's outbox retries long before that.
MAX_PAST_AGE = timedelta(days=30)


@dataclass(frozen=True)
class Outcome:
    """What became of one accepted item."""

    stored: bool
    reason: str | None = None
    item_id: str | None = None

    @classmethod
    def dropped(cls, reason: str) -> Outcome:
        """Acknowledged and not stored, for `reason`."""
        return cls(False, reason)


def parse_time(value: str | None, now: datetime | None = None, *,
               field: str = "occurredAt") -> datetime:
    """A client-given ISO 8601 time in UTC; missing, unreadable, too far ahead or too old means
    now. One outside the years 1 to 9999 once its offset is applied
    (`0001-01-01T00:00:00+05:00`) is no instant at all: InvalidInput naming `field`."""
    now = now or datetime.now(UTC)
    if not value:
        return now
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return now
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        parsed = parsed.astimezone(UTC)
    except OverflowError:
        raise InvalidInput(f"{field} falls outside the years 1 to 9999 in UTC",
                           field=field) from None
    if parsed > now + MAX_FUTURE_SKEW or parsed < now - MAX_PAST_AGE:
        return now
    return parsed


class VisitorIntake:
    """The privacy gate, counting and visitor enrichment, owned by the app."""

    def __init__(self, store: Store, settings: Settings, metrics: Metrics,
                 countries: CountryResolver | NullCountryResolver,
                 user_agents: UserAgentParser) -> None:
        self.store = store
        self.settings = settings
        self.metrics = metrics
        self._countries = countries
        self._user_agents = user_agents

    async def admit(self, site: dict[str, Any], kind: ItemKind, payload: dict[str, Any],
                    *, gpc: bool = False, held_refused_by_write: bool = False) -> GateDecision:
        """Whether this item may be stored; a refusal is counted with its reason.

        An admitted item's request texts (URL, title, referrer) have every IP address in them
        anonymised in place, as the visitor's own address is (privacy rule 1), and its URLs
        lose their secret parameters (privacy/url_secrets.py): nothing after the gate, stored
        or folded, sees an order key or a token. The gate itself reads the URL as sent, so an
        excluded-URL pattern may name a parameter.
        `held_refused_by_write`: the caller's transaction refuses a restricted or objecting
        visitor itself (`visitors.touch(refuse_held=True)`, then `refused_held`), so their
        flags are not read here.
        """
        if not gpc and (automated := self.bot_reason(payload)) is not None:
            # A crawler or a scripted browser is not a visitor: none of its items may become a
            # visitor, a pageview, a device or any other figure. Counted apart, like GPC drops.
            self.count(kind, "dropped", automated)
            await self.count_site_drop(site, automated)
            return GateDecision(False, automated)
        flags = (visitors.PrivacyFlags() if held_refused_by_write else
                 await visitors.privacy_flags(self.store, site["_id"], payload.get("visitorId")))
        settings = {**site_documents.DEFAULT_SETTINGS, **site.get("settings", {})}
        decision = decide(CollectionContext(
            kind=kind,
            url=payload.get("url"),
            gpc=gpc or bool(payload.get("gpc")),
            consent_granted=payload.get("consent") == "granted",
            require_consent=bool(settings["requireConsent"]),
            recordings_enabled=bool(settings["recordings"]),
            exclusions=site_exclusion_rules(site),
            visitor_restricted=flags.restricted,
            visitor_objected=flags.objected,
        ))
        if not decision.allowed:
            self.count(kind, "dropped", decision.reason or "unknown")
            await self.count_site_drop(site, decision.reason or "unknown")
        else:
            anonymise_request_texts(payload, own_hosts(site.get("allowedOrigins", ())))
            strip_item_urls(payload, secret_parameters(site))
        return decision

    def refused_held(self, kind: ItemKind, held: visitors.VisitorHeld) -> Outcome:
        """Count and answer an item whose write found its visitor restricted or objecting."""
        self.count(kind, "dropped", held.reason)
        return Outcome.dropped(held.reason)

    def bot_reason(self, payload: dict[str, Any]) -> str | None:
        """`headless_browser` or `bot` when the payload's user agent is one, else None.

        privacy/useragent.py decides: ua-parser's "Spider" device class and browser families
        naming a bot, crawler, spider, slurp or headless browser (`_BOT_FAMILY`).
        """
        device = self._user_agents.parse(payload.get("userAgent"))
        if device.device_type != "bot":
            return None
        return HEADLESS if (device.browser or "").lower().startswith("headless") else BOT

    def count(self, kind: str, outcome: str, reason: str = "", amount: int = 1) -> None:
        """Count items of `kind` as stored or dropped (with a reason)."""
        self.metrics.count(ITEMS_METRIC, ITEMS_HELP, amount, kind=kind, outcome=outcome,
                           reason=reason)

    async def count_site_drop(self, site: dict[str, Any], reason: str) -> None:
        """Count a dropped item on its site's day, when `reason` is one in `SITE_COUNTED`."""
        if reason in SITE_COUNTED:
            now = datetime.now(UTC)
            await ingest_drops.count_drop(self.store, site["_id"], reason,
                                          site_documents.day_clock(site).day_of(now), now)

    def describe_device(self, payload: dict[str, Any]) -> dict[str, str | None]:
        """Browser, system and device class of the payload's user agent (never the header)."""
        device = self._user_agents.parse(payload.get("userAgent"))
        return {"browser": device.browser, "os": device.os,
                "deviceType": None if device.device_type == "unknown" else device.device_type}

    def describe_visitor(self, payload: dict[str, Any]) -> visitors.VisitorFacts:
        """What the profile may keep about the visitor behind this payload."""
        address = parse_client_ip(payload.get("ip"))
        geo = self._countries.lookup(address)
        device = self._user_agents.parse(payload.get("userAgent"))
        return visitors.VisitorFacts(
            country=geo.country,
            time_zone=payload.get("timeZone") or geo.time_zone,
            ip_address=anonymise_address(address) if address is not None else None,
            browser=device.browser,
            os=device.os,
            device_type=device.device_type,
            screen=payload.get("screen"),
            language=payload.get("language"),
            wp_user_id=_wp_user_id(payload.get("wpUserId")),
        )


def _wp_user_id(value: Any) -> str | None:
    if value is None or value == "" or value == 0:
        return None
    return str(value)
