"""Server-side ingest (`/ingest/*`, spec §4.1): the CMS server forwards what it knows.

Each endpoint authenticates the site API key from `X-Service-Key`, applies the per-site rate
limit, validates the body against its schema in docs/openapi.yaml, and hands it to one intake
function. Every rejection is counted with its reason, like every drop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from documents import sites
from errors import InvalidInput
from handlers.ingest_api import acknowledgement, ingest_route
from ingest import activity, commerce

if TYPE_CHECKING:
    from handlers.deps import Deps


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


async def _shop(deps: Deps, site: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    zone = body["timeZone"]
    if not sites.known_time_zone(zone):
        raise InvalidInput("timeZone must be an IANA time zone name such as Europe/Berlin",
                           field="timeZone")
    return {"ok": True, "timeZone": await deps.keyring.adopt_time_zone(site, zone)}


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
    # Issue 41: the shop's own settings the service adopts (its time zone, until one is chosen).
    ingest_route(r"/ingest/shop", "shop", "ShopIngest", _shop),
]
