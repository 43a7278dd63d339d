"""Every route refuses callers without valid credentials, and other organizations' users.

New routes are covered automatically: the sweep walks the application's routing table. A route
that opts out of authentication must be listed in PUBLIC_ROUTES, with its reason.
"""

from __future__ import annotations

import re
import time
import uuid

import jwt
import pytest

import server
from auth.tokens import AUDIENCE, TokenIssuer
from handlers.base import BaseHandler
from tests.support.app import Fetch, Tenant

#: Routes reachable without a dashboard token, and why.
PUBLIC_ROUTES = {
    "/healthz": "liveness probes carry no credentials",
    "/readyz": "readiness probes carry no credentials",
    "/metrics": "own token (METRICS_TOKEN) or loopback only",
    "/auth/login": "this is where credentials are exchanged",
    "/auth/refresh": "authenticated by the refresh token itself",
    "/auth/logout": "authenticated by the refresh token itself",
    "/auth/login/two-factor": "authenticated by the password's second-step token",
    "/auth/login/two-factor/setup": "authenticated by the password's second-step token",
    "/auth/login/two-factor/confirm": "authenticated by the password's second-step token",
    "/auth/invitations/details": "authenticated by the invitation's single-use token",
    "/auth/invitations/accept": "authenticated by the invitation's single-use token",
    "/auth/password-reset/request": "for someone who cannot sign in; the same answer for every "
                                    "address, limited per address and per client",
    "/auth/password-reset/confirm": "authenticated by the reset link's single-use token",
    "/dashboard/live": "WebSocket: the access token is its first message (never in the URL)",
    "/sdk/v1/loader.js": "a script tag sends no Origin; the file carries only public settings",
    "/sdk/v1/recorder.js": "the same static script for every site",
    "/sdk/v1/survey.js": "the survey widget, the same static script for every site",
    "/": "the dashboard's HTML shell: no data, which comes from the API with a token",
    "/app/x": "the same shell for the dashboard's pages (the page routes by path)",
    "/static/x": "the dashboard's built scripts and styles, the same for everyone",
    "/api/openapi.yaml": "the API's published contract, the same for everyone",
    "/api/docs": "the API reference page made from that contract",
    "/favicon.ico": "the browser's tab icon, the same for everyone",
    "/downloads/visitor-service.zip": "the WordPress plugin: public code, no secret in it",
}

METHODS = ("get", "post", "put", "patch", "delete")


def _routes(settings, deps) -> list[tuple[str, type[BaseHandler]]]:
    app = server.make_app(settings, deps)
    found = []
    for rule in app.wildcard_router.rules:
        pattern = rule.matcher.regex.pattern.rstrip("$")
        found.append((pattern, rule.target))
    return found


def _concrete(pattern: str, site_id: str) -> str:
    """A path the pattern matches: ids for id groups, the first word of word alternations."""

    def fill(group: re.Match[str]) -> str:
        inner = group.group(1)
        if "|" in inner and re.fullmatch(r"[a-z|]+", inner):
            return inner.split("|")[0]
        return site_id

    return re.sub(r"\(([^)]*)\)", fill, pattern).replace("\\.", ".")


def _methods(handler: type[BaseHandler]) -> list[str]:
    return [m for m in METHODS if getattr(handler, m) is not getattr(BaseHandler, m)]


#: How each kind of route authenticates; a new kind must be added here and swept below.
AUTHENTICATION_KINDS = {"user", "none", "service_key", "in-band", "public_key"}
#: Kinds that take no credentials at the HTTP layer (in-band: the WebSocket's first message).
UNGUARDED_KINDS = {"none", "in-band"}


async def test_only_the_listed_routes_opt_out_of_authentication(settings, deps):
    routes = _routes(settings, deps)
    assert {handler.authentication for _, handler in routes} <= AUTHENTICATION_KINDS
    opted_out = {
        _concrete(pattern, "x") for pattern, handler in routes
        if handler.authentication in UNGUARDED_KINDS
    }
    assert opted_out == set(PUBLIC_ROUTES)


async def test_every_ingest_route_refuses_a_missing_or_wrong_service_key(
        settings, deps, fetch: Fetch, tenant: Tenant):
    rotated = await fetch(f"/api/v1/sites/{tenant.site_id}/api-key/rotate", "POST",
                          token=tenant.token)
    assert rotated.code == 200
    bad_keys = {
        "no key": None,
        "empty key": "",
        "unknown key": "sk_" + "x" * 40,
        "the public key": tenant.public_key,
        "a dashboard token": tenant.token,
        "the key before rotation": tenant.api_key,
    }
    checked = 0
    for pattern, handler in _routes(settings, deps):
        if handler.authentication != "service_key":
            continue
        for method in _methods(handler):
            for label, key in bad_keys.items():
                headers = {} if key is None else {"X-Service-Key": key}
                answer = await fetch(_concrete(pattern, tenant.site_id), method.upper(),
                                     json_body={}, headers=headers)
                assert answer.code == 401, f"{method.upper()} {pattern} with {label}: {answer}"
                assert answer.headers["WWW-Authenticate"].startswith('Bearer realm=')
                checked += 1
    assert checked > 0


