"""Alert rules per site, and their episodes: what fired, when, and when it was resolved.

A rule (`alert_rules`) names a kind (derived/alert_figures.py says what each kind reads and
tests), its parameters, the channels it goes to and a cool-down; owners and admins change it,
and each evaluation writes its outcome on it (`evaluation`) for the Alerts page.

An episode (`alert_episodes`) is one firing of a rule about one subject (the rule itself, an
error, a lead): opened when the condition starts to hold, resolved when it no longer does.
Its key `episode` ("<subject>#<number>") is unique per rule, so when several evaluators meet,
exactly one insert of an episode succeeds and only that evaluator tells the owner; a
resolution is one conditional update, won by one of them too. Nothing here reads and then
writes on what it read.

A member's own settings for a site (`alert_member_settings`, one small document per member and
site) hold the rules they muted for themselves (their address is left out of those rules'
e-mails) and whether they want the digest, daily or weekly (tasks/digests.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from documents.accounts import new_id
from documents.store import ASCENDING, DESCENDING, Index, Store
from errors import InvalidInput, NotFound

RULES = "alert_rules"
EPISODES = "alert_episodes"
MEMBERS = "alert_member_settings"

#: Episodes are kept as long as the delivery log (documents/notifications.py).
EPISODE_RETENTION_SECONDS = 90 * 24 * 3600
#: A site's rules: each one is evaluated on every pass, so the list stays short.
MAX_RULES_PER_SITE = 50
#: Where an alert can go: the site's notification channels (documents/notifications.py).
CHANNELS = ("email", "webhook", "slack")
DEFAULT_COOLDOWN_MINUTES = 60
#: Kinds every site has a rule of, given when missing and muted rather than deleted.
BUILT_IN = {"purgeOverdue": "The retention purge overdue"}
#: Names the built-in rules' ids: one per site and kind, the same in every process.
_BUILT_IN_NAMESPACE = uuid.UUID("6f1c3a52-3f0e-4d8e-9a57-0b1f5c2e7d41")
#: How often a member may ask for the digest.
DIGEST_PERIODS = ("daily", "weekly")

INDEXES = [
    Index(RULES, (("siteId", ASCENDING), ("createdAt", ASCENDING))),
    # The evaluator's list of sites with a rule to evaluate.
    Index(RULES, (("muted", ASCENDING), ("siteId", ASCENDING))),
    # The purge's check of the purge-overdue rules on every pass, in every process.
    Index(RULES, (("kind", ASCENDING), ("muted", ASCENDING), ("siteId", ASCENDING))),
    # One firing per episode, whatever the number of evaluators.
    Index(EPISODES, (("ruleId", ASCENDING), ("episode", ASCENDING)), unique=True),
    Index(EPISODES, (("ruleId", ASCENDING), ("subject", ASCENDING), ("number", DESCENDING))),
    Index(EPISODES, (("ruleId", ASCENDING), ("resolvedAt", ASCENDING))),
    Index(EPISODES, (("firedAt", ASCENDING),), name="alert_episodes_ttl",
          expire_after_seconds=EPISODE_RETENTION_SECONDS),
    # Who muted a rule, when its alert is sent; and who wants the digest, on each digest pass.
    Index(MEMBERS, (("siteId", ASCENDING), ("mutedRules", ASCENDING))),
    Index(MEMBERS, (("digest", ASCENDING), ("siteId", ASCENDING))),
]


def view(rule: dict[str, Any]) -> dict[str, Any]:
    """A rule as the API shows it, with its last evaluation."""
    return {"id": rule["_id"], "kind": rule["kind"], "name": rule["name"],
            "params": rule.get("params") or {}, "channels": rule.get("channels") or [],
            "muted": bool(rule.get("muted")), "builtIn": bool(rule.get("builtIn")),
            "cooldownMinutes": rule.get("cooldownMinutes", DEFAULT_COOLDOWN_MINUTES),
            "evaluation": rule.get("evaluation"), "createdAt": rule.get("createdAt"),
            "updatedAt": rule.get("updatedAt")}


def _checked_channels(channels: list[str]) -> list[str]:
    unknown = sorted(set(channels) - set(CHANNELS))
    if unknown:
        raise InvalidInput(f"a channel is one of {', '.join(CHANNELS)}", field="channels")
    return sorted(set(channels))


async def list_rules(store: Store, site_id: str) -> list[dict[str, Any]]:
    """The site's rules, oldest first."""
    cursor = store.collection(RULES).find({"siteId": site_id}).sort(
        [("createdAt", ASCENDING), ("_id", ASCENDING)]).limit(MAX_RULES_PER_SITE)
    return [rule async for rule in cursor]


