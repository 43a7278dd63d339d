"""One typed settings object, read from the environment and validated at start.

Every field names its environment variable and says what it is for; the README's
configuration table is generated from the same declarations (``python -m config``), so the two
cannot drift apart. A malformed value stops the start with one line naming the variable.
"""

from __future__ import annotations

import base64
import dataclasses
import ipaddress
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

_IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class SettingsError(ValueError):
    """A configuration value is missing or malformed; the message names the variable."""


def _setting(env: str, default: Any, description: str, parse: Callable[[str], Any]) -> Any:
    return field(
        default=default,
        metadata={"env": env, "description": description, "parse": parse},
    )


def _parse_port(raw: str) -> int:
    port = int(raw)
    if not 0 <= port <= 65535:
        raise ValueError("must be between 0 and 65535")
    return port


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise ValueError("must be a positive whole number")
    return value


def _non_negative_int(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError("must be 0 or a positive whole number")
    return value


def _positive_float(raw: str) -> float:
    value = float(raw)
    if value <= 0:
        raise ValueError("must be a positive number")
    return value


def _secret_bytes(raw: str) -> bytes:
    """Secrets are given as URL-safe base64 (or hex) and must carry at least 32 bytes."""
    raw = raw.strip()
    try:
        value = bytes.fromhex(raw) if len(raw) == 64 and all(
            c in "0123456789abcdefABCDEF" for c in raw
        ) else base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
    except ValueError as exc:
        raise ValueError("must be base64 or hex") from exc
    if len(value) < 32:
        raise ValueError("must decode to at least 32 bytes")
    return value


def _master_key(raw: str) -> bytes:
    value = _secret_bytes(raw)
    if len(value) != 32:
        raise ValueError("must decode to exactly 32 bytes (AES-256)")
    return value


def _networks(raw: str) -> tuple[_IpNetwork, ...]:
    return tuple(
        ipaddress.ip_network(part.strip(), strict=False) for part in raw.split(",") if part.strip()
    )


def _url(raw: str) -> str:
    raw = raw.strip().rstrip("/")
    if not raw.startswith(("http://", "https://")):
        raise ValueError("must start with http:// or https://")
    return raw


def _mongodb_uri(raw: str) -> str:
    raw = raw.strip()
    if raw and not raw.startswith(("mongodb://", "mongodb+srv://")):
        raise ValueError("must start with mongodb:// or mongodb+srv://")
    return raw


def _redis_url(raw: str) -> str:
    raw = raw.strip()
    if raw and not raw.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError("must start with redis://, rediss:// or unix://")
    return raw


def _smtp_url(raw: str) -> str:
    raw = raw.strip()
    parts = urlsplit(raw)
    # The value may carry a password: the message never repeats it.
    if parts.scheme not in ("smtp", "smtps", "smtp+plain") or not parts.hostname:
        raise ValueError("must be smtp://, smtps:// or smtp+plain:// followed by a host, e.g. "
                         "smtps://user:password@mail.example:465?from=service@shop.example")
    return raw


def _log_level(raw: str) -> str:
    level = raw.strip().upper()
    if level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
        raise ValueError("must be DEBUG, INFO, WARNING or ERROR")
    return level


#: The lowest bcrypt cost a deployment may set. bcrypt itself goes down to 4, but each step down
#: halves what a guess against a stolen hash costs: at 9 one core here tries forty a second.
MIN_BCRYPT_ROUNDS = 10


def _bcrypt_rounds(raw: str) -> int:
    rounds = int(raw)
    if not MIN_BCRYPT_ROUNDS <= rounds <= 31:
        raise ValueError(f"must be between {MIN_BCRYPT_ROUNDS} and 31: a lower cost makes a "
                         "stolen password hash cheap to guess, and 31 is bcrypt's highest")
    return rounds


def _text(raw: str) -> str:
    return raw.strip()


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError("must be true or false")


@dataclass(frozen=True)
class Settings:
    """Everything the service can be configured with. Build it with `load_settings`."""

    host: str = _setting("HOST", "127.0.0.1", "Address the HTTP server binds to.", _text)
    port: int = _setting("PORT", 8888, "Port the HTTP server listens on.", _parse_port)
    public_url: str = _setting(
        "PUBLIC_URL",
        "",
        "External base URL of the service; the dashboard origin, the JWT issuer. "
        "Default: http://HOST:PORT.",
        _url,
    )
    mongodb_uri: str = _setting(
        "MONGODB_URI",
        "",
        "MongoDB replica set URI. Empty: the embedded in-memory store (mongomock-motor).",
        _mongodb_uri,
    )
    mongodb_database: str = _setting(
        "MONGODB_DATABASE", "visitor_service", "Database name inside MongoDB.", _text
    )
    redis_url: str = _setting(
        "REDIS_URL",
        "",
        "Redis URL: Celery broker for errors-ingest and pub/sub for live events. "
        "Empty: in-process queue and event bus.",
        _redis_url,
    )
    secret_key: bytes = _setting(
        "SECRET_KEY",
        b"",
        "Signs access and refresh tokens and peppers API-key hashes. Base64 or hex, >= 32 bytes. "
        "Required with MONGODB_URI; generated for the embedded store.",
        _secret_bytes,
    )
    master_key: bytes = _setting(
        "MASTER_KEY",
        b"",
        "AES-256-GCM key sealing recoverable secrets at rest. Base64 or hex, exactly 32 bytes. "
        "Required with MONGODB_URI; generated for the embedded store.",
        _master_key,
    )
    tls_cert_file: str = _setting(
        "TLS_CERT_FILE", "", "PEM certificate; with TLS_KEY_FILE turns on TLS 1.2+.", _text
    )
    tls_key_file: str = _setting("TLS_KEY_FILE", "", "PEM private key for TLS_CERT_FILE.", _text)
    trusted_proxies: tuple[_IpNetwork, ...] = _setting(
        "TRUSTED_PROXIES",
        (),
        "Comma-separated CIDRs whose X-Forwarded-For is believed. Empty: never believed.",
        _networks,
    )
    geoip_database: str = _setting(
        "GEOIP_DATABASE",
        "",
        "Path to a country .mmdb. Empty: the database packaged with the service, if installed.",
        _text,
    )
    max_event_body_bytes: int = _setting(
        "MAX_EVENT_BODY_BYTES", 256 * 1024, "Largest accepted event body in bytes.", _positive_int
    )
    max_segment_bytes: int = _setting(
        "MAX_SEGMENT_BYTES",
        5 * 1024 * 1024,
        "Largest accepted compressed recording segment in bytes.",
        _positive_int,
    )
    site_rate_per_second: float = _setting(
        "SITE_RATE_PER_SECOND",
        200.0,
        "Sustained requests per second accepted per site key (token bucket).",
        _positive_float,
    )
    site_rate_burst: int = _setting(
        "SITE_RATE_BURST", 400, "Burst size of the per-site token bucket.", _positive_int
    )
    refresh_token_days: int = _setting(
        "REFRESH_TOKEN_DAYS", 30, "Lifetime of a refresh-token family in days.", _positive_int
    )
    refresh_grace_seconds: int = _setting(
        "REFRESH_GRACE_SECONDS",
        10,
        "How long a just-rotated refresh token may still be presented (parallel tabs).",
        _positive_int,
    )
    bcrypt_rounds: int = _setting(
        "BCRYPT_ROUNDS",
        12,
        "bcrypt cost of new password hashes and of the unknown-user check, 10 to 31: each step "
        "doubles the time of a login and of a guess against a stolen hash.",
        _bcrypt_rounds,
    )
    login_failures_per_pair: int = _setting(
        "LOGIN_FAILURES_PER_PAIR",
        5,
        "Failed logins per (account, IP) in 15 minutes before that pair is throttled.",
        _positive_int,
    )
    login_failures_per_ip: int = _setting(
        "LOGIN_FAILURES_PER_IP",
        50,
        "Failed logins per IP in 15 minutes before that IP is throttled.",
        _positive_int,
    )
    login_failures_per_account: int = _setting(
        "LOGIN_FAILURES_PER_ACCOUNT",
        20,
        "Failed logins per account in 15 minutes before unknown IPs are throttled for it.",
        _positive_int,
    )
    recording_inactivity_seconds: int = _setting(
        "RECORDING_INACTIVITY_SECONDS",
        30 * 60,
        "Inactivity after which a recording ends and the next activity starts a new one.",
        _positive_int,
    )
    recording_cap_seconds: int = _setting(
        "RECORDING_CAP_SECONDS",
        25 * 60,
        "Continuous activity after which a recording rotates into a new one.",
        _positive_int,
    )
    segment_max_inflated_bytes: int = _setting(
        "SEGMENT_MAX_INFLATED_BYTES",
        50 * 1024 * 1024,
        "Largest decompressed recording segment the sweeper accepts; larger ones are rejected.",
        _positive_int,
    )
    segment_sweep_interval_seconds: float = _setting(
        "SEGMENT_SWEEP_INTERVAL_SECONDS",
        2.0,
        "Pause between passes of the sweeper that strips console events from new segments "
        "and ends recordings idle past RECORDING_INACTIVITY_SECONDS.",
        _positive_float,
    )
    derivation_interval_seconds: float = _setting(
        "DERIVATION_INTERVAL_SECONDS",
        1.0,
        "Pause between passes of the derivation that folds new data into the dashboard's "
        "figures (in the server on the embedded default, in the worker when REDIS_URL is set).",
        _positive_float,
    )
    retention_purge_interval_seconds: float = _setting(
        "RETENTION_PURGE_INTERVAL_SECONDS",
        3600.0,
        "Pause between passes of the retention purge, which removes what is past each site's "
        "retention (in the server on the embedded default, in the worker when REDIS_URL is set).",
        _positive_float,
    )
    alert_evaluation_interval_seconds: float = _setting(
        "ALERT_EVALUATION_INTERVAL_SECONDS",
        60.0,
        "Pause between passes of the alert rules' evaluation (in the server on the embedded "
        "default, in the worker when REDIS_URL is set).",
        _positive_float,
    )
    retention_purge_batch: int = _setting(
        "RETENTION_PURGE_BATCH",
        200,
        "Items the retention purge removes per transaction: small enough that a batch never "
        "holds ingest up.",
        _positive_int,
    )
    error_retry_base_seconds: float = _setting(
        "ERROR_RETRY_BASE_SECONDS",
        0.5,
        "First retry delay of an error job after a temporary database failure; doubles per "
        "retry (3 retries), with jitter.",
        _positive_float,
    )
    error_queue_capacity: int = _setting(
        "ERROR_QUEUE_CAPACITY",
        10_000,
        "Embedded default only: errors waiting in the in-process queue before ingest answers 503.",
        _positive_int,
    )
    outbox_relay_after_seconds: float = _setting(
        "OUTBOX_RELAY_AFTER_SECONDS",
        30.0,
        "REDIS_URL only: an accepted error job not finished this long after it was kept is sent "
        "to Celery again from the MongoDB outbox; the wait doubles per relay, up to an hour.",
        _positive_float,
    )
    outbox_scan_seconds: float = _setting(
        "OUTBOX_SCAN_SECONDS",
        5.0,
        "REDIS_URL only: pause between passes of the relay that re-sends overdue error jobs.",
        _positive_float,
    )
    statement_max_age_seconds: int = _setting(
        "STATEMENT_MAX_AGE_SECONDS",
        600,
        "Oldest product statement accepted for pageview attribution.",
        _positive_int,
    )
    key_rotation_grace_seconds: int = _setting(
        "KEY_ROTATION_GRACE_SECONDS",
        600,
        "How long product statements signed under a rotated-away API key still verify.",
        _positive_int,
    )
    site_cache_size: int = _setting(
        "SITE_CACHE_SIZE",
        4096,
        "Sites each server process keeps for key lookups, one entry per key (a site found by "
        "its API key and its public key takes two), least recently used dropped first; used "
        "only while every change to a site reaches the process (the embedded store; with "
        "REDIS_URL, while its subscription is up). On MongoDB without REDIS_URL, or 0: every "
        "lookup reads the store.",
        _non_negative_int,
    )
    site_cache_max_age_seconds: float = _setting(
        "SITE_CACHE_MAX_AGE_SECONDS",
        30.0,
        "Longest a kept site is used before it is read again: the bound on a change whose "
        "announcement to the other processes was lost (a writer stopped between the write and "
        "the announcement, a change made outside the service).",
        _positive_float,
    )
    metrics_token: str = _setting(
        "METRICS_TOKEN",
        "",
        "Bearer token for /metrics. Empty: /metrics answers only direct loopback callers "
        "(never a request that came through a proxy).",
        _text,
    )
    live_queue_limit: int = _setting(
        "LIVE_QUEUE_LIMIT",
        256,
        "Outgoing live events queued per dashboard socket before it is closed as too slow.",
        _positive_int,
    )
    live_auth_timeout_seconds: float = _setting(
        "LIVE_AUTH_TIMEOUT_SECONDS",
        5.0,
        "Seconds a new live socket has to send its access token before it is closed.",
        _positive_float,
    )
    live_session_check_seconds: float = _setting(
        "LIVE_SESSION_CHECK_SECONDS",
        30.0,
        "How often live sockets are checked for sessions ended by logout.",
        _positive_float,
    )
    notify_max_attempts: int = _setting(
        "NOTIFY_MAX_ATTEMPTS",
        5,
        "Attempts per notification delivery (e-mail or webhook) before it is recorded failed.",
        _positive_int,
    )
    notify_retry_seconds: float = _setting(
        "NOTIFY_RETRY_SECONDS",
        2.0,
        "First retry delay of a failed notification; doubles per attempt, with jitter.",
        _positive_float,
    )
    smtp_url: str = _setting(
        "SMTP_URL",
        "",
        "The operator's mail server for account mail (invitations, password resets): "
        "smtp:// (STARTTLS), smtps:// (TLS) or smtp+plain:// (a relay on the same host), with "
        "user:password@ if it needs a login and ?from= for the sender (default "
        "visitor-service@ the PUBLIC_URL's host). Empty: no account mail; an invitation's "
        "link is shown once to the inviter and owners reset passwords themselves.",
        _smtp_url,
    )
    webhook_allow_private_addresses: bool = _setting(
        "WEBHOOK_ALLOW_PRIVATE_ADDRESSES",
        False,
        "Allow webhook URLs on private, loopback, link-local or metadata addresses (tests, "
        "on-premises receivers); off, such URLs are refused when saved and when delivering.",
        _bool,
    )
    heatmap_allow_private_addresses: bool = _setting(
        "HEATMAP_ALLOW_PRIVATE_ADDRESSES",
        False,
        "Let the heatmap renderer fetch a page's resources from an allowed origin on a private, "
        "loopback or link-local address (tests, a shop on the operator's own network); off, "
        "the renderer fetches only from public addresses.",
        _bool,
    )
    csv_row_cap: int = _setting(
        "CSV_ROW_CAP",
        100_000,
        "Most rows one CSV export writes; a longer export ends with a truncation marker row.",
        _positive_int,
    )
    report_threads: int = _setting(
        "REPORT_THREADS",
        2,
        "Threads that work out dashboard reports (funnels) off the event loop; as many more "
        "reports may wait for one, and a report beyond that gets 503 with Retry-After.",
        _positive_int,
    )
    report_time_limit_seconds: float = _setting(
        "REPORT_TIME_LIMIT_SECONDS",
        3.0,
        "Longest a dashboard report (funnels) may take from its start; past it the request "
        "gets 503 with Retry-After and the report's thread stops.",
        _positive_float,
    )
    log_level: str = _setting("LOG_LEVEL", "INFO", "DEBUG, INFO, WARNING or ERROR.", _log_level)
    demo_email: str = _setting(
        "DEMO_EMAIL", "", "Embedded store only: e-mail of the demo owner (else generated).", _text
    )
    demo_password: str = _setting(
        "DEMO_PASSWORD", "", "Embedded store only: password of the demo owner (else generated).",
        _text,
    )
    demo_file: str = _setting(
        "DEMO_FILE",
        ".visitor-service/demo.json",
        "Embedded store only: where the demo credentials are written.",
        _text,
    )
    generated_secrets: tuple[str, ...] = ()

    @property
    def embedded(self) -> bool:
        """True when running on the in-memory store with no external services."""
        return not self.mongodb_uri

    @property
    def tls_enabled(self) -> bool:
        """True when both a certificate and a key are configured."""
        return bool(self.tls_cert_file and self.tls_key_file)


def setting_fields() -> list[dataclasses.Field[Any]]:
    """The declared settings, in declaration order (internal fields left out)."""
    return [f for f in dataclasses.fields(Settings) if "env" in f.metadata]


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read, parse and validate every setting; raise SettingsError naming the first bad one."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for f in setting_fields():
        raw = environ.get(f.metadata["env"])
        if raw is None or raw.strip() == "":
            continue
        try:
            values[f.name] = f.metadata["parse"](raw)
        except ValueError as exc:
            raise SettingsError(f"{f.metadata['env']}: {exc}") from None
    settings = Settings(**values)
    return _complete(settings)


def _complete(settings: Settings) -> Settings:
    """Fill derived defaults and enforce the rules that span several variables."""
    changes: dict[str, Any] = {}
    if not settings.public_url:
        scheme = "https" if settings.tls_enabled else "http"
        changes["public_url"] = f"{scheme}://{settings.host}:{settings.port}"
    if bool(settings.tls_cert_file) != bool(settings.tls_key_file):
        raise SettingsError("TLS_CERT_FILE: TLS_CERT_FILE and TLS_KEY_FILE must be set together")
    generated: list[str] = []
    for name, env in (("secret_key", "SECRET_KEY"), ("master_key", "MASTER_KEY")):
        if getattr(settings, name):
            continue
        if not settings.embedded:
            raise SettingsError(f"{env}: required when MONGODB_URI is set")
        changes[name] = secrets.token_bytes(32)
        generated.append(env)
    if generated:
        changes["generated_secrets"] = tuple(generated)
    return dataclasses.replace(settings, **changes) if changes else settings


def configuration_table() -> str:
    """The Markdown table of every setting, as the README shows it."""
    rows = ["| Variable | Default | Description |", "| --- | --- | --- |"]
    for f in setting_fields():
        default = f.default
        if isinstance(default, bytes | tuple):
            shown = "" if not default else repr(default)
        else:
            shown = str(default)
        rows.append(f"| `{f.metadata['env']}` | {f'`{shown}`' if shown else '—'} | "
                    f"{f.metadata['description']} |")
    return "\n".join(rows)
