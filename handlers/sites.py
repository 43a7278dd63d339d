"""Sites in the dashboard API: create, list, read, update settings, rotate the API key."""

from __future__ import annotations

from typing import Any

from documents import commerce, retention, sites
from errors import InvalidInput
from handlers.base import BaseHandler
from privacy.exclusion import checked_settings
from privacy.heatmap_pages import checked_page_groups
from privacy.personal_pages import checked_personal_pages


def _checked_settings(changes: dict[str, Any]) -> dict[str, Any]:
    """Setting changes with every pattern list normalised, every retention within its range
    the reporting currency an ISO 4217 code and the time zone an IANA name; InvalidInput names
    a bad one."""
    if "retentionDays" in changes:
        try:
            changes = {**changes,
                       "retentionDays": retention.checked_days(changes["retentionDays"])}
        except retention.RetentionOutOfRange as refused:
            raise InvalidInput(str(refused),
                               field=f"settings.retentionDays.{refused.kind}") from None
    if changes.get("reportingCurrency") is not None:
        try:
            commerce.known_currency(changes["reportingCurrency"])
        except commerce.InvalidMoney as refused:
            raise InvalidInput(str(refused), field="settings.reportingCurrency") from None
    if changes.get("timeZone") is not None and not sites.known_time_zone(changes["timeZone"]):
        raise InvalidInput("timeZone must be an IANA time zone name such as Europe/Berlin",
                           field="settings.timeZone")
    return checked_personal_pages(checked_page_groups(checked_settings(changes)))


def _retention_moves(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Each retention that changed, from and to (days), for the audit trail."""
    old, new = retention.site_days(before), retention.site_days(after)
    return {kind: {"from": old[kind], "to": new[kind]} for kind in new if old[kind] != new[kind]}


def _settings_change(before: dict[str, Any], after: dict[str, Any], changed: list[str]
                     ) -> dict[str, Any] | None:
    """The audit entry's details of a settings change; None when nothing changed."""
    if not changed:
        return None
    details: dict[str, Any] = {"fields": changed}
    if "settings.retentionDays" in changed:
        # A shorter retention deletes at the next purge: the trail says who chose it.
        details["retentionDays"] = _retention_moves(before, after)
    return details


class SitesHandler(BaseHandler):
    """GET lists the user's sites; POST creates one and shows its keys once."""

    async def get(self) -> None:
        found = await sites.sites_for_user(self.deps.store, self.user)
        self.write_json([sites.public_view(site) for site in found])

    async def post(self) -> None:
        body = self.validated_body("SiteCreate")
        organization_id = body.get("organizationId") or _only_admin_organization(self.user)
        settings = _checked_settings(body.get("settings", {}))

        site, keys = await self.audited(
            lambda created: created[0], "site.created",
            lambda session: self.deps.keyring.create_site(
                self.user, organization_id, body["name"], body.get("allowedOrigins", []),
                settings, session=session),
            lambda _: {})
        self.write_json({"id": site["_id"], "apiKey": keys.api_key, "publicKey": keys.public_key,
                         "site": sites.public_view(site)}, status=201)


class SiteHandler(BaseHandler):
    """GET reads one site; PATCH changes its name, allowed origins or settings."""

    async def get(self, site_id: str) -> None:
        site = await sites.site_for_user(self.deps.store, self.user, site_id)
        self.write_json(sites.public_view(site))

    async def patch(self, site_id: str) -> None:
        body = self.validated_body("SiteUpdate")
        if "settings" in body:
            body["settings"] = _checked_settings(body["settings"])
        site = await sites.site_for_user(self.deps.store, self.user, site_id)

        updated, _ = await self.audited(
            site, "site.settings_changed",
            lambda session: self.deps.keyring.update_site(self.user, site, body,
                                                          session=session),
            lambda result: _settings_change(site, *result))
        self.write_json(sites.public_view(updated))


class RotateApiKeyHandler(BaseHandler):
    """POST rotates the site's API key; the new key is shown once and the old one stops now."""

    async def post(self, site_id: str) -> None:
        site = await sites.site_for_user(self.deps.store, self.user, site_id)
        sites.require_admin(self.user, site["organizationId"])

        updated, api_key = await self.audited(
            site, "site.api_key_rotated",
            lambda session: self.deps.keyring.rotate_api_key(
                site, self.deps.settings.key_rotation_grace_seconds, session=session),
            lambda _: {})
        self.write_json({"id": site_id, "apiKey": api_key, "site": sites.public_view(updated)})


def _only_admin_organization(user: object) -> str:
    administered = [org for org in user.roles if user.can_administer(org)]
    if len(administered) != 1:
        raise InvalidInput("organizationId is required when you administer several "
                           "organizations (or none)", field="organizationId")
    return administered[0]


default_handlers = [
    (r"/api/v1/sites", SitesHandler),
    (r"/api/v1/sites/([0-9a-f-]{36})", SiteHandler),
    (r"/api/v1/sites/([0-9a-f-]{36})/api-key/rotate", RotateApiKeyHandler),
]
