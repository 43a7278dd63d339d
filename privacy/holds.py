"""Restriction (GDPR Art. 18) and objection (Art. 21) of one visitor: the flag, what the
figures do about it, the request's completion and its audit entry in one transaction, logged
as a data-subject request like export and erasure."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from derived import derivation
from documents import audit, visitors
from documents import requests as request_log
from documents.store import Store
from errors import NotFound

Hold = Literal["restriction", "objection"]
#: The profile flag each hold sets.
FLAG: dict[Hold, str] = {"restriction": "restricted", "objection": "objected"}


async def switch_hold(store: Store, site: dict[str, Any], visitor_id: str, kind: Hold, on: bool,
                      *, request_id: str, actor_user_id: str, account_id: str | None) -> None:
    """Set (`on`) or lift the hold; NotFound, with the request failed, when the site holds no
    profile of the visitor."""
    field = FLAG[kind]

    async def switch(session: Any) -> bool:
        before = await visitors.set_privacy_flag(store, site["_id"], visitor_id, field, on,
                                                 now=datetime.now(UTC), session=session)
        if before is None:
            return False
        if field == "restricted" and before != on:
            # The visitor's folded share of the figures comes out, or goes back.
            await derivation.restriction_switched(store, site["_id"], visitor_id,
                                                  restricted=on, session=session)
        await request_log.complete_request(store, request_id, outcome={field: on},
                                           session=session)
        await audit.record(store, action=f"visitor.{kind}_{'set' if on else 'lifted'}",
                           actor_user_id=actor_user_id, account_id=account_id,
                           organization_id=site["organizationId"], site_id=site["_id"],
                           details={"requestId": request_id}, session=session)
        return True

    async with request_log.failed_if_the_store_fails(store, request_id):
        switched = await store.transaction(switch)
    if not switched:
        await request_log.fail_request(store, request_id, "no data held")
        raise NotFound("visitor not found")
