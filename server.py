"""Visitor Service: `make_app(settings, deps)`, the async `main()`, and the command line.

Nothing connects at import time. `build_deps` creates every client from the settings inside the
running loop, `make_app` wires handlers to them, and `serve` owns the lifecycle: start, signal,
graceful stop, close.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import getpass
import json
import logging
import os
import signal
import socket
import ssl
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import tornado.httpserver
import tornado.netutil
import tornado.web

import documents
from auth.passwords import PasswordHasher
from auth.recovery import PasswordRecovery
from auth.service import AuthService, ThrottleLimits
from auth.team import Team
from auth.tokens import TokenIssuer
from auth.two_factor import TwoFactor
from config import Settings, SettingsError, load_settings
from config.logging import configure_logging, log_request
from config.metrics import Metrics
from demo import saved_demo, saved_login, seed_demo, seed_demo_activity
from derived import derivation, store_setup
from documents.account_links import LinkSigner
from documents.accounts import is_family_revoked
from documents.requests import SubjectDigester
from documents.sites import KeyHasher, SiteKeyring
from documents.store import Store, open_store
from handlers import alerts as alert_handlers
from handlers import api_docs as api_docs_handlers
from handlers import auth as auth_handlers
from handlers import csv_exports as csv_export_handlers
from handlers import data_api as data_api_handlers
from handlers import funnels as funnel_handlers
from handlers import health as health_handlers
from handlers import heatmaps as heatmap_handlers
from handlers import ingest as ingest_handlers
from handlers import ingest_errors as ingest_error_handlers
from handlers import ingest_recordings as recording_handlers
from handlers import live as live_handlers
from handlers import notifications as notification_handlers
from handlers import orders as order_handlers
from handlers import retention as retention_handlers
from handlers import sdk as sdk_handlers
from handlers import sessions as session_handlers
from handlers import setup as setup_handlers
from handlers import site_deletion as site_deletion_handlers
from handlers import sites as site_handlers
from handlers import subject_requests_by_email as privacy_by_email_handlers
from handlers import surveys as survey_handlers
from handlers import team as team_handlers
from handlers import two_factor as two_factor_handlers
from handlers import ui as ui_handlers
from handlers import visitors as visitor_handlers
from handlers.base import NotFoundHandler
from handlers.deps import Deps
from handlers.validation import SchemaValidator
from ingest.intake import VisitorIntake
from ingest.ratelimit import SharedSiteRateLimiter, SiteRateLimiter
from ingest.recordings import RecordingLifecycle
from ingest.segment_sweeper import SegmentSweeper
from ingest.statements import StatementAttributor
from privacy.geo import open_country_resolver
from privacy.geo_default import default_database_path
from privacy.sealing import SecretSealer
from privacy.statements import derive_statement_key
from privacy.useragent import UserAgentParser
from realtime.bus import EventBus, InProcessBus, RedisBus
from realtime.hub import LiveHub
from realtime.site_changes import InProcessSiteChanges, RedisSiteChanges
from tasks.account_mail import AccountMailer, parse_smtp_url
from tasks.alerts import AlertEvaluator
from tasks.derivation import FigureDeriver
from tasks.heatmaps import HEATMAP_CHROMIUM, HeatmapRenderer
from tasks.notifications import Notifier
from tasks.purge import RetentionPurger
from tasks.report_pool import ReportPool
from tasks.worker import open_error_queue, run_worker

log = logging.getLogger("visitor_service")

#: The request line and headers together. The largest legitimate one is the recorder's
#: page-leave segment, whose metadata travels in the query string: a page URL of up to 4096
#: characters is up to 48 KiB once percent-encoded (four-byte characters, 12 bytes each), plus
#: its other fields and headers. Tornado closes the connection above this without an answer;
#: below it, a single header over handlers.base.MAX_HEADER_VALUE_BYTES gets a JSON 431.
MAX_HEADER_BYTES = 64 * 1024

#: How long a request body may take to arrive once its headers have (a trickling client is cut
#: off after it).
BODY_TIMEOUT_SECONDS = 60.0


async def build_deps(settings: Settings, *, store: Store | None = None,
                     schemas: SchemaValidator | None = None,
                     user_agents: UserAgentParser | None = None,
                     passwords: PasswordHasher | None = None) -> Deps:
    """Create the clients for these settings and ensure the indexes. The parts that never change
    while a process runs (the schemas, the user-agent parser, the password hasher) are built here
    unless given, so a process that builds many apps builds them once."""
    store = store or open_store(settings.mongodb_uri, settings.mongodb_database)
    await store_setup.prepare_store(store)
    sealer = SecretSealer(settings.master_key)
    issuer = TokenIssuer(settings.secret_key, settings.public_url)
    auth = AuthService(
        store, issuer, passwords or PasswordHasher(settings.bcrypt_rounds), settings.secret_key,
        ThrottleLimits(settings.login_failures_per_pair, settings.login_failures_per_ip,
                       settings.login_failures_per_account),
        settings.refresh_token_days, settings.refresh_grace_seconds,
    )
    metrics = Metrics()
    metrics.counter("store_transactions_total", "Multi-document transactions run.",
                    lambda: store.transactions_run)
    metrics.counter("store_transaction_retries_total",
                    "Transactions MongoDB aborted (a write conflict or another transient "
                    "error) whose work then ran again.", lambda: store.transactions_retried)
    countries = open_country_resolver(settings.geoip_database or default_database_path())
    intake = VisitorIntake(store, settings, metrics, countries,
                           user_agents or UserAgentParser())
    recordings = RecordingLifecycle(store, settings, intake)
    site_changes = open_site_changes(settings)
    keyring = SiteKeyring(store, KeyHasher(settings.secret_key), sealer, derive_statement_key,
                          changes=site_changes, cache_size=settings.site_cache_size,
                          max_age_seconds=settings.site_cache_max_age_seconds)
    bus: EventBus = RedisBus(settings.redis_url) if settings.redis_url else InProcessBus()
    notifier = Notifier(store, sealer, public_url=settings.public_url,
                        max_attempts=settings.notify_max_attempts,
                        retry_seconds=settings.notify_retry_seconds,
                        allow_private_webhooks=settings.webhook_allow_private_addresses)
    account_mailer = AccountMailer(
        store, parse_smtp_url(settings.smtp_url, settings.public_url)
        if settings.smtp_url else None,
        max_attempts=settings.notify_max_attempts, retry_seconds=settings.notify_retry_seconds)
    link_signer = LinkSigner(settings.secret_key)
    team = Team(store, auth.passwords, link_signer, account_mailer, settings.public_url)
    recovery = PasswordRecovery(store, auth.passwords, link_signer, account_mailer,
                                settings.secret_key, settings.public_url)
    # The worker side of the queue publishes through the same bus the handlers use.
    queue = open_error_queue(settings, store=store, bus=bus, metrics=metrics, notifier=notifier)
    deps = Deps(
        settings=settings,
        store=store,
        auth=auth,
        keyring=keyring,
        sealer=sealer,
        schemas=schemas or SchemaValidator(),
        metrics=metrics,
        intake=intake,
        recordings=recordings,
        segment_sweeper=SegmentSweeper(
            store, metrics, recordings, max_inflated_bytes=settings.segment_max_inflated_bytes,
            interval_seconds=settings.segment_sweep_interval_seconds),
        # With REDIS_URL the worker folds; a server process then only measures the lag.
        derivation=FigureDeriver(store, metrics,
                                 interval_seconds=settings.derivation_interval_seconds,
                                 folds=not settings.redis_url),
        # Like the derivation: purged here on the embedded default; with REDIS_URL, by the
        # worker, and a server process only reads the purge's state for /metrics.
        purge=RetentionPurger(store, metrics, notifier,
                              interval_seconds=settings.retention_purge_interval_seconds,
                              batch=settings.retention_purge_batch,
                              purges=not settings.redis_url),
        rate_limiter=(
            SharedSiteRateLimiter(settings.redis_url, settings.site_rate_per_second,
                                  settings.site_rate_burst)
            if settings.redis_url
            else SiteRateLimiter(settings.site_rate_per_second, settings.site_rate_burst)),
        bus=bus,
        hub=LiveHub(settings.live_queue_limit,
                    is_session_revoked=lambda family: is_family_revoked(store, family),
                    session_check_seconds=settings.live_session_check_seconds),
        notifier=notifier,
        team=team,
        recovery=recovery,
        two_factor=TwoFactor(store, sealer, auth.passwords, settings.secret_key,
                             settings.public_url),
        account_mailer=account_mailer,
        statements=StatementAttributor(store, keyring, metrics,
                                       max_age_seconds=settings.statement_max_age_seconds),
        subject_digester=SubjectDigester(settings.secret_key),
        reports=ReportPool(settings.report_threads, settings.report_time_limit_seconds, metrics),
        queue=queue,
        site_changes=site_changes,
    )
    deps.queue.start()
    deps.readiness_checks["mongodb"] = store.ping
    if isinstance(deps.bus, RedisBus):
        deps.readiness_checks["live_bus"] = deps.bus.ping
    deps.closers.append(store.close)
    # Closers run newest first, so this runs just before the store closes: requests still being
    # served when the server stopped finish their transactions first.
    deps.closers.append(store.settle)
    deps.closers.append(countries.close)
    deps.closers.append(deps.bus.close)
    if site_changes is not None:
        deps.closers.append(site_changes.close)
    if isinstance(site_changes, RedisSiteChanges):
        metrics.gauge("site_changes_subscribed",
                      "1 while this process hears of every change to a site, so key lookups "
                      "may use the sites it keeps; 0: every lookup reads the store.",
                      lambda: float(site_changes.live()))
        metrics.counter("site_changes_unannounced_total",
                        "Changes to a site this process could not announce to the others "
                        "(they keep the old site up to SITE_CACHE_MAX_AGE_SECONDS).",
                        lambda: site_changes.announce_failures)
    deps.closers.append(deps.rate_limiter.close)
    deps.closers.append(deps.segment_sweeper.close)
    deps.closers.append(deps.derivation.close)
    deps.closers.append(deps.purge.close)
    deps.closers.append(deps.reports.close)
    deps.closers.append(deps.hub.close)
    deps.closers.append(deps.notifier.close)
    deps.closers.append(deps.account_mailer.close)
    deps.bus.listen(deps.hub.dispatch)
    deps.closers.append(deps.queue.close)  # closed first: draining may still publish
    return deps


def open_site_changes(settings: Settings) -> RedisSiteChanges | InProcessSiteChanges | None:
    """How this process hears of changes to sites made by others, which the keyring needs
    before it may keep sites: Redis pub/sub with REDIS_URL; on the embedded store, nothing to
    hear (no other process can open it); on MongoDB without Redis, no way to hear of another
    server's or `rotate-key`'s change, so None, and every key lookup reads the store."""
    if settings.redis_url:
        return RedisSiteChanges(settings.redis_url)
    if settings.embedded:
        return InProcessSiteChanges()
    return None


async def start_live(deps: Deps) -> None:
    """Subscribe this server process to the live bus and to site changes, and start the hub
    (servers only)."""
    await deps.bus.start()
    if deps.site_changes is not None:
        await deps.site_changes.start()
    deps.hub.start()


def make_app(settings: Settings, deps: Deps) -> tornado.web.Application:
    """The Tornado application for these settings and dependencies."""
    # Tornado tries the patterns in order, one regular expression each, so the busiest routes
    # (errors and pageviews from shop servers, then the rest of ingest and the browser SDK)
    # come first; no two groups' patterns overlap, except the UI's catch-all, which must stay
    # last.
    routes: list[Any] = [
        *ingest_error_handlers.default_handlers,
        *ingest_handlers.default_handlers,
        *privacy_by_email_handlers.default_handlers,
        *sdk_handlers.default_handlers,
        *recording_handlers.default_handlers,
        *health_handlers.default_handlers,
        *auth_handlers.default_handlers,
        *site_handlers.default_handlers,
        *site_deletion_handlers.default_handlers,
        *team_handlers.default_handlers,
        *two_factor_handlers.default_handlers,
        *funnel_handlers.default_handlers,
        *retention_handlers.default_handlers,
        *setup_handlers.default_handlers,
        *visitor_handlers.default_handlers,
        *data_api_handlers.default_handlers,
        *order_handlers.default_handlers,
        *session_handlers.default_handlers,
        *heatmap_handlers.default_handlers,
        *csv_export_handlers.default_handlers,
        *survey_handlers.default_handlers,
        *live_handlers.default_handlers,
        *notification_handlers.default_handlers,
        *alert_handlers.default_handlers,
        *api_docs_handlers.default_handlers,
        *ui_handlers.default_handlers,
    ]
    return tornado.web.Application(
        routes,
        deps=deps,
        default_handler_class=NotFoundHandler,
        log_function=log_request,
        xsrf_cookies=False,
        compress_response=True,
        websocket_ping_interval=20,
        # Tornado caps the timeout at the interval; a dead socket is dropped within 40 s.
        websocket_ping_timeout=20,
        websocket_max_message_size=64 * 1024,
    )


def tls_context(settings: Settings) -> ssl.SSLContext | None:
    """An SSLContext with a TLS 1.2 minimum, when a certificate and key are configured."""
    if not settings.tls_enabled:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(settings.tls_cert_file, settings.tls_key_file)
    return context


def make_http_server(settings: Settings, app: tornado.web.Application, *,
                     body_timeout: float = BODY_TIMEOUT_SECONDS
                     ) -> tornado.httpserver.HTTPServer:
    """The HTTP server with body limits that fit the largest accepted upload.

    An API route refuses a declared length over its own limit before the body is read, with the
    JSON 413 (`BaseHandler.prepare`); the server's limit bounds the rest, such as chunked bodies.
    """
    return tornado.httpserver.HTTPServer(
        app,
        ssl_options=tls_context(settings),
        xheaders=False,  # client IPs come from BaseHandler.client_ip (trusted proxies only)
        max_body_size=max(settings.max_segment_bytes, settings.max_event_body_bytes) + 64 * 1024,
        idle_connection_timeout=60,
        body_timeout=body_timeout,
        max_header_size=MAX_HEADER_BYTES,
    )


#: The demo's credentials for `source`, beside the demo file (README, "First calls").
DEMO_ENV = "demo.env"


async def write_demo_file(settings: Settings, deps: Deps) -> dict[str, Any]:
    """Seed the embedded store's demo data, with the identity an earlier start saved, and write
    its credentials file and `demo.env` beside it (both readable by their owner only)."""
    demo_file = Path(settings.demo_file)
    demo = await seed_demo(deps.store, deps.keyring, deps.auth.passwords,
                           email=settings.demo_email, password=settings.demo_password,
                           public_url=settings.public_url, saved=saved_demo(demo_file))
    await seed_demo_activity(deps, demo.siteId)
    _write_private_file(demo_file, json.dumps(demo.as_dict(), indent=2) + "\n")
    _write_private_file(demo_file.with_name(DEMO_ENV), demo.as_env(settings.public_url))
    return demo.as_dict()


async def _saved_login(settings: Settings, deps: Deps) -> dict[str, Any] | None:
    """On a real store, the login and site a local start saved in the demo file (`make run
    STORE=wire` does), with `demo.env` written beside it; None unless the site is in the store,
    so a server never prints another store's login."""
    demo_file = Path(settings.demo_file)
    saved = await saved_login(deps.store, demo_file)
    if saved is None:
        return None
    _write_private_file(demo_file.with_name(DEMO_ENV), saved.as_env(settings.public_url))
    return saved.as_dict()


