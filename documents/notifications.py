"""Notification channels per site (e-mail over SMTP, signed webhook) and the delivery log.

One channel document per site, keyed by the site id. Secrets (SMTP password, webhook secret)
are sealed with AES-256-GCM under a purpose bound to the site and the field, so a sealed value
cannot be moved to another site or field; `public_view` never includes them, only whether one
is set. The delivery log is what the dashboard reads to see failed notifications.

Webhook URLs must not point inside our own network (SSRF): a URL whose host is, or resolves
to, an address that is not globally routable (private, loopback, link-local such as the cloud
metadata address 169.254.169.254, CGNAT, reserved, multicast) is refused when saved, unless
WEBHOOK_ALLOW_PRIVATE_ADDRESSES is set; tasks/notifications.py checks again at delivery,
because a name's DNS answer can change after it was saved.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from pymongo import ReturnDocument

from documents.accounts import new_id
from documents.sites import Sealer
from documents.store import ASCENDING, DESCENDING, Index, Store
from errors import InvalidInput

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
SECRET_FIELDS = {"email": ("smtpPassword", "smtpPasswordSealed"),
                 "webhook": ("secret", "secretSealed")}


#: A name that does not resolve within this many seconds is saved; delivery checks it again.
RESOLVE_TIMEOUT_SECONDS = 3.0


def is_forbidden_address(address: str) -> bool:
    """True for an address a webhook must not reach: anything not globally routable."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 is loopback too
    return not ip.is_global or ip.is_multicast


async def check_webhook_url(url: str, *, allow_private: bool) -> None:
    """Raise InvalidInput (field webhook.url) when the URL's host is or resolves to a forbidden
    address; a name that does not resolve now is let through and checked at delivery."""
    parts = urlsplit(url)
    try:
        host = (parts.hostname or "").rstrip(".").lower()
        port = parts.port
        # The resolver encodes the name with IDNA; a host it cannot encode (stray surrogates,
        # control characters, empty or over-long labels) is no host at all.
        host.encode("idna")
    except ValueError:  # UnicodeError included; also a port out of range
        raise InvalidInput("the webhook URL's host or port is not valid",
                           field="webhook.url") from None
    if parts.scheme not in ("http", "https") or not host:
        raise InvalidInput("the webhook URL needs http(s) and a host", field="webhook.url")
    if allow_private:
        return
    refused = InvalidInput("the webhook URL points to a private, loopback, link-local or "
                           "metadata address", field="webhook.url")
    if host == "localhost" or host.endswith(".localhost"):
        raise refused
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:
        try:
            found = await asyncio.wait_for(asyncio.get_running_loop().getaddrinfo(
                host, port or 443, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT_SECONDS)
        except (OSError, TimeoutError):
            return
        addresses = [str(info[4][0]) for info in found]
    if any(is_forbidden_address(address) for address in addresses):
        raise refused


def secret_purpose(site_id: str, channel: str) -> str:
    """The sealing purpose of a channel's secret: bound to the site and the field."""
    return f"notifications/{site_id}/{channel}/{SECRET_FIELDS[channel][0]}"


async def channels_for_site(store: Store, site_id: str, *, session: Any = None
                            ) -> dict[str, Any] | None:
    """The stored channel document of a site (secrets sealed), or None."""
    return await store.collection(CHANNELS).find_one({"_id": site_id}, session=session)


async def site_name(store: Store, site_id: str) -> str:
    """The site's display name, for notification subjects."""
    site = await store.collection("sites").find_one({"_id": site_id}, {"name": 1})
    return str(site["name"]) if site else site_id


def public_view(doc: dict[str, Any] | None) -> dict[str, Any]:
    """The channel configuration as the API shows it: secrets replaced by `...Set` flags."""
    view: dict[str, Any] = {"email": None, "webhook": None}
    for channel, (api_field, sealed_field) in SECRET_FIELDS.items():
        stored = (doc or {}).get(channel)
        if stored is None:
            continue
        shown = {k: v for k, v in stored.items() if k != sealed_field}
        shown[f"{api_field}Set"] = bool(stored.get(sealed_field))
        view[channel] = shown
    view["updatedAt"] = _iso((doc or {}).get("updatedAt"))
    return view


async def save_channels(store: Store, sealer: Sealer, site: dict[str, Any],
                        body: dict[str, Any], *, allow_private_webhooks: bool,
                        session: Any = None) -> tuple[dict[str, Any], list[str]]:
    """Replace the site's channels; a secret left out is kept, null clears it."""
    site_id = site["_id"]
    given_webhook = body.get("webhook")
    if given_webhook and given_webhook.get("url"):
        await check_webhook_url(given_webhook["url"], allow_private=allow_private_webhooks)
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
    saved = await store.collection(CHANNELS).find_one_and_update(
        {"_id": site_id}, {"$set": update}, upsert=True, return_document=ReturnDocument.AFTER,
        session=session,
    )
    return saved, changed


async def start_delivery(store: Store, *, site_id: str, channel: str, error_id: str,
                         fingerprint: str, reopened: bool) -> str:
    """Log a delivery about to be attempted; returns its id (also sent to webhook receivers)."""
    delivery_id = new_id()
    now = datetime.now(UTC)
    await store.collection(DELIVERIES).insert_one({
        "_id": delivery_id, "siteId": site_id, "channel": channel, "event": "new_error",
        "errorId": error_id, "fingerprint": fingerprint, "reopened": reopened,
        "status": "pending", "attempts": 0, "lastError": None,
        "createdAt": now, "updatedAt": now, "deliveredAt": None,
    })
    return delivery_id


async def record_attempt(store: Store, delivery_id: str, *, error: str | None,
                         final: bool) -> None:
    """Count one attempt: delivered, failed for good, or still retrying."""
    now = datetime.now(UTC)
    if error is None:
        fields: dict[str, Any] = {"status": "delivered", "deliveredAt": now, "lastError": None}
    else:
        fields = {"status": "failed" if final else "retrying", "lastError": error[:300]}
    fields["updatedAt"] = now
    await store.collection(DELIVERIES).update_one(
        {"_id": delivery_id}, {"$set": fields, "$inc": {"attempts": 1}})


async def recent_deliveries(store: Store, site_id: str, status: str | None,
                            limit: int) -> list[dict[str, Any]]:
    """The site's newest delivery log entries, optionally of one status."""
    query: dict[str, Any] = {"siteId": site_id}
    if status:
        query["status"] = status
    cursor = store.collection(DELIVERIES).find(query).sort("createdAt", DESCENDING).limit(limit)
    return [delivery_view(doc) async for doc in cursor]


def delivery_view(doc: dict[str, Any]) -> dict[str, Any]:
    """A delivery log entry as the API shows it."""
    return {
        "id": doc["_id"], "channel": doc["channel"], "event": doc["event"],
        "errorId": doc["errorId"], "fingerprint": doc["fingerprint"],
        "reopened": doc["reopened"], "status": doc["status"], "attempts": doc["attempts"],
        "lastError": doc.get("lastError"), "createdAt": _iso(doc.get("createdAt")),
        "updatedAt": _iso(doc.get("updatedAt")), "deliveredAt": _iso(doc.get("deliveredAt")),
    }


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.replace(tzinfo=value.tzinfo or UTC).isoformat().replace("+00:00", "Z")
