"""Browser collection (`/sdk/v1/*`, spec §1 data flow 1 and 3, §4.2): the loader's endpoints.

The caller is the site's public key, which travels in the URL path because `sendBeacon` cannot
set headers, plus the page's `Origin`, which must be one of the site's allowed origins. An
unknown key answers 401 and a foreign origin 403, before the body is read; nothing is stored
but the foreign origin's count for the site's first-run checklist.
CORS answers allowed origins only, echoing the exact origin (never `*`) with `Vary: Origin`, on
every answer to them, refusals before the key check included; an unknown key or a foreign origin
gets none (decision "CORS on early browser errors" in docs/decisions.md).
`Sec-GPC: 1` answers 204 and stores nothing (the drop is counted). The visitor's address and
user agent come from the request, never from the body, and go through the same intake as
/ingest. See docs/sdk.md and docs/decisions.md, "Browser collection".
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from documents import surveys
from documents.sites import normalise_origin
from documents.store import Store
from errors import (
    Forbidden,
    InvalidInput,
    NotFound,
    RateLimited,
    Unauthenticated,
    Unavailable,
)
from handlers.base import BaseHandler
from handlers.ingest_api import (
    QUERY_METADATA_CONTENT_TYPE,
    SEGMENT_HEADERS,
    acknowledgement,
    interaction_answer,
    segment_answer,
    segment_upload,
)
from ingest import activity, browser
from ingest.intake import ORIGIN_NOT_ALLOWED, Outcome
from ingest.interactions import record_interactions
from privacy.gate import ItemKind
from tasks.queue import submit_error

#: The built loader and recorder (`make` runs `npm ci` and the build in sdk/).
SDK_DIST = Path(__file__).resolve().parent.parent / "sdk" / "dist"

#: Where the built loader takes the site's settings (sdk/src/loader.js, `SITE`).
SITE_CONFIG_SLOT = b"'\"__SVC_SITE_CONFIG__\"'"

#: A preflight may be reused this long; the allowed origins rarely change.
PREFLIGHT_MAX_AGE_SECONDS = 600


class SdkHandler(BaseHandler):
    """Base of the /sdk/v1 endpoints: public key + Origin, CORS, GPC, rate limit."""

    authentication = "public_key"
    #: `navigator.sendBeacon` sends strings as text/plain, the one type without a preflight.
    accepted_content_types = ("application/json", "text/plain")
    #: The privacy-gate kind and metrics label of what this endpoint receives.
    kind: ClassVar[ItemKind] = "pageview"
    #: The request schema's name in docs/openapi.yaml.
    schema: ClassVar[str] = ""
    #: Methods a preflight may ask for, and the request headers it may name.
    cors_methods: ClassVar[str] = "POST"
    cors_headers: ClassVar[str] = "Content-Type"

    site: dict[str, Any]
    #: The site the path's public key names, once looked up; None for an unknown key.
    _keyed_site: dict[str, Any] | None = None
    #: The origin every answer to this request echoes in CORS headers, or None for none.
    _cors_origin: str | None = None

    def set_default_headers(self) -> None:
        super().set_default_headers()
        # The answer differs by Origin, so shared caches must key on it.
        self.set_header("Vary", "Origin")
        if self._cors_origin:
            self._set_cors_headers()

    def _set_cors_headers(self) -> None:
        self.set_header("Access-Control-Allow-Origin", self._cors_origin or "")
        self.set_header("Access-Control-Allow-Methods", self.cors_methods)
        self.set_header("Access-Control-Allow-Headers", self.cors_headers)
        # Without this the page could read a 429 or 503 but not when to come back.
        self.set_header("Access-Control-Expose-Headers", "Retry-After")
        self.set_header("Access-Control-Max-Age", str(PREFLIGHT_MAX_AGE_SECONDS))

    async def prepare(self) -> None:
        # The key and Origin are looked at before any check may refuse the request, so that an
        # allowed origin can read those refusals (413, 431) too.
        await self._identify_caller()
        await super().prepare()

    async def _identify_caller(self) -> None:
        """Look up the key's site and, when the site allows the Origin, answer it with CORS."""
        public_key = self.path_args[0] if self.path_args else ""
        self._keyed_site = await self.deps.keyring.site_for_public_key(public_key)
        origin = _normalised(self.request.headers.get("Origin", ""))
        if self._keyed_site is not None and origin is not None \
                and origin in self._keyed_site.get("allowedOrigins", []):
            self._cors_origin = origin
            self._set_cors_headers()

    def _authenticators(self) -> dict[str, Any]:
        return {**super()._authenticators(), "public_key": self._authenticate_public_key}

    async def _authenticate_public_key(self) -> None:
        site = self._keyed_site
        if site is None:
            raise Unauthenticated("the site public key is not valid", code="invalid_public_key")
        if self._cors_origin is None:
            # Told on the site's first-run checklist; only while the site's browser bucket has
            # room, so a flood of foreign origins cannot become a flood of writes.
            if self.request.method != "OPTIONS" and await self.deps.rate_limiter.take(
                    f"public:{site['_id']}") is None:
                await self.deps.intake.count_site_drop(site, ORIGIN_NOT_ALLOWED)
            raise Forbidden("this Origin is not allowed for the site", code=ORIGIN_NOT_ALLOWED)
        self.current_user = None
        self.site = site
        if self.request.method == "OPTIONS":
            return
        # Browser traffic has a bucket of its own, so a public key (public by design) that is
        # abused cannot starve the shop server's /ingest calls.
        retry_after = await self.deps.rate_limiter.take(f"public:{site['_id']}")
        if retry_after is not None:
            raise RateLimited("too many requests for this site", retry_after=retry_after)
        if self.request.headers.get("Sec-GPC", "").strip() == "1":
            await self.deps.intake.admit(site, self.kind, {}, gpc=True)
            self.set_status(204)
            self.finish()

    async def options(self, *_: str) -> None:
        """Preflight: reached only when the key and Origin passed, so the answer allows them."""
        self.set_status(204)
        self.finish()

    def payload(self) -> dict[str, Any]:
        """The validated body with the visitor's address and user agent from the request."""
        body = self.validated_body(self.schema)
        return {**body, "ip": self.client_ip,
                "userAgent": self.request.headers.get("User-Agent", "")[:2048]}

    def acknowledge(self, outcome: Outcome) -> None:
        """Answer an accepted item: stored, or acknowledged and dropped with its reason."""
        self.write_json(acknowledgement(outcome))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        self.deps.metrics.count("sdk_rejected_total", "Browser requests refused, by reason.",
                                kind=self.kind, reason=getattr(exc, "code", None)
                                or str(status_code))
        super().write_error(status_code, **kwargs)


