"""`Deps`: everything the handlers need, created once per process by `server.build_deps`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from auth.recovery import PasswordRecovery
from auth.service import AuthService
from auth.team import Team
from auth.two_factor import TwoFactor
from config import Settings
from config.metrics import Metrics
from documents.requests import SubjectDigester
from documents.sites import SiteKeyring
from documents.store import Store
from handlers.validation import SchemaValidator
from ingest.intake import VisitorIntake
from ingest.ratelimit import SharedSiteRateLimiter, SiteRateLimiter
from ingest.recordings import RecordingLifecycle
from ingest.segment_sweeper import SegmentSweeper
from ingest.statements import StatementAttributor
from privacy.sealing import SecretSealer
from realtime.bus import EventBus
from realtime.hub import LiveHub
from realtime.site_changes import InProcessSiteChanges, RedisSiteChanges
from tasks.account_mail import AccountMailer
from tasks.derivation import FigureDeriver
from tasks.notifications import Notifier
from tasks.purge import RetentionPurger
from tasks.queue import ErrorQueue
from tasks.report_pool import ReportPool

log = logging.getLogger("visitor_service")


@dataclass
class Deps:
    """Everything the handlers need, created once per process and passed in."""

    settings: Settings
    store: Store
    auth: AuthService
    keyring: SiteKeyring
    sealer: SecretSealer
    schemas: SchemaValidator
    metrics: Metrics
    intake: VisitorIntake
    rate_limiter: SiteRateLimiter | SharedSiteRateLimiter
    bus: EventBus
    recordings: RecordingLifecycle
    segment_sweeper: SegmentSweeper
    #: Folds new data into the dashboard's figures (derived/derivation.py).
    derivation: FigureDeriver
    #: Removes what is past each site's retention (privacy/retention.py).
    purge: RetentionPurger
    queue: ErrorQueue
    hub: LiveHub
    notifier: Notifier
    #: Organizations' teams: members, invitations, roles (auth/team.py).
    team: Team
    #: Password changes and resets (auth/recovery.py).
    recovery: PasswordRecovery
    #: Two-factor sign-in: TOTP codes, recovery codes, organizations' requirement.
    two_factor: TwoFactor
    #: Account mail (invitations, password resets) through SMTP_URL.
    account_mailer: AccountMailer
    statements: StatementAttributor
    subject_digester: SubjectDigester
    #: Works out reports off the event loop, each within REPORT_TIME_LIMIT_SECONDS.
    reports: ReportPool
    #: How changes to sites reach this process's keyring; None on MongoDB without Redis.
    site_changes: RedisSiteChanges | InProcessSiteChanges | None = None
    readiness_checks: dict[str, Callable[[], Awaitable[Any]]] = field(default_factory=dict)
    closers: list[Callable[[], Awaitable[None] | None]] = field(default_factory=list)

    async def readiness(self) -> dict[str, bool]:
        """Run every readiness check; a check that raises or times out is not ready."""
        results: dict[str, bool] = {}
        for name, check in self.readiness_checks.items():
            try:
                await asyncio.wait_for(check(), timeout=2.0)
                results[name] = True
            except Exception:  # noqa: BLE001 - any failure means "not ready"
                log.warning("readiness check failed", extra={"check": name})
                results[name] = False
        return results

    async def close(self) -> None:
        """Close every client, newest first."""
        for closer in reversed(self.closers):
            result = closer()
            if asyncio.iscoroutine(result):
                await result
