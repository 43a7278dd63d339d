"""Server-side ingest (`/ingest/*`, spec §4.1): the CMS server forwards what it knows.

Each endpoint authenticates the site API key from `X-Service-Key`, applies the per-site rate
limit, validates the body against its schema in docs/openapi.yaml, and hands it to one intake
function. Every rejection is counted with its reason, like every drop. The JSON endpoints are
`IngestEndpoint`s served by the ingest edge (handlers/ingest_edge.py); `IngestHandler` is the
RequestHandler form of the same contract, for the segment upload.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from handlers.base import BaseHandler
from handlers.ingest_edge import IngestEndpoint, authenticate_service_key, count_rejection
from ingest import activity
from ingest.intake import Outcome

if TYPE_CHECKING:
    from server import Deps


def acknowledgement(outcome: Outcome) -> dict[str, Any]:
    """The answer to an accepted item: `id` when stored, `dropped` with the rule otherwise."""
    body: dict[str, Any] = {"ok": True}
    if outcome.stored:
        body["id"] = outcome.item_id
    else:
        body["dropped"] = outcome.reason
    return body


class IngestHandler(BaseHandler):
    """RequestHandler base of an /ingest endpoint: `X-Service-Key` auth, counted rejections."""

    authentication = "service_key"
    #: The metrics label and privacy-gate kind of what this endpoint receives.
    kind: ClassVar[str] = "unknown"
    #: The request schema's name in docs/openapi.yaml.
    schema: ClassVar[str] = ""

    site: dict[str, Any]

    def _authenticators(self) -> dict[str, Any]:
        return {**super()._authenticators(), "service_key": self._authenticate_service_key}

    async def _authenticate_service_key(self) -> None:
        self.current_user = None
        self.site = await authenticate_service_key(self.deps,
                                                   self.request.headers.get("X-Service-Key", ""))

    def payload(self) -> dict[str, Any]:
        """The validated body."""
        return self.validated_body(self.schema)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        count_rejection(self.deps.metrics, self.kind, status_code,
                        kwargs.get("exc_info", (None, None, None))[1])
        super().write_error(status_code, **kwargs)


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


default_handlers = [
    # A pageview, with the product when the shop knows it.
    (r"/ingest/pageviews", IngestEndpoint("pageview", "PageviewIngest", _pageview)),
    # Register or update a visitor.
    (r"/ingest/visitors", IngestEndpoint("visitor", "VisitorIngest", _visitor)),
    # A lead or checkout, with cart and shop session; announced live as `new_lead`.
    (r"/ingest/leads", IngestEndpoint("lead", "LeadIngest", _lead)),
    # Additions to spec §4.1: survey answers, a chat transcript, a consent decision.
    (r"/ingest/surveys", IngestEndpoint("survey", "SurveyIngest", _survey)),
    (r"/ingest/chats", IngestEndpoint("chat", "ChatIngest", _chat)),
    (r"/ingest/consents", IngestEndpoint("consent", "ConsentIngest", _consent)),
]
