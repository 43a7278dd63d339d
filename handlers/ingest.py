"""Server-side ingest (`/ingest/*`, spec §4.1): the CMS server forwards what it knows.

Each endpoint authenticates the site API key from `X-Service-Key`, applies the per-site rate
limit, validates the body against its schema in docs/openapi.yaml, and hands it to one intake
function. Every rejection is counted with its reason, like every drop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar

from errors import RateLimited, Unauthenticated
from handlers.base import BaseHandler
from ingest import activity, commerce
from ingest.intake import Outcome

if TYPE_CHECKING:
    from handlers.deps import Deps

#: What a JSON ingest endpoint does with a validated body: the answer's JSON object.
Accept = Callable[["Deps", dict[str, Any], dict[str, Any]], Awaitable[dict[str, Any]]]


def acknowledgement(outcome: Outcome) -> dict[str, Any]:
    """The answer to an accepted item: `id` when stored, `dropped` with the rule otherwise."""
    body: dict[str, Any] = {"ok": True}
    if outcome.stored:
        body["id"] = outcome.item_id
    else:
        body["dropped"] = outcome.reason
    return body


class IngestHandler(BaseHandler):
    """Base of an /ingest endpoint: `X-Service-Key` auth and rate limit, counted rejections."""

    authentication = "service_key"
    #: The metrics label and privacy-gate kind of what this endpoint receives.
    kind: ClassVar[str] = "unknown"

    site: dict[str, Any]

    def _authenticators(self) -> dict[str, Any]:
        return {**super()._authenticators(), "service_key": self._authenticate_service_key}

    async def _authenticate_service_key(self) -> None:
        self.current_user = None
        key = self.request.headers.get("X-Service-Key", "").strip()
        if not key:
            raise Unauthenticated("the X-Service-Key header is required", code="missing_key")
        site = await self.deps.keyring.site_for_api_key(key)
        if site is None:
            raise Unauthenticated("the site API key is not valid", code="invalid_key")
        retry_after = await self.deps.rate_limiter.take(site["_id"])
        if retry_after is not None:
            raise RateLimited("too many requests for this site", retry_after=retry_after)
        self.site = site

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        self.deps.metrics.count("ingest_rejected_total", "Ingest requests refused, by reason.",
                                kind=self.kind,
                                reason=getattr(exc, "code", None) or str(status_code))
        super().write_error(status_code, **kwargs)


class JsonIngestHandler(IngestHandler):
    """POST of one JSON object: validated against its schema, handed to its intake call."""

    def initialize(self, kind: str, schema: str, accept: Accept) -> None:
        self.kind = kind
        self.schema = schema
        self.accept = accept

    async def post(self) -> None:
        payload = self.validated_body(self.schema)
        self.write_json(await self.accept(self.deps, self.site, payload))


def ingest_route(path: str, kind: str, schema: str, accept: Accept
                 ) -> tuple[str, type[JsonIngestHandler], dict[str, Any]]:
    """The route of a JSON ingest endpoint: its path, metrics kind, schema and intake call."""
    return path, JsonIngestHandler, {"kind": kind, "schema": schema, "accept": accept}


async def _pageview(deps: Deps, site: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return acknowledgement(await activity.record_pageview(deps.intake, site, body))


async def _visitor(deps: Deps, site: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return acknowledgement(await activity.register_visitor(deps.intake, site, body))


async def _lead(deps: Deps, site: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return acknowledgement(await activity.record_lead(deps.intake, deps.bus, deps.recordings,
                                                      site, body))


async def _survey(deps: Deps, site: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return acknowledgement(await activity.record_survey(deps.intake, site, body))


async def _chat(deps: Deps, site: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return acknowledgement(await activity.record_chat(deps.intake, site, body))


async def _consent(deps: Deps, site: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return acknowledgement(await activity.record_consent(deps.intake, site, body))


async def _commerce(deps: Deps, site: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return acknowledgement(await commerce.record_commerce(deps.intake, site, body))


default_handlers = [
    # A pageview, with the product when the shop knows it.
    ingest_route(r"/ingest/pageviews", "pageview", "PageviewIngest", _pageview),
    # Register or update a visitor.
    ingest_route(r"/ingest/visitors", "visitor", "VisitorIngest", _visitor),
    # A lead or checkout, with cart and shop session; announced live as `new_lead`.
    ingest_route(r"/ingest/leads", "lead", "LeadIngest", _lead),
    # Additions to spec §4.1: survey answers, a chat transcript, a consent decision.
    ingest_route(r"/ingest/surveys", "survey", "SurveyIngest", _survey),
    ingest_route(r"/ingest/chats", "chat", "ChatIngest", _chat),
    ingest_route(r"/ingest/consents", "consent", "ConsentIngest", _consent),
    # Issue 31: carts, checkouts and orders from the shop's server (ingest/commerce.py).
    ingest_route(r"/ingest/commerce", "commerce", "CommerceIngest", _commerce),
]
