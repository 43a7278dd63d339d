"""Notification channels per site (e-mail over SMTP, signed webhook, Slack-compatible incoming
webhook) and the delivery log.

One channel document per site, keyed by the site id. Secrets (SMTP password, webhook secret)
are sealed with AES-256-GCM under a purpose bound to the site and the field, so a sealed value
cannot be moved to another site or field; `public_view` never includes them, only whether one
is set. The delivery log is what the dashboard reads to see failed notifications.

Webhook URLs are checked against the address guard (privacy/addresses.py) before they reach
`save_channels`, and again at delivery (tasks/notifications.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pymongo import ReturnDocument

from documents import sites
from documents.accounts import new_id
from documents.sites import Sealer
from documents.store import ASCENDING, DESCENDING, Index, Store
from errors import InvalidInput
from instants import format_instant

CHANNELS = "notification_channels"
DELIVERIES = "notification_deliveries"

#: Delivery log entries are kept 90 days; enough to notice and fix a broken channel.
DELIVERY_RETENTION_SECONDS = 90 * 24 * 3600

INDEXES = [
    Index(DELIVERIES, (("siteId", ASCENDING), ("createdAt", DESCENDING))),
    Index(DELIVERIES, (("siteId", ASCENDING), ("status", ASCENDING), ("createdAt", DESCENDING))),
    Index(DELIVERIES, (("createdAt", ASCENDING),), name="deliveries_ttl",
          expire_after_seconds=DELIVERY_RETENTION_SECONDS),
]

#: Write-only secret fields: API field -> stored sealed field, per channel.
#: A Slack (or Mattermost, or Discord's Slack endpoint) incoming webhook's URL is its secret.
SECRET_FIELDS = {"email": ("smtpPassword", "smtpPasswordSealed"),
                 "webhook": ("secret", "secretSealed"),
                 "slack": ("url", "urlSealed")}


def secret_purpose(site_id: str, channel: str) -> str:
    """The sealing purpose of a channel's secret: bound to the site and the field."""
    return f"notifications/{site_id}/{channel}/{SECRET_FIELDS[channel][0]}"


async def channels_for_site(store: Store, site_id: str, *, session: Any = None
                            ) -> dict[str, Any] | None:
    """The stored channel document of a site (secrets sealed), or None."""
    return await store.collection(CHANNELS).find_one({"_id": site_id}, session=session)


async def site_name(store: Store, site_id: str) -> str:
    """The site's display name, for notification subjects."""
    site = await sites.find_site(store, site_id, {"name": 1})
    return str(site["name"]) if site else site_id


def public_view(doc: dict[str, Any] | None) -> dict[str, Any]:
    """The channel configuration as the API shows it: secrets replaced by `...Set` flags."""
    view: dict[str, Any] = {"email": None, "webhook": None, "slack": None}
    for channel, (api_field, sealed_field) in SECRET_FIELDS.items():
        stored = (doc or {}).get(channel)
        if stored is None:
            continue
        shown = {k: v for k, v in stored.items() if k != sealed_field}
        shown[f"{api_field}Set"] = bool(stored.get(sealed_field))
        view[channel] = shown
    view["updatedAt"] = format_instant((doc or {}).get("updatedAt"))
    return view


