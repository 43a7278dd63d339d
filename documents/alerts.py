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
"""

from __future__ import annotations

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

#: Episodes are kept as long as the delivery log (documents/notifications.py).
EPISODE_RETENTION_SECONDS = 90 * 24 * 3600
#: A site's rules: each one is evaluated on every pass, so the list stays short.
MAX_RULES_PER_SITE = 50
#: Where an alert can go: the site's notification channels (documents/notifications.py).
CHANNELS = ("email", "webhook", "slack")
DEFAULT_COOLDOWN_MINUTES = 60

INDEXES = [
    Index(RULES, (("siteId", ASCENDING), ("createdAt", ASCENDING))),
    # The evaluator's list of sites with a rule to evaluate.
    Index(RULES, (("muted", ASCENDING), ("siteId", ASCENDING))),
    # One firing per episode, whatever the number of evaluators.
    Index(EPISODES, (("ruleId", ASCENDING), ("episode", ASCENDING)), unique=True),
    Index(EPISODES, (("ruleId", ASCENDING), ("subject", ASCENDING), ("number", DESCENDING))),
    Index(EPISODES, (("ruleId", ASCENDING), ("resolvedAt", ASCENDING))),
    Index(EPISODES, (("firedAt", ASCENDING),), name="alert_episodes_ttl",
          expire_after_seconds=EPISODE_RETENTION_SECONDS),
]


def view(rule: dict[str, Any]) -> dict[str, Any]:
    """A rule as the API shows it, with its last evaluation."""
    return {"id": rule["_id"], "kind": rule["kind"], "name": rule["name"],
            "params": rule.get("params") or {}, "channels": rule.get("channels") or [],
            "muted": bool(rule.get("muted")),
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
    """Remove a rule and its episodes."""
    removed = await store.collection(RULES).delete_one({"_id": rule_id, "siteId": site_id},
                                                       session=session)
    if removed.deleted_count == 0:
        raise NotFound("alert rule not found")
    await store.collection(EPISODES).delete_many({"ruleId": rule_id}, session=session)


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
