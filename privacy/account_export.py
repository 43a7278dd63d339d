"""The account export (spec §2 "Account export file"): the customer's own data, as one JSON.

It holds the account, its organizations, users and invitations, the sites and their
configuration (with their survey and funnel definitions and saved segments), invoices and the
audit trail. Site API keys, public keys, integration credentials and invitation links are left
out (and so are their digests and sealed forms); configured integration and notification
settings appear with their values replaced by the literal text `<redacted>`.
"""

from __future__ import annotations

from typing import Any

from documents import account_links, accounts, audit, funnels, retention, segments, two_factor
from documents import alerts as alert_documents
from documents import digests as digest_documents
from documents import notifications as notification_documents
from documents import sites as site_documents
from documents import surveys as survey_documents
from documents.accounts import AuthenticatedUser
from documents.store import Store

REDACTED = "<redacted>"

#: Site fields that are credentials or derived from them; never exported.
SITE_SECRET_FIELDS = frozenset({
    "apiKeyHash", "apiKeyHint", "publicKey", "statementKeySealed", "previousStatementKeySealed",
    "previousStatementKeyUntil",
})
#: The newest deliveries exported per site: more than 90 days' retention holds for any site
#: that does not send hundreds of notifications a day.
EXPORTED_DELIVERIES = 20_000
#: User fields that are credentials; never exported.
USER_SECRET_FIELDS = frozenset({"passwordHash", "knownLoginNetworks"})


def redact_configuration(value: Any) -> Any:
    """Every configured value replaced by `<redacted>`, keeping the shape and the keys."""
    if isinstance(value, dict):
        return {key: redact_configuration(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redact_configuration(item) for item in value]
    if value is None or isinstance(value, bool):
        return value
    return REDACTED


async def account_export(store: Store, user: AuthenticatedUser) -> dict[str, Any]:
    """The account export of the user's account."""
    account = await accounts.find_account(store, user.account_id) or {}
    organizations = await accounts.organizations_of_account(store, user.account_id)
    organization_ids = [org["_id"] for org in organizations]
    users = await accounts.users_of_account(store, user.account_id)
    memberships = await accounts.memberships_of_organizations(store, organization_ids)
    sites = await site_documents.sites_of_organizations(store, organization_ids)
    site_views = []
    for site in sites:
        view = {key: value for key, value in site.items() if key not in SITE_SECRET_FIELDS}
        channels = await notification_documents.channels_for_site(store, site["_id"])
        view["notifications"] = redact_configuration(
            {key: value for key, value in (channels or {}).items() if key != "_id"})
        # The customer's own survey definitions (never answers: those are visitor data).
        view["surveys"] = await survey_documents.list_surveys(store, site["_id"])
        # The funnels the customer defined (the built-in shop funnel is not theirs).
        view["funnels"] = [funnels.view(funnel) for funnel in
                           await funnels.list_funnels(store, site["_id"])
                           if not funnel.get("builtIn")]
        # The segments the customer saved (session filters, no visitor's data).
        view["segments"] = [segments.view(segment)
                            for segment in await segments.list_segments(store, site["_id"])]
        # The alert rules the customer set and every notification delivered or tried, with
        # its rule (issue 42): figures and links, no visitor's data.
        view["alertRules"] = [alert_documents.view(rule) for rule in
                              await alert_documents.list_rules(store, site["_id"])]
        # Each member's own alert settings: the rules they muted for themselves, their digest.
        view["alertMemberSettings"] = [
            {"userId": doc["userId"], **alert_documents.member_view(doc)}
            for doc in await alert_documents.member_settings_of_site(store, site["_id"])]
        view["notificationDeliveries"] = await notification_documents.recent_deliveries(
            store, site["_id"], None, EXPORTED_DELIVERIES)
        # Which member's digest of which period was sent or skipped (the mail's attempts are
        # in the delivery log above).
        view["digestDeliveries"] = [
            {key: doc.get(key) for key in ("userId", "period", "outcome", "createdAt")}
            for doc in await digest_documents.deliveries_of_site(
                store, site["_id"], limit=EXPORTED_DELIVERIES)]
        # Every kind's retention in force, defaults included (issue 32).
        view["retentionDays"] = retention.site_days(site)
        site_views.append(view)
    invoices = await accounts.invoices_of_account(store, user.account_id)
    # Who was invited with which role and what became of it (never the link's digest).
    invitations = await account_links.invitations_of_account(store, user.account_id)
    trail = [entry async for entry in audit.entries_for_account(store, user.account_id)]
    # Who has two-factor sign-in on, since when, with how many recovery codes left (never the
    # sealed secret or the codes' digests).
    second_factors = {
        state["_id"]: {"enabledAt": state.get("enabledAt"),
                       "recoveryCodesLeft": len(state.get("recoveryCodes", []))}
        for state in await two_factor.states_of_account(store, user.account_id)}
    return {
        "format": "visitor-service/account-export/v1",
        "account": account,
        "organizations": organizations,
        "users": [{**{key: value for key, value in u.items() if key not in USER_SECRET_FIELDS},
                   "twoFactor": second_factors.get(u["_id"])}
                  for u in users],
        "memberships": memberships,
        "invitations": invitations,
        "sites": site_views,
        "invoices": invoices,
        "auditTrail": trail,
    }