def _write_private_file(path: Path, text: str) -> None:
    """Write a file only its owner can read, with no moment in which others could."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path, 0o600)  # an existing file keeps its old mode through O_CREAT


async def serve(settings: Settings, ready: asyncio.Event | None = None) -> None:
    """Run the server until SIGTERM or SIGINT, then stop accepting and drain."""
    # The port first: a start that cannot listen must not replace the saved demo login.
    sockets = _bind(settings)
    deps = await build_deps(settings)
    if settings.generated_secrets:
        log.warning("generated ephemeral secrets for the embedded store; tokens and sealed "
                    "values will not survive a restart",
                    extra={"generated": list(settings.generated_secrets)})
    if settings.embedded:
        demo = await write_demo_file(settings, deps)
        print(_demo_banner(settings, demo), flush=True)
    elif (login := await _saved_login(settings, deps)) is not None:
        print(_demo_banner(settings, login), flush=True)
    await start_live(deps)
    # Segments are served only once checked, so every serving process also checks them;
    # leases keep several processes (and workers) from checking the same one.
    deps.segment_sweeper.start()
    # The figures are folded here on the embedded default; with REDIS_URL, by the worker.
    deps.derivation.start()
    deps.purge.start()
    # Alert rules are evaluated beside the derivation: here on the embedded default, by the
    # worker when REDIS_URL is set.
    if not settings.redis_url:
        evaluator = AlertEvaluator(
            deps.store, deps.metrics, deps.notifier,
            interval_seconds=settings.alert_evaluation_interval_seconds,
            purge_interval_seconds=settings.retention_purge_interval_seconds)
        evaluator.start()
        deps.closers.append(evaluator.close)
    # Heatmap backgrounds are rendered off the request path, where Debian's Chromium is: here
    # on the embedded default, by the worker when REDIS_URL is set (a browser competes with
    # the requests for the web process's cores).
    if not settings.redis_url:
        renderer = HeatmapRenderer(
            deps.store, chromium_path=HEATMAP_CHROMIUM,
            allow_private_addresses=settings.heatmap_allow_private_addresses)
        if renderer.start():
            deps.closers.append(renderer.close)
    app = make_app(settings, deps)
    server = make_http_server(settings, app)
    # Everything built so far (modules, schemas, routes, the demo data) lives as long as the
    # process; moving it out of the collector's view keeps full collections, which otherwise
    # walk all of it, short under load (Instagram's gc.freeze practice).
    gc.freeze()
    server.add_sockets(sockets)
    log.info("listening", extra={"url": settings.public_url, "embedded": settings.embedded})
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    if ready is not None:
        ready.set()
    await stop.wait()
    log.info("shutting down")
    server.stop()
    try:
        await asyncio.wait_for(server.close_all_connections(), timeout=10)
    except TimeoutError:
        log.warning("connections still open after 10 s; closing anyway")
    await deps.close()


def _bind(settings: Settings) -> list[socket.socket]:
    """The listening sockets for HOST and PORT; SettingsError in one line when they are taken."""
    try:
        return tornado.netutil.bind_sockets(settings.port, settings.host)
    except OSError as exc:
        raise SettingsError(f"PORT: cannot listen on {settings.host}:{settings.port} "
                            f"({exc.strerror}); stop whatever uses it or set another PORT"
                            ) from None


def _demo_banner(settings: Settings, demo: dict[str, Any]) -> str:
    url = settings.public_url
    event = json.dumps({"visitorId": "first-visitor", "url": "https://shop.example/"})
    store = ("the embedded store (data lives in memory; the login, site and keys are kept)"
             if settings.embedded else f"MongoDB, database {settings.mongodb_database}")
    env_file = Path(settings.demo_file).with_name(DEMO_ENV)
    return (
        f"\nVisitor Service is running on {store}.\n\n"
        f"1. Open the dashboard: {url}/\n"
        f"   and sign in as {demo['email']} with the password {demo['password']}\n\n"
        "2. Paste this into your shop's pages, before </head> (add the page's origin first in\n"
        "   the dashboard, under Settings > Allowed origins):\n"
        "   <script>window.svc = window.svc || function () { (svc.q = svc.q || [])"
        ".push(arguments); };</script>\n"
        f'   <script async src="{url}/sdk/v1/loader.js?key={demo["publicKey"]}"></script>\n\n'
        "3. Send a test event from your shop's server, then find it under Visitors:\n"
        f"   curl -sS -X POST {url}/ingest/pageviews -H 'Content-Type: application/json' "
        f"-H 'X-Service-Key: {demo['apiKey']}' -d '{event}'\n\n"
        f"API reference: {url}/api/docs\n"
        f"For the README's first calls: source {env_file}\n"
        f"Site id {demo['siteId']}; the login and keys are saved in {settings.demo_file}\n"
    )


# Command line -------------------------------------------------------------------------------


async def _with_real_store(settings: Settings, work: Callable[[Deps], Awaitable[None]]) -> None:
    if settings.embedded:
        raise SettingsError("MONGODB_URI: this command needs a real MongoDB; the embedded store "
                            "lives only inside a running server")
    deps = await build_deps(settings)
    try:
        await work(deps)
    finally:
        await deps.close()


async def _create_user(settings: Settings, args: argparse.Namespace) -> None:
    from documents import accounts

    password = os.environ.get("VISITOR_SERVICE_PASSWORD") or getpass.getpass("Password: ")

    async def work(deps: Deps) -> None:
        created = await accounts.create_account(
            deps.store, email=args.email, password_hash=await deps.auth.passwords.hash(password),
            display_name=args.name or args.email, account_name=args.account or args.email,
            organization_name=args.organization,
        )
        print(json.dumps(created))

    await _with_real_store(settings, work)


async def _create_site(settings: Settings, args: argparse.Namespace) -> None:
    from documents import accounts

    async def work(deps: Deps) -> None:
        user_doc = await accounts.find_user_by_email(deps.store, args.email)
        if user_doc is None:
            raise SystemExit(f"no user {args.email}")
        user = await accounts.load_authenticated_user(deps.store, user_doc["_id"], "")
        assert user is not None
        organization = args.organization or next(iter(user.roles))
        site, keys = await deps.keyring.create_site(user, organization, args.name,
                                                    args.origin or [], {})
        print(json.dumps({"id": site["_id"], "apiKey": keys.api_key,
                          "publicKey": keys.public_key}))

    await _with_real_store(settings, work)


async def _rotate_key(settings: Settings, args: argparse.Namespace) -> None:
    async def work(deps: Deps) -> None:
        site = await documents.sites.find_site(deps.store, args.site_id)
        if site is None:
            raise SystemExit(f"no site {args.site_id}")
        _, api_key = await deps.keyring.rotate_api_key(site, settings.key_rotation_grace_seconds)
        print(json.dumps({"id": args.site_id, "apiKey": api_key}))

    await _with_real_store(settings, work)


async def _reset_password(settings: Settings, args: argparse.Namespace) -> None:
    from errors import NotFound

    async def work(deps: Deps) -> None:
        try:
            issued = await deps.recovery.reset_by_operator(args.email)
        except NotFound as missing:
            raise SystemExit(missing.message) from None
        print(json.dumps({"email": args.email, "link": issued.link,
                          "expiresAt": issued.expires_at.isoformat()}))

    await _with_real_store(settings, work)


async def _replay_erasures(settings: Settings, args: argparse.Namespace) -> None:
    from privacy.replay import replay_erasures

    async def work(deps: Deps) -> None:
        report = await replay_erasures(deps.store, deps.subject_digester, args.since)
        print(json.dumps(report.as_dict()))

    await _with_real_store(settings, work)


async def _quarantine(settings: Settings, args: argparse.Namespace) -> None:
    async def work(deps: Deps) -> None:
        if args.requeue:
            requeued = await derivation.requeue_quarantined(deps.store, args.requeue)
            print(json.dumps({"site": args.requeue, "requeued": requeued}))
            return
        for fact in await derivation.quarantined_facts(deps.store, args.site_id):
            held = fact[derivation.QUARANTINED]
            print(json.dumps({"site": fact["siteId"], "kind": fact["kind"],
                              "recordedAt": fact["recordedAt"].isoformat(),
                              "reason": held["reason"], "since": held["at"].isoformat()}))

    await _with_real_store(settings, work)


async def _rebuild_figures(settings: Settings, args: argparse.Namespace) -> None:
    async def work(deps: Deps) -> None:
        await derivation.rebuild_site(deps.store, args.site_id)
        print(json.dumps({"site": args.site_id, "rebuilt": True}))

    await _with_real_store(settings, work)


def _since(text: str) -> datetime:
    """An ISO date or date-time for --since; a naive value is taken as UTC."""
    try:
        moment = datetime.fromisoformat(text)
        moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        # An offset that moves it out of the calendar (0001-01-01T00:00+05:00): no instant.
        return moment.astimezone(UTC)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO date or date-time: {text!r}") from None
    except OverflowError:
        raise argparse.ArgumentTypeError(f"outside the years 1 to 9999 in UTC: {text!r}"
                                         ) from None


OPERATOR_HELP = """\
Visitor Service collects what visitors do on a shop, keeps one profile per visitor, shows
new errors and leads live on a dashboard, and answers GDPR data-subject requests.

