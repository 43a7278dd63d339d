"""Pageview attribution from signed product statements (spec §1, data flow 3).

A statement that fails any check never costs the visitor their pageview: the pageview is stored
without attribution and the rejection is counted with its reason. A statement verifies against
the site's current key and, during KEY_ROTATION_GRACE_SECONDS after a rotation, the previous one
(SiteKeyring.statement_keys); its nonce is claimed once, so a replayed statement is refused.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from config.metrics import Metrics
from documents import statement_nonces
from documents.sites import SiteKeyring
from documents.store import Store
from privacy.statements import FUTURE_SKEW_SECONDS, verify_statement

STATEMENTS_METRIC = "product_statements_total"
STATEMENTS_HELP = "Product statements presented with pageviews, by outcome and rejection reason."


class StatementAttributor:
    """Turns a statement token into a pageview's product attribution, or counts why not."""

    def __init__(self, store: Store, keyring: SiteKeyring, metrics: Metrics, *,
                 max_age_seconds: int) -> None:
        self._store = store
        self._keyring = keyring
        self._metrics = metrics
        self._max_age = max_age_seconds

    async def attribute(self, site: dict[str, Any], token: str, page_url: str,
                        now: datetime | None = None) -> dict[str, Any] | None:
        """The attribution for this pageview, or None (the rejection is counted)."""
        now = now or datetime.now(UTC)
        check = verify_statement(token, self._keyring.statement_keys(site, now),
                                 int(now.timestamp()), self._max_age, page_url=page_url)
        if check.statement is None:
            self._count("rejected", check.rejection or "malformed")
            return None
        statement = check.statement
        # Past this moment the statement is expired anyway, so its nonce need not be kept.
        expires_at = datetime.fromtimestamp(statement.issued_at, UTC) + timedelta(
            seconds=self._max_age + FUTURE_SKEW_SECONDS)
        if not await statement_nonces.claim_nonce(self._store, site["_id"], statement.nonce,
                                                  expires_at):
            self._count("rejected", "replayed")
            return None
        self._count("accepted", "")
        return {"productId": statement.product_id, "via": "statement"}

    def _count(self, outcome: str, reason: str) -> None:
        self._metrics.count(STATEMENTS_METRIC, STATEMENTS_HELP, outcome=outcome, reason=reason)
