"""The demo organization, owner and site the embedded default starts with, and its demo data.

Used by `visitor-service serve` on the embedded store only; it sits above every layer because
it drives the intake, the recordings and the error queue the way real traffic does.

The demo's data lives in memory, but its identity (login, site id and keys) is kept in the
demo file (`DEMO_FILE`, mode 0600) and reused by the next start, so a snippet pasted into a test
shop and the lines of `.visitor-service/demo.env` keep working across restarts.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import secrets
import shlex
import uuid
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from auth.passwords import PasswordHasher
from documents import accounts, error_records, sites
from documents.sites import SiteKeyring, SiteKeys
from ingest import activity, commerce
from ingest.recordings import RecordingLifecycle, SegmentUpload
from instants import format_instant
from tasks.queue import submit_error


@dataclass(frozen=True)
class DemoCredentials:
    """What `make run` prints and writes to the demo file."""

    email: str
    password: str
    siteId: str  # noqa: N815 - the demo file's keys are fixed by the issue
    apiKey: str  # noqa: N815
    publicKey: str  # noqa: N815

    def as_dict(self) -> dict[str, Any]:
        """The demo file's JSON object."""
        return asdict(self)

    def as_env(self, base_url: str) -> str:
        """`demo.env`: the same for `source`, with the address it is served at."""
        values = {"BASE_URL": base_url, "API_KEY": self.apiKey, "PUBLIC_KEY": self.publicKey,
                  "SITE_ID": self.siteId, "EMAIL": self.email, "PASSWORD": self.password}
        return "".join(f"{name}={shlex.quote(value)}\n" for name, value in values.items())


def saved_demo(path: Path) -> DemoCredentials | None:
    """The identity an earlier start saved in the demo file, or None (none, or not readable)."""
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        return DemoCredentials(**{f.name: str(saved[f.name]) for f in fields(DemoCredentials)})
    except (OSError, ValueError, KeyError, TypeError):
        return None


async def saved_login(store: Any, path: Path) -> DemoCredentials | None:
    """On a real store, the login and site a local start saved (`make run STORE=wire`), when
    that site is in this store: a server never tells another store's login."""
    saved = saved_demo(path)
    if saved is None or await sites.find_site(store, saved.siteId, {"_id": 1}) is None:
        return None
    return saved


async def seed_demo(store: Any, keyring: SiteKeyring, passwords: PasswordHasher, *, email: str,
                    password: str, public_url: str, saved: DemoCredentials | None = None
                    ) -> DemoCredentials:
    """Create the demo account, owner and site: with the `saved` identity when given (its
    login unless `email` or `password` is given), else generated credentials unless given."""
    email = email or (saved.email if saved else f"demo-{secrets.token_hex(3)}@example.com")
    password = password or (saved.password if saved else secrets.token_urlsafe(12))
    created = await accounts.create_account(
        store, email=email, password_hash=await passwords.hash(password),
        display_name="Demo Owner", account_name="Demo Account",
        organization_name="Demo Shop Ltd",
    )
    owner = await accounts.load_authenticated_user(store, created["userId"], "")
    assert owner is not None
    site, keys = await keyring.create_site(
        owner, created["organizationId"], "Demo Shop",
        [public_url, "http://localhost:8888", "http://127.0.0.1:8888"], {},
    )
    if saved is None:
        return DemoCredentials(email, password, site["_id"], keys.api_key, keys.public_key)
    await _take_saved_identity(keyring, site, saved)
    return DemoCredentials(email, password, saved.siteId, saved.apiKey, saved.publicKey)


async def _take_saved_identity(keyring: SiteKeyring, site: dict[str, Any],
                               saved: DemoCredentials) -> None:
    """Give the new demo site the saved id and keys (`SiteKeyring.restore_identity`)."""
    await keyring.restore_identity(site, saved.siteId, SiteKeys(saved.apiKey, saved.publicKey))