class SdkPageviewHandler(SdkHandler):
    """POST /sdk/v1/{publicKey}/pageview: an anonymous pageview, maybe with a product statement."""

    kind = "pageview"
    schema = "SdkPageview"

    async def post(self, _: str) -> None:
        body = self.payload()
        statement = body.pop("statement", None)
        attribution = None
        if statement:
            attribution = await self.deps.statements.attribute(self.site, statement, body["url"])
        self.acknowledge(await activity.record_pageview(self.deps.intake, self.site, body,
                                                        attribution=attribution))


class SdkTimeOnPageHandler(SdkHandler):
    """POST /sdk/v1/{publicKey}/time-on-page: how long the pageview lasted (a beacon)."""

    kind = "time_on_page"
    schema = "SdkTimeOnPage"

    async def post(self, _: str) -> None:
        self.acknowledge(await browser.record_time_on_page(self.deps.intake, self.site,
                                                            self.payload()))


class SdkConsentHandler(SdkHandler):
    """POST /sdk/v1/{publicKey}/consents: the visitor's consent decision, sent once."""

    kind = "consent"
    schema = "SdkConsent"

    async def post(self, _: str) -> None:
        self.acknowledge(await activity.record_consent(self.deps.intake, self.site,
                                                       self.payload()))


class SdkErrorHandler(SdkHandler):
    """POST /sdk/v1/{publicKey}/errors: a JavaScript error, queued on `errors-ingest`."""

    kind = "error"
    schema = "SdkError"

    async def post(self, _: str) -> None:
        await submit_error(self.deps.queue, self.deps.intake, self.site, self.payload())
        self.write_json({"ok": True})


class SdkInteractionHandler(SdkHandler):
    """POST /sdk/v1/{publicKey}/interactions: clicks, rage and dead clicks, scroll depth."""

    kind = "interaction"
    schema = "SdkInteractions"

    async def post(self, _: str) -> None:
        result = await record_interactions(self.deps.store, self.deps.intake, self.site,
                                           self.payload())
        self.write_json(interaction_answer(result))


class SdkRecordingStartHandler(SdkHandler):
    """POST /sdk/v1/{publicKey}/recordings/start: start (or continue) a recording."""

    kind = "recording"
    schema = "SdkRecordingStart"

    async def post(self, _: str) -> None:
        self.acknowledge(await self.deps.recordings.start(self.site, self.payload()))


class SdkRecordingEndHandler(SdkHandler):
    """POST /sdk/v1/{publicKey}/recordings/end: end a recording."""

    kind = "recording"
    schema = "SdkRecordingEnd"

    async def post(self, _: str) -> None:
        self.acknowledge(await self.deps.recordings.end(self.site, self.payload()))


