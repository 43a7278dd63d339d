"""The embedded demo as a newcomer meets it (issue 43 point 5): `serve` writes
`.visitor-service/demo.env` for `source`, readable by its owner only, and a second start on
another port keeps the site, keys and login, so a pasted snippet and the README's first calls go
on working; only BASE_URL follows the port."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from demo import saved_login
from tests.support.processes import free_port

ROOT = Path(__file__).resolve().parents[1]
KEYS = {"BASE_URL", "API_KEY", "PUBLIC_KEY", "SITE_ID", "EMAIL", "PASSWORD"}


def _start(demo_file: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("MONGODB_URI", "REDIS_URL", "DEMO_EMAIL", "DEMO_PASSWORD")}
    env.update({"PORT": str(port), "DEMO_FILE": str(demo_file)})
    process = subprocess.Popen([sys.executable, str(ROOT / "server.py"), "serve"], cwd=ROOT,
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return process, port


async def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            await AsyncHTTPClient().fetch(f"http://127.0.0.1:{port}/healthz")
            return
        except (ConnectionError, OSError):
            await asyncio.sleep(0.1)
    raise AssertionError("server did not start")


def _sourced(path: Path) -> dict[str, str]:
    """The variables `source path` sets, as bash reads them."""
    shown = subprocess.run(
        ["bash", "-c", f"set -a; source {shlex.quote(str(path))}; env -0"],
        capture_output=True, check=True, env={}).stdout.decode()
    values = dict(line.split("=", 1) for line in shown.split("\0") if "=" in line)
    return {name: values[name] for name in KEYS}


async def _stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    await asyncio.to_thread(process.wait, 30)


async def _works(env: dict[str, str]) -> None:
    """The README's calls with these values: the API key ingests, the login reads the site."""
    client = AsyncHTTPClient()
    sent = await client.fetch(HTTPRequest(
        f"{env['BASE_URL']}/ingest/pageviews", "POST",
        headers={"X-Service-Key": env["API_KEY"], "Content-Type": "application/json"},
        body=json.dumps({"visitorId": "readme-visitor", "url": "https://shop.example/"})))
    assert json.loads(sent.body)["ok"] is True
    login = await client.fetch(HTTPRequest(
        f"{env['BASE_URL']}/auth/login", "POST", headers={"Content-Type": "application/json"},
        body=json.dumps({"email": env["EMAIL"], "password": env["PASSWORD"]})))
    token = json.loads(login.body)["accessToken"]
    site = await client.fetch(f"{env['BASE_URL']}/api/v1/sites/{env['SITE_ID']}",
                              headers={"Authorization": f"Bearer {token}"})
    assert json.loads(site.body)["publicKey"] == env["PUBLIC_KEY"]
    loader = await client.fetch(f"{env['BASE_URL']}/sdk/v1/loader.js?key={env['PUBLIC_KEY']}")
    assert loader.code == 200
    # The demo's paid order walks the whole shop funnel: its product pages carry productId.
    report = await client.fetch(
        f"{env['BASE_URL']}/api/v1/sites/{env['SITE_ID']}/funnels/shop/report",
        headers={"Authorization": f"Bearer {token}"})
    steps = json.loads(report.body)["steps"]
    assert [step["label"] for step in steps] == ["Product view", "Add to cart", "Checkout",
                                                 "Order"]
    assert all(step["sessions"] >= 1 for step in steps), steps


def _first_calls() -> str:
    """The README's "First calls" shell block, as written."""
    section = (ROOT / "README.md").read_text().split("## First calls", 1)[1]
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


async def _run_first_calls(directory: Path) -> str:
    ran = await asyncio.to_thread(
        subprocess.run, ["bash", "-euo", "pipefail", "-c", _first_calls()], cwd=directory,
        capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


async def test_demo_env_is_private_and_a_second_start_keeps_the_site_keys_and_login(tmp_path):
    demo_file = tmp_path / ".visitor-service" / "demo.json"
    env_file = demo_file.with_name("demo.env")
    process, first_port = _start(demo_file)
    try:
        await _wait_listening(first_port)
        first = _sourced(env_file)
        assert first["BASE_URL"] == f"http://127.0.0.1:{first_port}"
        assert env_file.stat().st_mode & 0o777 == 0o600
        assert demo_file.stat().st_mode & 0o777 == 0o600
        await _works(first)
    finally:
        await _stop(process)

    process, second_port = _start(demo_file)
    try:
        await _wait_listening(second_port)
        second = _sourced(env_file)
        assert second == {**first, "BASE_URL": f"http://127.0.0.1:{second_port}"}
        assert env_file.stat().st_mode & 0o777 == 0o600
        await _works(second)
        # The README's block runs as written, from the directory holding .visitor-service.
        said = [json.loads(answer) for answer in
                (await _run_first_calls(tmp_path)).replace("}{", "}\n{").splitlines()]
        assert said[0]["ok"] is True, said
        assert "setUp" in said[-1], said
        assert len(said) == 3, said
    finally:
        await _stop(process)


async def test_a_real_store_tells_the_saved_login_only_when_its_site_is_there(tmp_path, deps,
                                                                              tenant):
    # What `make run STORE=wire` saves, read back to print the same "what next" block.
    saved = tmp_path / "login.json"
    login = {"email": tenant.email, "password": "secret words", "siteId": tenant.site_id,
             "apiKey": tenant.api_key, "publicKey": tenant.public_key}
    saved.write_text(json.dumps(login))
    assert (await saved_login(deps.store, saved)).as_dict() == login
    saved.write_text(json.dumps({**login, "siteId": "00000000-0000-4000-8000-000000000000"}))
    assert await saved_login(deps.store, saved) is None
    saved.write_text('{"email": "half@example.com"}')
    assert await saved_login(deps.store, saved) is None