async def find_rule(store: Store, site_id: str, rule_id: str, *, session: Any = None
                    ) -> dict[str, Any]:
    """One rule of the site; NotFound otherwise."""
    rule = await store.collection(RULES).find_one({"_id": rule_id, "siteId": site_id},
                                                  session=session)
    if rule is None:
        raise NotFound("alert rule not found")
    return rule


async def create_rule(store: Store, site: dict[str, Any], body: dict[str, Any],
                      params: dict[str, Any], *, session: Any) -> dict[str, Any]:
    """Store a new rule of the site; `params` already checked against its kind."""
    if await store.collection(RULES).count_documents(
            {"siteId": site["_id"]}, session=session) >= MAX_RULES_PER_SITE:
        raise InvalidInput(f"a site has at most {MAX_RULES_PER_SITE} alert rules")
    now = datetime.now(UTC)
    rule = {"_id": new_id(), "siteId": site["_id"], "organizationId": site["organizationId"],
            "kind": body["kind"], "name": body["name"].strip() or body["kind"],
            "params": params, "channels": _checked_channels(body.get("channels", ["email"])),
            "muted": bool(body.get("muted", False)),
            "cooldownMinutes": int(body.get("cooldownMinutes", DEFAULT_COOLDOWN_MINUTES)),
            "evaluation": None, "createdAt": now, "updatedAt": now}
    await store.collection(RULES).insert_one(rule, session=session)
    return rule


async def update_rule(store: Store, site_id: str, rule_id: str, changes: dict[str, Any], *,
                      session: Any) -> tuple[dict[str, Any], list[str]]:
    """Change a rule's name, parameters (already checked), channels, cool-down or mute;
    returns it and the fields that changed."""
    rule = await find_rule(store, site_id, rule_id, session=session)
    wanted = dict(changes)
    if "channels" in wanted:
        wanted["channels"] = _checked_channels(wanted["channels"])
    if "name" in wanted:
        wanted["name"] = wanted["name"].strip() or rule["name"]
    changed = sorted(name for name, value in wanted.items() if rule.get(name) != value)
    if not changed:
        return rule, []
    updated = await store.collection(RULES).find_one_and_update(
        {"_id": rule_id, "siteId": site_id},
        {"$set": {**{name: wanted[name] for name in changed}, "updatedAt": datetime.now(UTC)}},
        return_document=ReturnDocument.AFTER, session=session)
    if updated is None:
        raise NotFound("alert rule not found")
    return updated, changed


async def delete_rule(store: Store, site_id: str, rule_id: str, *, session: Any) -> None:
    """Remove a rule and its episodes; InvalidInput for a built-in rule (muted instead)."""
    if any(rule_id == built_in_rule_id(site_id, kind) for kind in BUILT_IN):
        raise InvalidInput("every site keeps this rule; mute it instead", field="ruleId")
    removed = await store.collection(RULES).delete_one({"_id": rule_id, "siteId": site_id},
                                                       session=session)
    if removed.deleted_count == 0:
        raise NotFound("alert rule not found")
    await store.collection(EPISODES).delete_many({"ruleId": rule_id}, session=session)
    await store.collection(MEMBERS).update_many(
        {"siteId": site_id, "mutedRules": rule_id}, {"$pull": {"mutedRules": rule_id}},
        session=session)


def built_in_rule_id(site_id: str, kind: str) -> str:
    """The id of the site's built-in rule of `kind`."""
    return str(uuid.uuid5(_BUILT_IN_NAMESPACE, f"{site_id}/{kind}"))