class SdkRecordingSegmentHandler(SdkHandler):
    """POST /sdk/v1/{publicKey}/recordings/segment: gzip bytes, metadata in X-* headers.

    Or, as `text/plain`, metadata in the query string: what the recorder sends while the page
    is being left, as a "simple" request with no preflight (see `segment_upload`).
    """

    kind = "recording"
    accepted_content_types = ("application/octet-stream", QUERY_METADATA_CONTENT_TYPE)
    # Not a "simple" request, so the preflight must allow the metadata headers by name.
    cors_headers = ", ".join(["Content-Type", *[h for h in SEGMENT_HEADERS
                                                 if h != "X-Visitor-Gpc"]])

    def _body_limit(self) -> int:
        return self.deps.settings.max_segment_bytes

    async def post(self, _: str) -> None:
        upload = segment_upload(self.request, self.body, self.deps.schemas,
                                self.accepted_content_types)
        upload = replace(upload, user_agent=self.request.headers.get("User-Agent", "")[:2048])
        result = await self.deps.recordings.add_segment(self.site, upload)
        self.write_json(segment_answer(result))


class SdkSurveyHandler(SdkHandler):
    """POST /sdk/v1/{publicKey}/surveys: survey answers from a shop without the plugin."""

    kind = "survey"
    schema = "SdkSurvey"

    async def post(self, _: str) -> None:
        self.acknowledge(await activity.record_survey(self.deps.intake, self.site,
                                                      self.payload()))


async def loader_config(store: Store, site: dict[str, Any]) -> dict[str, Any]:
    """The site's collection settings and its active surveys, as the loader acts on them."""
    return {**browser.loader_config(site),
            "surveys": await surveys.widget_surveys(store, site["_id"])}


class SdkConfigHandler(SdkHandler):
    """GET /sdk/v1/{publicKey}/config: the settings the loader acts on before collecting."""

    kind = "visitor"
    cors_methods = "GET"

    async def get(self, _: str) -> None:
        self.set_header("Cache-Control", "private, max-age=60")
        self.write_json(await loader_config(self.deps.store, self.site))


class SdkAssetHandler(BaseHandler):
    """GET /sdk/v1/loader.js?key=pk_... and /sdk/v1/recorder.js: the built scripts.

    Public on purpose: a script tag sends no Origin. The loader carries the site's collection
    settings, written in when it is served, so a page that needs consent makes no further
    request before consent; the recorder is the same for every site.
    """

    authentication = "none"

    def initialize(self, file: str) -> None:
        self.file = file

    async def get(self) -> None:
        """Serve the script; 503 when the SDK has not been built on this machine."""
        path = SDK_DIST / self.file
        if not path.is_file():
            raise Unavailable("the browser SDK is not built; run `make run`", retry_after=60)
        script = path.read_bytes()
        if self.file == "loader.js":
            site = await self.deps.keyring.site_for_public_key(self.get_query_argument("key", ""))
            if site is None:
                raise NotFound("no site has this public key")
            config = json.dumps(json.dumps(await loader_config(self.deps.store, site)))
            script = script.replace(SITE_CONFIG_SLOT, config.encode("utf-8"), 1)
        self.set_header("Content-Type", "text/javascript; charset=utf-8")
        # Settings changes reach pages within five minutes.
        self.set_header("Cache-Control", "public, max-age=300")
        # Loaded by a plain script tag on the shop's page: no CORS needed, but a cross-origin
        # resource policy of the shop must not block it.
        self.set_header("Cross-Origin-Resource-Policy", "cross-origin")
        self.finish(script)

    async def head(self) -> None:
        """As GET, without the body: uptime monitors check the loader this way."""
        await self.get()


def _normalised(origin: str) -> str | None:
    if not origin or origin == "null":
        return None
    try:
        return normalise_origin(origin)
    except InvalidInput:
        return None


PUBLIC_KEY = r"([^/]+)"

default_handlers: list[tuple[str, Any]] = [
    # Unescaped dots: the paths read as themselves in the route sweep; "." matches itself too.
    (r"/sdk/v1/loader.js", SdkAssetHandler, {"file": "loader.js"}),
    (r"/sdk/v1/recorder.js", SdkAssetHandler, {"file": "recorder.js"}),
    (r"/sdk/v1/survey.js", SdkAssetHandler, {"file": "survey.js"}),
    (rf"/sdk/v1/{PUBLIC_KEY}/config", SdkConfigHandler),
    (rf"/sdk/v1/{PUBLIC_KEY}/pageview", SdkPageviewHandler),
    (rf"/sdk/v1/{PUBLIC_KEY}/time-on-page", SdkTimeOnPageHandler),
    (rf"/sdk/v1/{PUBLIC_KEY}/consents", SdkConsentHandler),
    (rf"/sdk/v1/{PUBLIC_KEY}/surveys", SdkSurveyHandler),
    (rf"/sdk/v1/{PUBLIC_KEY}/errors", SdkErrorHandler),
    (rf"/sdk/v1/{PUBLIC_KEY}/interactions", SdkInteractionHandler),
    (rf"/sdk/v1/{PUBLIC_KEY}/recordings/start", SdkRecordingStartHandler),
    (rf"/sdk/v1/{PUBLIC_KEY}/recordings/segment", SdkRecordingSegmentHandler),
    (rf"/sdk/v1/{PUBLIC_KEY}/recordings/end", SdkRecordingEndHandler),
]
