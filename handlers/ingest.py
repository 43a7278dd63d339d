"""Server-side ingest (`/ingest/*`, spec §4.1): the CMS server forwards what it knows.

Each endpoint authenticates the site API key from `X-Service-Key`, applies the per-site rate
limit, validates the body against its schema in docs/openapi.yaml, and hands it to one intake
function. Every rejection is counted with its reason, like every drop.
"""

from __future__ import annotations

from typing import Any, ClassVar

from errors import RateLimited, Unauthenticated
from handlers.base import BaseHandler
from ingest import activity
from ingest.intake import Outcome


def acknowledgement(outcome: Outcome) -> dict[str, Any]:
    """The answer to an accepted item: `id` when stored, `dropped` with the rule otherwise."""
    body: dict[str, Any] = {"ok": True}
    if outcome.stored:
        body["id"] = outcome.item_id
    else:
        body["dropped"] = outcome.reason
    return body


class IngestHandler(BaseHandler):
    """Base of the /ingest endpoints: `X-Service-Key` auth, rate limit, counted rejections."""

    authentication = "service_key"
    #: The metrics label and privacy-gate kind of what this endpoint receives.
    kind: ClassVar[str] = "unknown"
    #: The request schema's name in docs/openapi.yaml.
    schema: ClassVar[str] = ""

    site: dict[str, Any]

    def _authenticators(self) -> dict[str, Any]:
        return {**super()._authenticators(), "service_key": self._authenticate_service_key}

    async def _authenticate_service_key(self) -> None:
        key = self.request.headers.get("X-Service-Key", "").strip()
        if not key:
            raise Unauthenticated("the X-Service-Key header is required", code="missing_key")
        site = await self.deps.keyring.site_for_api_key(key)
        if site is None:
            raise Unauthenticated("the site API key is not valid", code="invalid_key")
        self.current_user = None
        self.site = site
        retry_after = self.deps.rate_limiter.take(site["_id"])
        if retry_after is not None:
            raise RateLimited("too many requests for this site", retry_after=retry_after)

    def payload(self) -> dict[str, Any]:
        """The validated body."""
        return self.validated_body(self.schema)

    def acknowledge(self, outcome: Outcome) -> None:
        """Answer an accepted item: stored, or acknowledged and dropped with its reason."""
        self.write_json(acknowledgement(outcome))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        reason = getattr(exc, "code", None) or str(status_code)
        self.deps.metrics.count("ingest_rejected_total", "Ingest requests refused, by reason.",
                                kind=self.kind, reason=reason)
        super().write_error(status_code, **kwargs)


class PageviewIngestHandler(IngestHandler):
    """POST /ingest/pageviews: a pageview, with the product when the shop knows it."""

    kind = "pageview"
    schema = "PageviewIngest"

    async def post(self) -> None:
        self.acknowledge(await activity.record_pageview(self.deps.intake, self.site,
                                                        self.payload()))


class VisitorIngestHandler(IngestHandler):
    """POST /ingest/visitors: register or update a visitor."""

    kind = "visitor"
    schema = "VisitorIngest"

    async def post(self) -> None:
        self.acknowledge(await activity.register_visitor(self.deps.intake, self.site,
                                                         self.payload()))


class LeadIngestHandler(IngestHandler):
    """POST /ingest/leads: a lead or checkout, with cart and shop session."""

    kind = "lead"
    schema = "LeadIngest"

    async def post(self) -> None:
        self.acknowledge(await activity.record_lead(self.deps.intake, self.deps.bus,
                                                    self.deps.recordings, self.site,
                                                    self.payload()))


class SurveyIngestHandler(IngestHandler):
    """POST /ingest/surveys (an addition to spec §4.1): survey answers."""

    kind = "survey"
    schema = "SurveyIngest"

    async def post(self) -> None:
        self.acknowledge(await activity.record_survey(self.deps.intake, self.site,
                                                      self.payload()))


class ChatIngestHandler(IngestHandler):
    """POST /ingest/chats (an addition to spec §4.1): a chat transcript with its messages."""

    kind = "chat"
    schema = "ChatIngest"

    async def post(self) -> None:
        self.acknowledge(await activity.record_chat(self.deps.intake, self.site, self.payload()))


class ConsentIngestHandler(IngestHandler):
    """POST /ingest/consents (an addition to spec §4.1): a consent decision."""

    kind = "consent"
    schema = "ConsentIngest"

    async def post(self) -> None:
        self.acknowledge(await activity.record_consent(self.deps.intake, self.site,
                                                       self.payload()))


default_handlers = [
    (r"/ingest/pageviews", PageviewIngestHandler),
    (r"/ingest/visitors", VisitorIngestHandler),
    (r"/ingest/leads", LeadIngestHandler),
    (r"/ingest/surveys", SurveyIngestHandler),
    (r"/ingest/chats", ChatIngestHandler),
    (r"/ingest/consents", ConsentIngestHandler),
]
