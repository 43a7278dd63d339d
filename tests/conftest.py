"""Fixtures: a fresh app per test on the embedded store or over the wire, and HTTP helpers.

Two store back-ends:

* the embedded store (mongomock-motor, in-process), the default;
* a real server through the real driver: `--store=wire` starts a SecantusDB (MongoDB wire
  protocol, replica-set transactions) for the run, and MONGODB_URI names any other replica set
  (e.g. mongodb://localhost:27017/?replicaSet=rs0). Each test gets its own database, dropped
  afterwards.

Every test that uses the `store` fixture (directly or through the app) is marked `store`; those
whose module is not in RUN_ONCE (and that are not `embedded_only`) are marked `wire`, and
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
from tests.support.live import LiveClient, open_live
from tests.support.redis_server import running_redis
from tests.support.secantus import running_secantus

#: The browser fixtures (one Chromium per test process) are shared by every folder that drives it.
pytest_plugins = ["tests.support.browser"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--store", choices=("embedded", "wire"), default="embedded",
                     help="embedded: mongomock-motor in-process (default); wire: start a "
                          "SecantusDB and run through the real MongoDB driver")


#: Tests that reach the store but run once, on the embedded store: what they check does not depend
#: on how the store behaves, and the store paths they pass through are tested on the wire by the
#: modules named in the reason. Paths are relative to tests/; tests/README.md gives the rule.
RUN_ONCE: dict[str, str] = {
    "ui": "the dashboard's pages in Chromium; their data is dashboard_api's, on the wire",
    "browser": "the loader in Chromium; what it sends is stored by ingest and recordings code "
               "that ingest/, recordings/ and sdk/ test on the wire",
    "wordpress": "the plugin inside WordPress; the service side is ingest/'s, on the wire",
    "realtime": "the live bus, hub and sockets; the errors they carry are tasks/', on the wire",
    "handlers/test_route_sweep.py": "authentication and status of every route (HTTP shapes)",
    "handlers/test_error_shape.py": "the one error shape (HTTP shapes)",
    "handlers/test_api_docs.py": "the API documentation page",
    "handlers/test_slow_body.py": "slow request bodies (the HTTP server)",
    "heatmaps/test_render_ssrf.py": "what the renderer's Chromium may fetch",
    "hardening/test_live_memory.py": "memory of live sockets that never read",
    "hardening/test_queue_depth.py": "the queue-depth gauge",
    "config/test_logging.py": "what reaches the logs",
    "test_openapi.py": "routes against docs/openapi.yaml",
}
TESTS_ROOT = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "store: the test touches the store (set automatically)")
    config.addinivalue_line(
        "markers", "wire: runs again on the wire: it touches the store and its module is not in "
                   "RUN_ONCE (set automatically)")
    config.addinivalue_line(
        "markers", "embedded_only(reason): about the embedded store itself; skipped on the wire")


def _on_the_wire(config: pytest.Config) -> bool:
    return config.getoption("--store") == "wire" or bool(os.environ.get("MONGODB_URI"))


def _runs_once(item: pytest.Item) -> bool:
    relative = item.path.relative_to(TESTS_ROOT).as_posix()
    return any(relative == key or relative.startswith(key + "/") for key in RUN_ONCE)


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


#: bcrypt's lowest cost: production keeps 12 (tests/config holds that), which is slow on purpose.
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
        "BCRYPT_ROUNDS": str(TEST_BCRYPT_ROUNDS),
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
async def tenant(make_tenant: TenantFactory) -> Tenant:
    """One signed-in tenant."""
    return await make_tenant()