async def give_built_in_rule(store: Store, sites: list[dict[str, Any]], kind: str) -> int:
    """Give each of `sites` that has no rule of `kind` its built-in one, to every channel;
    returns how many were given. Safe when several processes do it at once (one id per site)."""
    having = set(await store.collection(RULES).distinct("siteId", {"kind": kind}))
    given = 0
    for site in sites:
        if site["_id"] in having:
            continue
        now = datetime.now(UTC)
        try:
            await store.collection(RULES).insert_one({
                "_id": built_in_rule_id(site["_id"], kind), "siteId": site["_id"],
                "organizationId": site["organizationId"], "kind": kind,
                "name": BUILT_IN[kind], "params": {}, "channels": list(CHANNELS),
                "muted": False, "builtIn": True, "cooldownMinutes": DEFAULT_COOLDOWN_MINUTES,
                "evaluation": None, "createdAt": now, "updatedAt": now})
        except DuplicateKeyError:
            continue
        given += 1
    return given


async def active_rules_of_kind(store: Store, kind: str) -> list[dict[str, Any]]:
    """Every site's rules of `kind` not muted, by site."""
    cursor = store.collection(RULES).find({"kind": kind, "muted": False}).sort(
        [("siteId", ASCENDING), ("createdAt", ASCENDING)])
    return [rule async for rule in cursor]


async def sites_with_rules(store: Store) -> list[str]:
    """Every site with at least one rule not muted."""
    return sorted(await store.collection(RULES).distinct("siteId", {"muted": False}))


async def active_rules(store: Store, site_id: str) -> list[dict[str, Any]]:
    """The site's rules not muted."""
    cursor = store.collection(RULES).find({"siteId": site_id, "muted": False}).sort(
        "createdAt", ASCENDING)
    return [rule async for rule in cursor]


async def record_evaluation(store: Store, rule_id: str, evaluation: dict[str, Any]) -> None:
    """Keep a rule's last evaluation (when, its state, its figures) for the Alerts page."""
    await store.collection(RULES).update_one({"_id": rule_id},
                                             {"$set": {"evaluation": evaluation}})


# Episodes -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Episode:
    """An episode this evaluator opened or resolved, so it is the one that tells."""

    id: str
    rule_id: str
    subject: str
    number: int


async def open_episodes(store: Store, rule_id: str) -> list[dict[str, Any]]:
    """The rule's episodes not resolved yet."""
    return await store.collection(EPISODES).find(
        {"ruleId": rule_id, "resolvedAt": None}).to_list(None)


async def latest_episodes(store: Store, rule_id: str, subjects: list[str]
                          ) -> dict[str, dict[str, Any]]:
    """Each subject's latest episode of the rule, by subject (those never fired are missing)."""
    latest: dict[str, dict[str, Any]] = {}
    cursor = store.collection(EPISODES).find(
        {"ruleId": rule_id, "subject": {"$in": subjects}}).sort("number", DESCENDING)
    async for episode in cursor:
        latest.setdefault(episode["subject"], episode)
    return latest


def may_open(latest: dict[str, Any] | None, *, now: datetime, cooldown: timedelta,
             once: bool) -> bool:
    """Whether a new episode may open after `latest`: never while it is open, never again for
    a subject that fires once (a lead), and not before its cool-down has passed."""
    if latest is None:
        return True
    if once or latest.get("resolvedAt") is None:
        return False
    fired = latest["firedAt"]
    if fired.tzinfo is None:  # the driver hands back naive UTC
        fired = fired.replace(tzinfo=UTC)
    return now >= fired + cooldown


async def open_episode(store: Store, rule: dict[str, Any], subject: str, number: int,
                       figures: dict[str, Any], now: datetime) -> Episode | None:
    """Open episode `number` of the subject; None when another evaluator opened it first."""
    episode_id = new_id()
    try:
        await store.collection(EPISODES).insert_one({
            "_id": episode_id, "ruleId": rule["_id"], "siteId": rule["siteId"],
            "subject": subject, "number": number, "episode": f"{subject}#{number}",
            "figures": figures, "firedAt": now, "resolvedAt": None})
    except DuplicateKeyError:
        return None
    return Episode(episode_id, rule["_id"], subject, number)


