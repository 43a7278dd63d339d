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
    return re.sub(r"\([^)]*\)", site_id, pattern)


def _methods(handler: type[BaseHandler]) -> list[str]:
    return [m for m in METHODS if getattr(handler, m) is not getattr(BaseHandler, m)]


async def test_only_the_listed_routes_opt_out_of_authentication(settings, deps):
    opted_out = {
        _concrete(pattern, "x") for pattern, handler in _routes(settings, deps)
        if handler.authentication != "user"
    }
    assert opted_out == set(PUBLIC_ROUTES)


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