#: Demo visitors: (id, name or None, IP for the country lookup, user agent, screen, day offsets
#: of their pageviews). Names start with "Demo visitor" so the data reads as demo data.
DEMO_VISITORS = (
    ("demo-visitor-mia", "Demo visitor Mia Jensen", "81.2.69.160",
     "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 Version/17.5 Safari/605",
     "1440x900", (13, 9, 6, 3, 1, 0)),
    ("demo-visitor-jonas", "Demo visitor Jonas Weber", "85.214.132.117",
     "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
     "1920x1080", (12, 8, 8, 5, 2)),
    ("demo-visitor-anon", None, "2.16.6.1",
     "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148",
     "390x844", (11, 7, 4, 4, 2, 1, 0)),
)
DEMO_PAGES = ("/", "/product/blue-mug", "/product/teapot", "/cart", "/checkout")
#: A product page's product, as any shop's server marks a product view (`productId` on
#: /ingest/pageviews; the loader's `svc('product', …)` in the page): the funnel's first step.
PRODUCT_PAGE = "/product/"
DEMO_ERRORS = (
    ("TypeError", "Cannot read properties of undefined (reading 'price')", "demo-visitor-mia", 3),
    ("ReferenceError", "wc_cart_fragments_params is not defined", "demo-visitor-jonas", 1),
)


def demo_recording_events(url: str, start_ms: int) -> list[dict[str, Any]]:
    """A short valid rrweb recording of a simple page: meta, full snapshot, a few mouse moves."""
    def element(node_id: int, tag: str, children: list[dict[str, Any]],
                attributes: dict[str, str] | None = None) -> dict[str, Any]:
        return {"type": 2, "tagName": tag, "attributes": attributes or {},
                "childNodes": children, "id": node_id}

    def text(node_id: int, content: str) -> dict[str, Any]:
        return {"type": 3, "textContent": content, "id": node_id}

    body = element(5, "body", [
        element(6, "h1", [text(7, "Blue mug")]),
        element(8, "p", [text(9, "A sturdy stoneware mug. 12.50 EUR")]),
        element(10, "button", [text(11, "Add to cart")], {"id": "buy"}),
    ], {"style": "font-family: sans-serif; padding: 24px"})
    head = element(3, "head", [element(4, "title", [text(12, "Blue mug – Demo Shop")])])
    snapshot = {"type": 0, "id": 1, "childNodes": [
        {"type": 1, "name": "html", "publicId": "", "systemId": "", "id": 2},
        element(13, "html", [head, body], {"lang": "en"}),
    ]}
    events: list[dict[str, Any]] = [
        {"type": 4, "data": {"href": url, "width": 1024, "height": 640}, "timestamp": start_ms},
        {"type": 2, "data": {"node": snapshot, "initialOffset": {"top": 0, "left": 0}},
         "timestamp": start_ms + 10},
    ]
    for step in range(1, 9):
        events.append({"type": 3, "timestamp": start_ms + step * 600, "data": {
            "source": 1, "positions": [{"x": 40 + step * 30, "y": 60 + step * 12, "id": 10,
                                        "timeOffset": 0}]}})
    return events