It is configured by environment variables (README.md and docs/operations.md). Without
MONGODB_URI, `serve` runs everything in one process on an in-memory store with demo data, to
try it out. In production set MONGODB_URI (a replica set), REDIS_URL, SECRET_KEY and
MASTER_KEY, serve TLS (TLS_CERT_FILE and TLS_KEY_FILE, or a proxy in front), and run
`worker` beside `serve`.
"""

OPERATOR_EXAMPLES = """\
examples:
  visitor-service serve
  MONGODB_URI=mongodb://db/?replicaSet=rs0 REDIS_URL=redis://cache visitor-service worker
  visitor-service create-user --email owner@shop.example --organization "My shop"
  visitor-service create-site --email owner@shop.example --name Shop \\
      --origin https://shop.example
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="visitor-service", description=OPERATOR_HELP, epilog=OPERATOR_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    sub.add_parser("serve", help="run the web server: ingest, browser SDK, dashboard, API and "
                   "live feed (SIGTERM stops it gracefully)")
    sub.add_parser("worker", help="process reported errors in the background: grouping and "
                   "notifications (needs MONGODB_URI and REDIS_URL)")
    user = sub.add_parser("create-user", help="create an account with its owner login; asks for "
                          "the password (or reads VISITOR_SERVICE_PASSWORD); needs MONGODB_URI")
    user.add_argument("--email", required=True, help="the owner's login")
    user.add_argument("--name", help="the owner's display name (default: the e-mail)")
    user.add_argument("--account", help="the account's name (default: the e-mail)")
    user.add_argument("--organization", default="My organization",
                      help="the first organization's name")
    site = sub.add_parser("create-site", help="add a shop site and print its API key and public "
                          "key, shown only here (needs MONGODB_URI)")
    site.add_argument("--email", required=True, help="an owner or admin of the organization")
    site.add_argument("--name", required=True, help="the site's name")
    site.add_argument("--organization", help="the organization's id (default: the user's first)")
    site.add_argument("--origin", action="append",
                      help="an origin the shop's pages are served from, e.g. "
                           "https://shop.example (repeatable)")
    rotate = sub.add_parser("rotate-key", help="replace a site's API key; the old key stops "
                            "working at once (needs MONGODB_URI)")
    rotate.add_argument("--site-id", required=True)
    reset = sub.add_parser("reset-password", help="print a single-use link, valid 30 minutes, "
                           "that sets a new password for a user (an owner locked out without "
                           "a mail server); needs MONGODB_URI")
    reset.add_argument("--email", required=True, help="the user's login")
    replay = sub.add_parser("replay-erasures", help="after restoring a backup, erase again every "
                            "visitor erased since the backup was taken (needs MONGODB_URI)")
    replay.add_argument("--since", required=True, type=_since,
                        help="ISO date or date-time (UTC if no offset): when the backup was taken")
    quarantine = sub.add_parser(
        "quarantine", help="list the facts the figures could not take, with why (no visitor "
        "data), or put a site's back in line once the cause is fixed (needs MONGODB_URI)")
    quarantine.add_argument("--site-id", help="only this site's")
    quarantine.add_argument("--requeue", metavar="SITE_ID",
                            help="put this site's facts back in line to be folded")
    rebuild = sub.add_parser(
        "rebuild-figures", help="recompute a site's daily figures from what is stored plus what "
        "the retention purge kept, under the site's fold lease (needs MONGODB_URI)")
    rebuild.add_argument("--site-id", required=True)
    return parser


def cli(argv: list[str] | None = None) -> int:
    """The `visitor-service` console script."""
    args = _parser().parse_args(argv)
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    commands: dict[str, Callable[[], Awaitable[None]]] = {
        "serve": lambda: serve(settings),
        "worker": lambda: _run_worker(settings),
        "create-user": lambda: _create_user(settings, args),
        "create-site": lambda: _create_site(settings, args),
        "rotate-key": lambda: _rotate_key(settings, args),
        "reset-password": lambda: _reset_password(settings, args),
        "replay-erasures": lambda: _replay_erasures(settings, args),
        "quarantine": lambda: _quarantine(settings, args),
        "rebuild-figures": lambda: _rebuild_figures(settings, args),
    }
    try:
        asyncio.run(commands[args.command]())
    except SettingsError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    return 0


async def _run_worker(settings: Settings) -> None:
    # Celery's worker blocks and needs the main thread for its signal handlers, so it runs
    # here directly; its tasks run coroutines on a loop thread of their own (tasks/worker.py).
    run_worker(settings)


def main() -> None:
    """Entry point for `python server.py`."""
    raise SystemExit(cli(sys.argv[1:] or ["serve"]))


if __name__ == "__main__":
    main()