async def resolve_episode(store: Store, episode: dict[str, Any], now: datetime
                          ) -> Episode | None:
    """Resolve an open episode; None when another evaluator resolved it first."""
    resolved = await store.collection(EPISODES).update_one(
        {"_id": episode["_id"], "resolvedAt": None}, {"$set": {"resolvedAt": now}})
    if resolved.modified_count == 0:
        return None
    return Episode(episode["_id"], episode["ruleId"], episode["subject"], episode["number"])


async def episodes_of_site(store: Store, site_id: str, *, limit: int) -> list[dict[str, Any]]:
    """The site's newest episodes, for the account export."""
    cursor = store.collection(EPISODES).find({"siteId": site_id}).sort(
        "firedAt", DESCENDING).limit(limit)
    return await cursor.to_list(limit)


# A member's own settings ----------------------------------------------------------------------


def member_settings_id(site_id: str, user_id: str) -> str:
    """The one settings document of a member for a site."""
    return f"{site_id}/{user_id}"


def member_view(settings: dict[str, Any] | None) -> dict[str, Any]:
    """A member's settings as the API shows them (nothing muted, no digest by default)."""
    settings = settings or {}
    return {"mutedRules": sorted(settings.get("mutedRules") or []),
            "digest": settings.get("digest")}


async def member_settings(store: Store, site_id: str, user_id: str) -> dict[str, Any] | None:
    """A member's settings for the site, None when they never changed any."""
    return await store.collection(MEMBERS).find_one({"_id": member_settings_id(site_id, user_id)})


async def change_member_settings(store: Store, site_id: str, user_id: str,
                                 changes: dict[str, Any]) -> dict[str, Any]:
    """Mute or unmute rules of the site for the member (`muted`: {ruleId: bool}) and set their
    digest (`digest`: "daily", "weekly" or None); NotFound for a rule the site does not have."""
    muted: dict[str, bool] = changes.get("muted") or {}
    if muted:
        known = await store.collection(RULES).count_documents(
            {"siteId": site_id, "_id": {"$in": list(muted)}})
        if known != len(muted):
            raise NotFound("alert rule not found")
    key = {"_id": member_settings_id(site_id, user_id)}
    now = datetime.now(UTC)
    fields: dict[str, Any] = {"siteId": site_id, "userId": user_id, "updatedAt": now}
    if "digest" in changes:
        fields["digest"] = changes["digest"]
    # $addToSet and $pull may not touch one field in one update: each set is one update, and
    # each is idempotent, so a repeated request changes nothing.
    mute = sorted(rule_id for rule_id, wanted in muted.items() if wanted)
    unmute = sorted(rule_id for rule_id, wanted in muted.items() if not wanted)
    collection = store.collection(MEMBERS)
    await collection.update_one(key, {"$set": fields,
                                      "$addToSet": {"mutedRules": {"$each": mute}}},
                                upsert=True)
    if unmute:
        await collection.update_one(key, {"$pull": {"mutedRules": {"$in": unmute}}})
    return await collection.find_one(key) or {}


async def members_muting(store: Store, site_id: str, rule_id: str) -> list[str]:
    """The user ids of the members who muted the rule for themselves."""
    cursor = store.collection(MEMBERS).find({"siteId": site_id, "mutedRules": rule_id},
                                            {"userId": 1})
    return sorted([doc["userId"] async for doc in cursor])


async def digest_subscribers(store: Store, period: str) -> list[dict[str, Any]]:
    """Every member's settings that ask for the `period` digest, by site."""
    cursor = store.collection(MEMBERS).find({"digest": period}).sort(
        [("siteId", ASCENDING), ("userId", ASCENDING)])
    return [doc async for doc in cursor]


async def member_settings_of_site(store: Store, site_id: str) -> list[dict[str, Any]]:
    """Every member's settings for the site, for the account export."""
    cursor = store.collection(MEMBERS).find({"siteId": site_id}).sort("userId", ASCENDING)
    return [doc async for doc in cursor]