async def seed_demo_activity(deps: Any, site_id: str, *, now: datetime | None = None) -> None:
    """A little realistic demo data, written through the real ingest paths.

    Three visitors with pageviews over the last 14 days, a lead, two errors processed by the
    error queue, a paid order, and two short recordings of one visitor on different days, so
    every page of the dashboard has something to show on a fresh `make run`.
    """
    now = now or datetime.now(UTC)
    site = await sites.find_site(deps.store, site_id)
    origin = "https://demo-shop.example"
    for visitor_id, name, ip, agent, screen, days in DEMO_VISITORS:
        context = {"visitorId": visitor_id, "ip": ip, "userAgent": agent, "screen": screen,
                   "language": "en-GB", "sessionId": f"{visitor_id}-s"}
        await activity.register_visitor(deps.intake, site, {
            **context, "occurredAt": format_instant(now - timedelta(days=max(days)))})
        for index, offset in enumerate(days):
            for page in DEMO_PAGES[: 2 + index % 4]:
                at = now - timedelta(days=offset, minutes=30 - DEMO_PAGES.index(page) * 3)
                await activity.record_pageview(deps.intake, site, {
                    **context, "url": origin + page, "occurredAt": format_instant(at),
                    "title": f"Demo Shop {page}", **_product(page)})
        if name:
            await activity.record_lead(deps.intake, deps.bus, deps.recordings, site, {
                **context, "email": f"{visitor_id}@example.com", "name": name,
                "phone": "+49 30 1234567", "kind": "form", "formId": "contact",
                "url": origin + "/contact",
                "occurredAt": format_instant(now - timedelta(days=days[-1])),
                "fields": {"message": "Do you ship the blue mug to Denmark?"}})
    agents = {visitor_id: agent for visitor_id, _, _, agent, _, _ in DEMO_VISITORS}
    for error_type, message, visitor_id, offset in DEMO_ERRORS:
        await submit_error(deps.queue, deps.intake, site, {
            "visitorId": visitor_id, "sessionId": f"{visitor_id}-s", "source": "javascript",
            "userAgent": agents[visitor_id], "context": {"release": "demo-1.0", "cartItems": 2},
            "type": error_type, "message": message, "url": origin + "/cart",
            "stack": f"{error_type}: {message}\n    at updateCart (cart.js:42:17)",
            "occurredAt": format_instant(now - timedelta(days=offset))})
    # Mia's order: the product seen, into the cart, to the checkout, placed and paid two days
    # ago (issue 31), so the shop funnel walks every step.
    shopped = now - timedelta(days=2, minutes=10)
    mia = {"visitorId": "demo-visitor-mia", "sessionId": "demo-visitor-mia-s",
           "ip": DEMO_VISITORS[0][2], "userAgent": DEMO_VISITORS[0][3], "language": "en-GB"}
    for page, before in (("/", 6), ("/product/blue-mug", 4)):
        await activity.record_pageview(deps.intake, site, {
            **mia, "url": origin + page, "title": f"Demo Shop {page}", **_product(page),
            "occurredAt": format_instant(shopped - timedelta(minutes=before))})
    for step, extra in (("add_to_cart", {"productId": "blue-mug", "quantity": 2,
                                         "price": "12.45", "currency": "EUR"}),
                        ("checkout_started", {}),
                        ("order_placed", {"orderId": "demo-1001", "total": "24.90",
                                          "currency": "EUR"}),
                        ("order_paid", {"orderId": "demo-1001"})):
        await commerce.record_commerce(deps.intake, site, {
            "eventId": f"demo-{step}", "type": step, "visitorId": "demo-visitor-mia",
            "sessionId": "demo-visitor-mia-s", "occurredAt": format_instant(shopped), **extra})
    for offset in (3, 0):
        await _seed_recording(deps, site, "demo-visitor-mia", now - timedelta(days=offset,
                                                                              minutes=20))
    await deps.segment_sweeper.sweep()
    await _wait_for_errors(deps.store, site_id, len(DEMO_ERRORS))
    # The dashboard opens on figures that count all of it.
    await deps.derivation.fold()


def _product(page: str) -> dict[str, str]:
    """`productId` for a product page, else nothing."""
    return {"productId": page.removeprefix(PRODUCT_PAGE)} if page.startswith(PRODUCT_PAGE) else {}


async def _seed_recording(deps: Any, site: dict[str, Any], visitor_id: str,
                          started: datetime) -> None:
    # A lifecycle on a clock of its own, so the demo sessions fall on different days and last
    # as long as their events.
    clock = {"now": started}
    lifecycle = RecordingLifecycle(deps.store, deps.settings, deps.intake,
                                   clock=lambda: clock["now"])
    url = "https://demo-shop.example/product/blue-mug"
    recording_id = str(uuid.uuid4())
    body = {"visitorId": visitor_id, "recordingId": recording_id, "url": url,
            "sessionId": f"{visitor_id}-s"}
    await lifecycle.start(site, body)
    events = demo_recording_events(url, int(started.timestamp() * 1000))
    await lifecycle.add_segment(site, SegmentUpload(
        recording_id=recording_id, seq=0, visitor_id=visitor_id, page_url=url,
        data=gzip.compress(json.dumps(events).encode()), session_id=f"{visitor_id}-s",
        started_at=format_instant(started),
        ended_at=format_instant(started + timedelta(seconds=5))))
    clock["now"] = started + timedelta(seconds=5)
    await lifecycle.end(site, body)


async def _wait_for_errors(store: Any, site_id: str, count: int) -> None:
    # The queue's workers process errors in the background; the dashboard should open on them.
    for _ in range(100):
        if await error_records.count_errors(store, site_id) >= count:
            return
        await asyncio.sleep(0.05)
