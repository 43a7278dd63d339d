"""The benchmark's server process: embedded store, RedisBus, one seeded site; prints its keys."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import secrets
import sys

import tornado.netutil

import server
from config import load_settings
from documents import accounts
from realtime.bus import RedisBus
from realtime.hub import LiveHub

PUBLIC_URL = "http://127.0.0.1:8888"


async def run(redis_url: str) -> None:
    """Serve until stdin closes."""
    settings = load_settings({
        "SECRET_KEY": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "MASTER_KEY": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "PUBLIC_URL": PUBLIC_URL, "LOG_LEVEL": "WARNING",
    })
    base = await server.build_deps(settings)
    bus = RedisBus(redis_url)
    deps = dataclasses.replace(base, bus=bus, hub=LiveHub(settings.live_queue_limit))
    bus.listen(deps.hub.dispatch)
    await server.start_live(deps)
    await asyncio.wait_for(bus.subscribed.wait(), 10)
    password = secrets.token_urlsafe(16)
    created = await accounts.create_account(
        deps.store, email="bench@example.com",
        password_hash=await deps.auth.passwords.hash(password),
        display_name="bench", account_name="bench", organization_name="bench org")
    user = await accounts.load_authenticated_user(deps.store, created["userId"], "")
    assert user is not None
    site, _ = await deps.keyring.create_site(user, created["organizationId"], "bench", [], {})
    tokens = await deps.auth.login("bench@example.com", password, "127.0.0.1")
    http_server = server.make_http_server(settings, server.make_app(settings, deps))
    sockets = tornado.netutil.bind_sockets(0, "127.0.0.1", backlog=2048)
    http_server.add_sockets(sockets)
    print(json.dumps({"port": sockets[0].getsockname()[1], "siteId": site["_id"],
                      "token": tokens.access_token, "origin": PUBLIC_URL}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    http_server.stop()
    await deps.hub.close()
    await bus.close()


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1]))
