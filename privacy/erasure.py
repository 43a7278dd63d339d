"""Visitor erasure (spec §4.3 effects 1-9) as one all-or-nothing transaction, with a receipt.

Every collection in `privacy.subject_data.VISITOR_DATA` is visited inside `Store.transaction()`:
personal records are deleted, GridFS segments and heatmap images go with their chunks (deleted
as documents, because the driver's GridFS API refuses transactions), and error aggregates and
the visitor's error occurrences are anonymised rather than deleted, so the Errors list and the
error counts keep them. The visitor's orders go with every event of theirs, and each leaves a
mark of its id alone, so that a late payment or refund is dropped rather than bring it back
(documents/commerce.py). The receipt carries counts, never personal data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from derived import derivation
from documents import audit, commerce, error_records, recordings, visitors
from documents import requests as request_log
from documents.store import Store
from errors import NotFound
from instants import format_instant
from privacy.subject_data import VISITOR_DATA, SubjectKeys, keys_of_visitors, subject_keys

#: Diagnostic-context keys that identify a person (compared without case, "-" or "_").
IDENTITY_KEYS = frozenset({
    "user", "userid", "username", "login", "email", "emailaddress", "name", "firstname",
    "lastname", "fullname", "displayname", "phone", "telephone", "mobile", "address", "street",
    "postcode", "zip", "city", "ip", "ipaddress", "remoteaddr", "clientip", "visitorid",
    "sessionid", "wpuserid", "customer", "customerid", "billing", "shipping", "account",
})
#: Diagnostic-context keys that hold captured request or response data.
CAPTURED_KEYS = frozenset({
    "request", "response", "headers", "cookie", "cookies", "body", "query", "querystring",
    "params", "parameters", "form", "formdata", "payload", "post", "get", "session", "server",
    "env", "requestbody", "responsebody",
})
_FOLD = re.compile(r"[-_\s]")


@dataclass(frozen=True)
class ErasureReceipt:
    """What an erasure did: counts per category, and footage the Client must delete itself."""

    request_id: str
    site_id: str
    received_at: datetime
    completed_at: datetime
    counts: dict[str, int]
    legacy_footage: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The receipt as the API answers it."""
        return {
            "requestId": self.request_id,
            "siteId": self.site_id,
            "receivedAt": format_instant(self.received_at),
            "completedAt": format_instant(self.completed_at),
            "counts": self.counts,
            "legacyFootage": self.legacy_footage,
            "legacyFootageNote": (
                "Recordings made before the service stored footage itself live on your own "
                "server (wp-content/uploads/wpel-recordings/) or bucket. Their records are "
                "erased; please delete the listed files yourself." if self.legacy_footage
                else None),
        }


def strip_context(value: Any) -> Any:
    """The diagnostic context without identity fields and captured request/response data."""
    if isinstance(value, dict):
        return {
            key: strip_context(item) for key, item in value.items()
            if _FOLD.sub("", str(key)).lower() not in IDENTITY_KEYS | CAPTURED_KEYS
        }
    if isinstance(value, list):
        return [strip_context(item) for item in value]
    return value


async def _anonymise_errors(store: Store, query: dict[str, Any], session: Any) -> int:
    return await error_records.anonymise_errors(store, query, strip_context, session=session)


async def _anonymise_occurrences(store: Store, query: dict[str, Any], session: Any) -> int:
    return await error_records.anonymise_occurrences(store, query, session=session)


#: How erasure anonymises each collection whose `VISITOR_DATA` action is "anonymise".
ANONYMISERS = {error_records.ERRORS: _anonymise_errors,
               error_records.OCCURRENCES: _anonymise_occurrences}


async def _apply(store: Store, keys: SubjectKeys, session: Any, *, figures: bool = True,
                 narrowed: dict[str, dict[str, Any]] | None = None) -> dict[str, int]:
    """Delete or anonymise the visitor's data; `narrowed` adds conditions per category (what
    a purge keeps for longer), and `figures` False leaves the figures as they are."""
    if figures:
        # Before the raw data goes: the figures lose the share it added (reported under the
        # data it came from), the heatmap counts always, the daily figures unless a
        # restriction has already taken them out; what is not folded into them yet is deleted
        # with the rest.
        restricted = (await visitors.privacy_flags(store, keys.site_id, keys.visitor_id,
                                                   session=session)).restricted
        await derivation.take_out_visitor(store, keys.site_id, keys.visitor_id,
                                          restricted=restricted, session=session)
    counts: dict[str, int] = {}
    for source in VISITOR_DATA:
        query = {**source.find(keys), **(narrowed or {}).get(source.category, {})}
        if source.action == "delete":
            result = await store.collection(source.collection).delete_many(query, session=session)
            counts[source.category] = result.deleted_count
        elif source.action == "delete_files":
            bucket = store.bucket(source.collection.removesuffix(".files"))
            counts[source.category] = await bucket.delete_where(query, session=session)
        else:
            counts[source.category] = await ANONYMISERS[source.collection](store, query,
                                                                         session)
    return counts


async def erase_visitor(store: Store, site: dict[str, Any], visitor_id: str, *,
                        request: dict[str, Any], actor_user_id: str,
                        account_id: str | None) -> ErasureReceipt:
    """Erase everything of the visitor in one transaction; NotFound when nothing is held."""

    async def work(session: Any) -> ErasureReceipt:
        keys = await subject_keys(store, site["_id"], visitor_id, session=session)
        legacy = await recordings.legacy_footage_locations(store, site["_id"], visitor_id,
                                                           session=session)
        counts = await _apply(store, keys, session)
        if not any(counts.values()):
            raise NotFound("no data is held for this visitor")
        outcome = {"counts": counts, "legacyFootageFiles": len(legacy)}
        completed_at = await request_log.complete_request(store, request["_id"], outcome=outcome,
                                                          session=session)
        # A payment or refund the shop sends later must not bring an erased order back.
        await commerce.mark_erased(store, site["_id"], keys.order_ids, at=completed_at,
                                   session=session)
        await audit.record(
            store, action="visitor.erased", actor_user_id=actor_user_id, account_id=account_id,
            organization_id=site["organizationId"], site_id=site["_id"],
            details={"requestId": request["_id"], **outcome}, session=session,
        )
        return ErasureReceipt(request["_id"], site["_id"], request["receivedAt"], completed_at,
                              counts, sorted(legacy))

    return await store.transaction(work)


async def purge_visitors(store: Store, site_id: str, visitor_ids: tuple[str, ...], *,
                         consent_before: datetime, session: Any) -> dict[str, int]:
    """Remove visitors whose profiles expired (issue 32) as erasure does, in the caller's
    transaction and in one walk for all of them, except that the figures keep what the
    visitors added, as anonymous aggregates, and consent decisions made since `consent_before`
    stay as the proof the law asks for."""
    keys = await keys_of_visitors(store, site_id, visitor_ids, session=session)
    return await _apply(store, keys, session, figures=False, narrowed={
        "consentDecisions": {"decidedAt": {"$lt": consent_before}}})
