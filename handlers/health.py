"""Liveness, readiness and metrics."""

from __future__ import annotations

import hmac
import ipaddress

from errors import NotFound, Unavailable
from handlers.base import BaseHandler


class LivenessHandler(BaseHandler):
    """GET /healthz: the process answers."""

    authentication = "none"

    def get(self) -> None:
        self.write_json({"status": "ok"})


class ReadinessHandler(BaseHandler):
    """GET /readyz: MongoDB answers, and Redis when configured."""

    authentication = "none"

    async def get(self) -> None:
        checks = await self.deps.readiness()
        if not all(checks.values()):
            raise Unavailable("not ready: " + ", ".join(k for k, ok in checks.items() if not ok),
                              retry_after=5)
        self.write_json({"status": "ready", "checks": checks})


#: Headers a reverse proxy adds; a request carrying one came through a proxy.
PROXY_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
                 "X-Real-IP", "Via")


class MetricsHandler(BaseHandler):
    """GET /metrics: Prometheus text; needs METRICS_TOKEN, or a direct loopback caller when unset.

    Behind a reverse proxy on the same host every outside caller arrives from loopback, so a
    request that came through a proxy never counts as a loopback caller.
    """

    authentication = "none"

    def get(self) -> None:
        token = self.deps.settings.metrics_token
        presented = self.request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if token:
            allowed = hmac.compare_digest(presented.encode(), token.encode())
        elif any(name in self.request.headers for name in PROXY_HEADERS):
            allowed = False
        else:
            try:
                allowed = ipaddress.ip_address(self.request.remote_ip or "").is_loopback
            except ValueError:
                allowed = False
        if not allowed:
            # Hidden rather than forbidden: the endpoint's existence is nobody else's business.
            raise NotFound("no such endpoint")
        self.set_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.finish(self.deps.metrics.render())


default_handlers = [
    (r"/healthz", LivenessHandler),
    (r"/readyz", ReadinessHandler),
    (r"/metrics", MetricsHandler),
]