async def save_channels(store: Store, sealer: Sealer, site: dict[str, Any],
                        body: dict[str, Any], *, session: Any = None
                        ) -> tuple[dict[str, Any], list[str]]:
    """Replace the site's channels (a webhook URL already checked by the address guard); a
    secret left out is kept, null clears it."""
    site_id = site["_id"]
    current = await channels_for_site(store, site_id, session=session) or {}
    update: dict[str, Any] = {"organizationId": site["organizationId"],
                              "updatedAt": datetime.now(UTC)}
    changed: list[str] = []
    for channel, (api_field, sealed_field) in SECRET_FIELDS.items():
        if channel not in body:
            update[channel] = current.get(channel)
            continue
        given = body[channel]
        changed.append(channel)
        if given is None:
            update[channel] = None
            continue
        stored = {k: v for k, v in given.items() if k != api_field}
        if api_field not in given:
            previous = (current.get(channel) or {}).get(sealed_field)
            if previous:
                stored[sealed_field] = previous
        elif given[api_field] is not None:
            stored[sealed_field] = sealer.seal(given[api_field], secret_purpose(site_id, channel))
            changed.append(f"{channel}.{api_field}")
        else:
            changed.append(f"{channel}.{api_field}")
        update[channel] = stored
    webhook = update.get("webhook")
    if webhook and webhook.get("enabled") and not webhook.get("secretSealed"):
        raise InvalidInput("an enabled webhook needs a secret", field="webhook.secret")
    slack = update.get("slack")
    if slack and slack.get("enabled") and not slack.get("urlSealed"):
        raise InvalidInput("an enabled Slack channel needs its webhook URL", field="slack.url")
    saved = await store.collection(CHANNELS).find_one_and_update(
        {"_id": site_id}, {"$set": update}, upsert=True, return_document=ReturnDocument.AFTER,
        session=session,
    )
    return saved, changed


async def start_delivery(store: Store, *, site_id: str, channel: str, error_id: str | None,
                         fingerprint: str | None, reopened: bool,
                         event: str = "new_error", rule_id: str | None = None) -> str:
    """Log a delivery about to be attempted; returns its id (also sent to webhook receivers)."""
    delivery_id = new_id()
    now = datetime.now(UTC)
    await store.collection(DELIVERIES).insert_one({
        "_id": delivery_id, "siteId": site_id, "channel": channel, "event": event,
        "errorId": error_id, "fingerprint": fingerprint, "reopened": reopened,
        "ruleId": rule_id, "status": "pending", "attempts": 0, "lastError": None,
        "responseStatus": None,
        "createdAt": now, "updatedAt": now, "deliveredAt": None,
    })
    return delivery_id


async def record_attempt(store: Store, delivery_id: str, *, error: str | None,
                         final: bool, response_status: int | None = None) -> None:
    """Count one attempt: delivered, failed for good, or still retrying (with the HTTP status
    a webhook answered, when there was one)."""
    now = datetime.now(UTC)
    if error is None:
        fields: dict[str, Any] = {"status": "delivered", "deliveredAt": now, "lastError": None}
    else:
        fields = {"status": "failed" if final else "retrying", "lastError": error[:300]}
    fields["updatedAt"] = now
    fields["responseStatus"] = response_status
    await store.collection(DELIVERIES).update_one(
        {"_id": delivery_id}, {"$set": fields, "$inc": {"attempts": 1}})


async def recent_deliveries(store: Store, site_id: str, status: str | None,
                            limit: int, *, alerts_only: bool = False) -> list[dict[str, Any]]:
    """The site's newest delivery log entries, optionally of one status, or of alerts only."""
    query: dict[str, Any] = {"siteId": site_id}
    if status:
        query["status"] = status
    if alerts_only:
        query["ruleId"] = {"$ne": None}
    cursor = store.collection(DELIVERIES).find(query).sort("createdAt", DESCENDING).limit(limit)
    return [delivery_view(doc) async for doc in cursor]


async def find_delivery(store: Store, site_id: str, delivery_id: str) -> dict[str, Any] | None:
    """One delivery log entry of the site, as the API shows it, or None."""
    doc = await store.collection(DELIVERIES).find_one({"_id": delivery_id, "siteId": site_id})
    return delivery_view(doc) if doc else None


def delivery_view(doc: dict[str, Any]) -> dict[str, Any]:
    """A delivery log entry as the API shows it."""
    return {
        "id": doc["_id"], "channel": doc["channel"], "event": doc["event"],
        "errorId": doc["errorId"], "fingerprint": doc["fingerprint"],
        "reopened": doc["reopened"], "ruleId": doc.get("ruleId"),
        "responseStatus": doc.get("responseStatus"),
        "status": doc["status"], "attempts": doc["attempts"],
        "lastError": doc.get("lastError"), "createdAt": format_instant(doc.get("createdAt")),
        "updatedAt": format_instant(doc.get("updatedAt")),
        "deliveredAt": format_instant(doc.get("deliveredAt")),
    }