async def test_every_public_key_route_refuses_an_unknown_key_and_a_foreign_origin(
        settings, deps, fetch: Fetch, tenant: Tenant):
    allowed = "https://shop.example"
    attempts = {
        "an unknown key": ("pk_" + "x" * 24, allowed, 401),
        "the API key": (tenant.api_key, allowed, 401),
        "a foreign origin": (tenant.public_key, "https://evil.example", 403),
        "no origin": (tenant.public_key, None, 403),
        "a look-alike origin": (tenant.public_key, "https://shop.example.evil.example", 403),
    }
    checked = 0
    for pattern, handler in _routes(settings, deps):
        if handler.authentication != "public_key":
            continue
        for method in [*_methods(handler), "options"]:
            for label, (key, origin, status) in attempts.items():
                headers = {"Content-Type": "text/plain"}
                if origin is not None:
                    headers["Origin"] = origin
                answer = await fetch(_concrete(pattern, key), method.upper(), headers=headers,
                                     body=b'{"visitorId": "v-1", "url": "https://shop.example/"}'
                                     if method == "post" else None)
                assert answer.code == status, f"{method.upper()} {pattern} with {label}: {answer}"
                assert "Access-Control-Allow-Origin" not in answer.headers
                checked += 1
    assert checked > 0
    for name in await deps.store.collection_names():
        # The set-up's own writes, and the record of start-up's migrations.
        if name not in ("sites", "users", "accounts", "organizations", "memberships",
                        "refresh_tokens", "audit_log", "migrations", "ingest_drops"):
            assert await deps.store.collection(name).count_documents({}) == 0, name
    # A foreign origin is counted for the site's first-run checklist, and nothing else is kept.
    drops = await deps.store.collection("ingest_drops").find({}).to_list(None)
    assert {(drop["siteId"], drop["reason"]) for drop in drops} <= {
        (tenant.site_id, "origin_not_allowed")}


def _bad_tokens(settings, tenant: Tenant) -> dict[str, str]:
    key_holder = TokenIssuer(settings.secret_key, settings.public_url)
    now = int(time.time())
    expired_issuer = TokenIssuer(settings.secret_key, settings.public_url,
                                 clock=lambda: now - 3600)
    expired, _ = expired_issuer.issue_access(tenant.user_id, str(uuid.uuid4()))
    claims = {"iss": settings.public_url, "aud": AUDIENCE, "sub": tenant.user_id, "iat": now,
              "exp": now + 600, "typ": "access", "jti": "x", "fam": "y"}
    alg_none = jwt.encode(claims, key=None, algorithm="none")
    wrong_key = jwt.encode(claims, "not-the-key-" * 4, algorithm="HS256",
                           headers={"kid": "../../../dev/null"})
    other_issuer = TokenIssuer(settings.secret_key, "https://elsewhere.example")
    foreign, _ = other_issuer.issue_access(tenant.user_id, str(uuid.uuid4()))
    assert key_holder.verify_refresh(tenant.refresh_token)
    return {
        "no token": "",
        "malformed token": "not-a-jwt",
        "expired token": expired,
        "alg none": alg_none,
        "wrong key with a kid": wrong_key,
        "another issuer": foreign,
        "refresh token as access token": tenant.refresh_token,
    }


async def test_every_route_refuses_missing_and_invalid_tokens(
        settings, deps, fetch: Fetch, tenant: Tenant):
    bad_tokens = _bad_tokens(settings, tenant)
    checked = 0
    for pattern, handler in _routes(settings, deps):
        if handler.authentication != "user":
            continue
        path = _concrete(pattern, tenant.site_id)
        for method in _methods(handler):
            for label, token in bad_tokens.items():
                answer = await fetch(path, method.upper(), token=token or None,
                                     json_body={} if method in ("post", "put", "patch") else None)
                assert answer.code == 401, f"{method.upper()} {path} with {label}: {answer}"
                assert answer.json()["error"]["code"]
                # RFC 6750: a challenge on every 401, naming the fault when a token was sent.
                challenge = answer.headers["WWW-Authenticate"]
                assert challenge.startswith('Bearer realm="visitor-service"')
                assert ('error="invalid_token"' in challenge) == bool(token), challenge
                checked += 1
    assert checked > 0


async def test_every_route_hides_another_organizations_resources(
        settings, deps, fetch: Fetch, make_tenant):
    victim = await make_tenant("victim")
    intruder = await make_tenant("intruder")
    checked = 0
    for pattern, handler in _routes(settings, deps):
        if handler.authentication != "user" or "(" not in pattern:
            continue
        path = _concrete(pattern, victim.site_id)
        for method in _methods(handler):
            answer = await fetch(path, method.upper(), token=intruder.token,
                                 json_body={"name": "mine now"}
                                 if method in ("post", "put", "patch") else None)
            assert answer.code == 404, f"{method.upper()} {path}: {answer}"
            checked += 1
    assert checked > 0
    site = await fetch(f"/api/v1/sites/{victim.site_id}", token=victim.token)
    assert site.json()["name"] == "victim site"


@pytest.mark.parametrize("header", ["Bearer", "Basic abc", "bearer  ", "Token x"])
async def test_odd_authorization_headers_are_refused(fetch: Fetch, header: str):
    answer = await fetch("/auth/me", headers={"Authorization": header})
    assert answer.code == 401
