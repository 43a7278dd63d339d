"""Fixtures: a fresh app per test on the embedded store or over the wire, and HTTP helpers.

Two store back-ends:

* the embedded store (mongomock-motor, in-process), the default;
* a real server through the real driver: `--store=wire` starts a SecantusDB (MongoDB wire
  protocol, replica-set transactions) for the run, and MONGODB_URI names any other replica set
  (e.g. mongodb://localhost:27017/?replicaSet=rs0). Each test gets its own database, dropped
  afterwards.

Every test that uses the `store` fixture (directly or through the app) is marked `store`; those
not in RUN_ONCE (and not `embedded_only`) are marked `wire`, and
`pytest --store=wire -m wire` runs them on the wire. Tests about the embedded store itself are
marked `embedded_only(reason)` and skipped if run on the wire.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest
import tornado.netutil
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

import server
from auth.passwords import PasswordHasher
from config import Settings, load_settings
from documents import accounts
from documents.store import Store, open_store
from handlers.validation import SchemaValidator
from privacy.useragent import UserAgentParser
from tests.support.app import TEST_PASSWORD, Answer, Tenant
from tests.support.faulty_store import FaultPlan, FaultyStore
from tests.support.ingest import Ingest
from tests.support.live import LiveClient, open_live
from tests.support.redis_server import running_redis
from tests.support.secantus import running_secantus

#: The browser fixtures (one Chromium per test process) are shared by every folder that drives it.
pytest_plugins = ["tests.support.browser"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--store", choices=("embedded", "wire"), default="embedded",
                     help="embedded: mongomock-motor in-process (default); wire: start a "
                          "SecantusDB and run through the real MongoDB driver")


#: Tests that reach the store but run once, on the embedded store. The rule (tests/README.md): what
#: they assert is a page's look, an HTTP shape, the plugin's own side inside WordPress, what the
#: loader or the live socket does in the page, or the server's own machinery, never data the store
#: produced, and the store paths they pass through are tested on the wire by the modules named in
#: the reason. A key is a folder, a module or `module::test_name` (every parameter set of that
#: test), relative to tests/.
RUN_ONCE: dict[str, str] = {
    # HTTP shapes and the server's own machinery
    "handlers/test_error_shape.py": "the one error shape, the health and metrics answers (HTTP "
                                    "shapes; readiness is given a failing check, not a store)",
    "handlers/test_api_docs.py": "the API reference page and the served OpenAPI file",
    "handlers/test_slow_body.py": "a request body trickling in (the HTTP server's timeout)",
    "test_openapi.py": "routes against docs/openapi.yaml",
    "hardening/test_live_memory.py": "Python's memory while live sockets stall (the hub's "
                                     "queues); what the sockets carry is realtime/'s, on the wire",
    "hardening/test_queue_depth.py": "the embedded queue's depth gauge; the jobs' data is "
                                     "tasks/test_error_pipeline.py's, on the wire",
    "heatmaps/test_render_ssrf.py": "what the renderer's Chromium may fetch; rendering and "
                                    "storing an image is heatmaps/test_render.py's, on the wire",
    # The loader in Chromium: when and where it works in the page
    "browser/test_recording_stays_off_the_shops_loading_path.py":
        "the order of the recorder's work in the page and where it cuts segments; storing "
        "segments is recordings/test_recording_ingest.py's, on the wire",
    "browser/test_clicks_as_the_owner_sees_them.py":
        "which element the loader names for a click and which clicks it calls rage or dead; "
        "storing its batches is recordings/test_interactions.py's, on the wire",
    "browser/test_recording_when_leaving.py::test_a_live_segment_upload_that_fails_is_sent_again":
        "the loader sending a failed upload again (the failure never reaches the service); one "
        "copy per (recording, seq) is recordings/test_recording_ingest.py's, on the wire",
    "browser/test_replay_as_the_owner_sees_it.py":
        "the replay's marks in the player; placing marks is recordings/test_marks.py's, on the "
        "wire",
    "browser/test_heatmaps_in_chromium.py":
        "real clicks drawn on the clicked button; counting, rendering, storing and erasing are "
        "heatmaps/test_aggregates.py's and test_render.py's, on the wire",
    # The dashboard in Chromium: a page's look, or a flow whose data one wire module checks
    "ui/test_phone_and_desktop_layout.py": "the layout at a phone's and a desktop's width",
    "ui/test_heatmaps.py": "dots drawn on their element at each width; the figures drawn are "
                           "heatmaps/test_aggregates.py's and test_heatmap_api.py's, on the wire",
    "ui/test_dashboard.py::test_the_shell_is_served_with_a_strict_content_security_policy":
        "the shell's headers",
    "ui/test_dashboard.py::test_the_dashboard_is_usable_from_the_keyboard_with_a_visible_focus":
        "focus and accessible names",
    "ui/test_first_look.py::test_no_page_load_asks_for_anything_that_answers_404":
        "the assets a page asks for",
    "ui/test_first_look.py::"
    "test_on_a_phone_the_header_is_one_line_and_headings_break_only_between_words":
        "the layout at a phone's width",
    "ui/test_what_the_owner_reads.py::"
    "test_an_inverted_date_range_keeps_the_date_controls_and_says_what_is_wrong":
        "the date form's message; the range's figures are dashboard_api/test_insights.py's",
    "ui/test_what_the_owner_reads.py::"
    "test_a_fresh_dashboard_load_asks_for_a_sign_in_without_a_failed_refresh":
        "which requests the shell makes at load; refreshing is handlers/test_auth.py's",
    "ui/test_dashboard.py::"
    "test_an_error_ingested_through_the_api_appears_in_the_live_feed_within_two_seconds":
        "the live feed's socket in the page; the error's way there is realtime/'s, on the wire",
    "ui/test_dashboard_actions.py::"
    "test_signing_out_closes_the_live_socket_so_later_errors_reach_no_feed":
        "the page's live socket at sign-out; realtime/test_live_socket.py, on the wire, closes it "
        "at logout",
    "ui/test_what_the_owner_reads.py::"
    "test_the_live_feed_still_shows_the_past_hours_errors_and_leads_after_a_reload":
        "the feed's items as shown; what it reads after a reload is "
        "dashboard_api/test_live_feed_after_reload.py's, on the wire",
    "ui/test_surveys.py::test_with_gpc_no_survey_shows_and_nothing_is_sent":
        "the widget's side under GPC: nothing is sent, so nothing reaches the store",
    "ui/test_install.py::test_settings_show_the_snippet_and_the_plugin_with_the_values_to_enter":
        "the snippet and the archive as served",
    "ui/test_install.py::test_without_a_built_archive_the_settings_say_how_to_build_it":
        "a hint on the settings page",
    "funnels/test_reports_never_freeze_the_server.py::"
    "test_healthz_answers_while_two_reports_with_pathological_patterns_are_worked_out":
        "the event loop kept free while reports are worked out; their figures are "
        "funnels/test_revenue_at_risk.py's, on the wire",
    "ui/test_surveys.py::test_a_survey_shows_after_its_delay_is_answered_by_keyboard_and_"
    "reaches_the_results": "the widget's delay and keyboard use; answers and results are "
                           "dashboard_api/test_surveys.py's, on the wire",
    # The pages of issues 41 to 43: each a flow whose every store path an API module checks
    "ui/test_team_page.py": "the team and invitation pages; invitations, roles, removal and "
                            "resets are accounts/test_team.py's and test_passwords.py's, on the "
                            "wire",
    "ui/test_account_page.py": "the account page and the sign-in's second step; two-factor is "
                               "accounts/test_two_factor.py's, on the wire",
    "ui/test_site_pages.py": "the settings page's site forms; creating and deleting a site are "
                             "sites/test_site_creation.py's and test_site_deletion.py's, on the "
                             "wire",
    "ui/test_alerts_page.py": "the alerts page; rules, deliveries, tests and mutes are "
                              "alerts/'s, on the wire",
    "ui/test_sessions_page.py": "the sessions page's filters in the address and its phone cards; "
                                "the lists and segments are dashboard_api/test_sessions.py's, on "
                                "the wire",
    "ui/test_setup_checklist.py": "the checklist as shown; its steps and reasons are "
                                  "dashboard_api/test_setup_status.py's, on the wire",
    # The plugin's own side inside WordPress: its pages, options, limits and outbox
    "wordpress/test_settings_form.py": "WordPress's own options table (the key's autoload)",
    "wordpress/test_plugin_in_wordpress.py::test_rendering_a_page_makes_no_call_to_the_service":
        "which calls a rendered page makes",
    "wordpress/test_plugin_in_wordpress.py::test_php_errors_are_bounded_and_deduplicated_per_"
    "request": "how many requests the plugin sends",
    "wordpress/test_plugin_in_wordpress.py::test_the_settings_check_and_the_api_key_never_shown":
        "the plugin's settings page",
    "wordpress/test_plugin_in_wordpress.py::"
    "test_the_settings_screen_is_for_administrators_and_checks_the_connection":
        "the plugin's settings page and who may open it",
    "wordpress/test_plugin_in_wordpress.py::"
    "test_deactivation_stops_collection_and_uninstall_removes_everything":
        "what the plugin leaves in WordPress",
    "wordpress/test_limits.py::"
    "test_one_address_is_refused_after_its_limit_per_minute_and_refusals_are_counted":
        "the plugin's own rate limit and its counts",
    "wordpress/test_limits.py::test_a_full_outbox_refuses_new_items_and_counts_them":
        "the plugin's outbox and its counts",
    "wordpress/test_shop_pages.py::test_addresses_come_from_the_sites_url_not_the_host_header":
        "an address the plugin builds",
    "wordpress/test_shop_pages.py::test_save_and_check_connection_checks_what_was_typed_and_"
    "says_it_once": "the plugin's settings page",
}
TESTS_ROOT = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "store: the test touches the store (set automatically)")
    config.addinivalue_line(
        "markers", "wire: runs again on the wire: it touches the store and is not in RUN_ONCE (set "
                   "automatically)")
    config.addinivalue_line(
        "markers", "embedded_only(reason): about the embedded store itself; skipped on the wire")


def _on_the_wire(config: pytest.Config) -> bool:
    return config.getoption("--store") == "wire" or bool(os.environ.get("MONGODB_URI"))


def _runs_once(item: pytest.Item) -> bool:
    relative = item.path.relative_to(TESTS_ROOT).as_posix()
    test = f"{relative}::{getattr(item, 'originalname', item.name)}"
    return any(key in (relative, test) or relative.startswith(key + "/") for key in RUN_ONCE)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wire = _on_the_wire(config)
    for item in items:
        marker = item.get_closest_marker("embedded_only")
        if "store" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.store)
            if marker is None and not _runs_once(item):
                item.add_marker(pytest.mark.wire)
        if wire and marker is not None:
            item.add_marker(pytest.mark.skip(reason=f"embedded store only: {marker.args[0]}"))
        if item.path.is_relative_to(TESTS_ROOT / "wordpress"):
            # One WordPress per test process is started on first use: keep them on one.
            item.add_marker(pytest.mark.xdist_group("wordpress"))


#: bcrypt's lowest cost, for speed. The settings refuse anything below 10 (BCRYPT_ROUNDS), so the
#: suite builds its hasher here and hands it to build_deps; a deployment keeps 12 by default
#: (tests/config holds both).
TEST_BCRYPT_ROUNDS = 4


@pytest.fixture(scope="session")
def passwords() -> PasswordHasher:
    """One password hasher for the whole run, at the test cost."""
    return PasswordHasher(TEST_BCRYPT_ROUNDS)


@pytest.fixture(scope="session")
def schemas() -> SchemaValidator:
    """docs/openapi.yaml parsed once for the whole run."""
    return SchemaValidator()


@pytest.fixture(scope="session")
def user_agents() -> UserAgentParser:
    """The user-agent matchers built once for the whole run."""
    return UserAgentParser()


@pytest.fixture(scope="session")
def test_password_hash() -> str:
    """One bcrypt hash of TEST_PASSWORD for the whole run."""
    return bcrypt.hashpw(TEST_PASSWORD.encode(), bcrypt.gensalt(TEST_BCRYPT_ROUNDS)).decode()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A real redis-server for the whole run (no persistence), stopped at the end."""
    with running_redis() as url:
        yield url


@pytest.fixture(scope="session")
def mongodb_uri(request: pytest.FixtureRequest) -> Iterator[str]:
    """The replica set the tests use: '' for the embedded store."""
    if request.config.getoption("--store") == "wire":
        with running_secantus() as uri:
            yield uri
    else:
        yield os.environ.get("MONGODB_URI", "")


@pytest.fixture
def settings_env(mongodb_uri: str) -> dict[str, str]:
    """Environment the test settings are read from; tests may add to it before `settings`."""
    return {
        "SECRET_KEY": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "MASTER_KEY": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "MONGODB_URI": mongodb_uri,
        "MONGODB_DATABASE": f"test_{secrets.token_hex(6)}",
        "PUBLIC_URL": "http://127.0.0.1:8888",
    }


@pytest.fixture
def settings(settings_env: dict[str, str]) -> Settings:
    """Settings for one test."""
    return load_settings(settings_env)


@pytest.fixture
def faults() -> FaultPlan:
    """Operations to fail and calls to record: a test that asks for it gets its store (and the
    app's) wrapped in a `FaultyStore` following this plan."""
    return FaultPlan()


@pytest.fixture
async def store(settings: Settings, request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """A store of its own for each test; behind the `faults` plan when the test asks for one."""
    store = open_store(settings.mongodb_uri, settings.mongodb_database)
    if "faults" in request.fixturenames:
        yield FaultyStore(store, request.getfixturevalue("faults"))  # type: ignore[misc]
    else:
        yield store
    if not store.embedded:
        await store.client.drop_database(settings.mongodb_database)
    store.close()


@pytest.fixture
async def deps(settings: Settings, store: Store, schemas: SchemaValidator,
               user_agents: UserAgentParser, passwords: PasswordHasher
               ) -> AsyncIterator[server.Deps]:
    """The app's dependencies, with the run's shared schemas, parser and hasher."""
    deps = await server.build_deps(settings, store=store, schemas=schemas,
                                   user_agents=user_agents, passwords=passwords)
    yield deps
    deps.closers.remove(store.close)  # the store fixture owns the client
    await deps.close()


@pytest.fixture
async def base_url(settings: Settings, deps: server.Deps) -> AsyncIterator[str]:
    """The running app's base URL."""
    await server.start_live(deps)
    app = server.make_app(settings, deps)
    http_server = server.make_http_server(settings, app)
    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
    http_server.add_sockets(sockets)
    port = sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    http_server.stop()
    await http_server.close_all_connections()


Fetch = Callable[..., Awaitable[Answer]]
LiveConnect = Callable[..., Awaitable[LiveClient]]


@pytest.fixture
def fetch(base_url: str) -> Fetch:
    """Call the app: fetch(path, method=, json=, body=, token=, headers=)."""
    client = AsyncHTTPClient()

    async def call(path: str, method: str = "GET", *, json_body: Any = None,
                   body: bytes | str | None = None, token: str | None = None,
                   headers: dict[str, str] | None = None, **kwargs: Any) -> Answer:
        all_headers = dict(headers or {})
        if json_body is not None:
            body = json.dumps(json_body)
            all_headers.setdefault("Content-Type", "application/json")
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"
        if body is None and method in ("POST", "PUT", "PATCH"):
            body = b""
        request = HTTPRequest(base_url + path, method=method, body=body, headers=all_headers,
                              allow_nonstandard_methods=True, request_timeout=30, **kwargs)
        return Answer(await client.fetch(request, raise_error=False))

    return call


@pytest.fixture
async def ws_connect(base_url: str, settings: Settings) -> AsyncIterator[LiveConnect]:
    """Open /dashboard/live from the dashboard's origin: ws_connect(token=, site_ids=, origin=)."""
    opened: list[LiveClient] = []

    async def connect(*, token: str | None = None, site_ids: tuple[str, ...] = (),
                      origin: str | None = settings.public_url) -> LiveClient:
        client = await open_live(base_url, origin=origin, token=token, site_ids=site_ids)
        opened.append(client)
        return client

    yield connect
    for client in opened:
        client.close()


TenantFactory = Callable[..., Awaitable[Tenant]]


@pytest.fixture
def make_tenant(deps: server.Deps, fetch: Fetch, test_password_hash: str) -> TenantFactory:
    """Create a signed-in tenant (owner + organization + site) through the public API."""

    async def create(name: str = "shop", origins: tuple[str, ...] = ("https://shop.example",),
                     settings: dict[str, Any] | None = None) -> Tenant:
        email = f"{name}-{secrets.token_hex(4)}@example.com"
        created = await accounts.create_account(
            deps.store, email=email, password_hash=test_password_hash, display_name=name,
            account_name=name, organization_name=f"{name} org",
        )
        login = await fetch("/auth/login", "POST",
                            json_body={"email": email, "password": TEST_PASSWORD})
        assert login.code == 200, login
        tokens = login.json()
        site = await fetch("/api/v1/sites", "POST", token=tokens["accessToken"], json_body={
            "name": f"{name} site", "allowedOrigins": list(origins), "settings": settings or {},
        })
        assert site.code == 201, site
        return Tenant(email, created["userId"], created["accountId"], created["organizationId"],
                      tokens["accessToken"], tokens["refreshToken"], site.json()["id"],
                      site.json()["apiKey"], site.json()["publicKey"])

    return create


@pytest.fixture
def ingest(fetch: Fetch, tenant: Tenant) -> Ingest:
    """POST to /ingest/<kind> with the tenant's API key: ingest("pageviews", {...})."""

    async def post(kind: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = await fetch(f"/ingest/{kind}", "POST", json_body=body,
                             headers={"X-Service-Key": tenant.api_key})
        assert answer.code == 200, (kind, answer)
        return answer.json()

    return post


@pytest.fixture
async def tenant(make_tenant: TenantFactory) -> Tenant:
    """One signed-in tenant."""
    return await make_tenant()
