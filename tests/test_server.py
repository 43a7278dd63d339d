"""The process: `serve` on the embedded default, demo credentials, TLS, proxies, SIGTERM."""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import os
import secrets
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from tests.support.processes import free_port

ROOT = Path(__file__).resolve().parents[1]


def _start(env_extra: dict[str, str], tmp_path: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("MONGODB_URI", "REDIS_URL")}
    env.update({"PORT": str(port), "DEMO_FILE": str(tmp_path / "demo.json"), **env_extra})
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "server.py"), "serve"], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    return process, port


async def _wait_listening(port: int, scheme: str = "http", ssl_ctx=None) -> None:
    client = AsyncHTTPClient()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            request = HTTPRequest(f"{scheme}://127.0.0.1:{port}/healthz", ssl_options=ssl_ctx)
            await client.fetch(request)
            return
        except (ConnectionError, OSError):
            await asyncio.sleep(0.1)
    raise AssertionError("server did not start")


async def test_serve_on_the_embedded_default_writes_demo_credentials_that_log_in(tmp_path):
    process, port = _start({"DEMO_EMAIL": "owner@demo.example",
                            "DEMO_PASSWORD": "demo password 123"}, tmp_path)
    try:
        await _wait_listening(port)
        banner = _banner(process)
        demo = json.loads((tmp_path / "demo.json").read_text())
        assert set(demo) == {"email", "password", "siteId", "apiKey", "publicKey"}
        assert demo["email"] == "owner@demo.example"
        assert (tmp_path / "demo.json").stat().st_mode & 0o077 == 0
        client = AsyncHTTPClient()
        login = await client.fetch(
            f"http://127.0.0.1:{port}/auth/login", method="POST",
            body=json.dumps({"email": demo["email"], "password": demo["password"]}),
            headers={"Content-Type": "application/json"})
        token = json.loads(login.body)["accessToken"]
        sites = await client.fetch(f"http://127.0.0.1:{port}/api/v1/sites",
                                   headers={"Authorization": f"Bearer {token}"})
        assert [s["id"] for s in json.loads(sites.body)] == [demo["siteId"]]
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert demo["password"] in banner  # printed for the person who ran `make run`
    assert "generated ephemeral secrets" in err
    assert '"message": "shutting down"' in err


def _banner(process: subprocess.Popen) -> str:
    """The start banner, up to its last line (printed before the server listens)."""
    lines = []
    while not (line := process.stdout.readline()).startswith("Site id "):
        assert line, "no banner"
        lines.append(line)
    return "".join(lines)


async def test_the_banner_says_what_to_do_next_and_its_curl_line_sends_an_event(tmp_path):
    process, port = _start({}, tmp_path)
    try:
        await _wait_listening(port)
        banner = _banner(process)
        demo = json.loads((tmp_path / "demo.json").read_text())
        url = f"http://127.0.0.1:{port}"
        assert f"Open the dashboard: {url}/" in banner
        assert f'<script async src="{url}/sdk/v1/loader.js?key={demo["publicKey"]}">' in banner
        assert f"API reference: {url}/api/docs" in banner
        # Where the dashboard really keeps them: the Settings tab's "Allowed origins" section.
        assert "under Settings > Allowed origins" in banner
        assert "['settings', 'Settings']" in (ROOT / "dashboard/src/main.js").read_text()
        assert "'Allowed origins'" in (ROOT / "dashboard/src/settings.js").read_text()
        (curl,) = [line.strip() for line in banner.splitlines()
                   if line.strip().startswith("curl ")]
        sending = await asyncio.create_subprocess_exec(*shlex.split(curl),
                                                       stdout=subprocess.PIPE)
        sent, _ = await asyncio.wait_for(sending.communicate(), timeout=30)
        assert json.loads(sent)["ok"] is True, sent
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)


def test_serve_on_a_busy_port_fails_in_one_line_and_keeps_the_saved_login(tmp_path):
    saved = tmp_path / "demo.json"
    saved.write_text('{"email": "kept@demo.example"}\n')
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k not in ("MONGODB_URI", "REDIS_URL")}
        result = subprocess.run(
            [sys.executable, str(ROOT / "server.py"), "serve"], cwd=ROOT, capture_output=True,
            env={**env, "PORT": str(port), "DEMO_FILE": str(saved)}, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip() == (
        f"configuration error: PORT: cannot listen on 127.0.0.1:{port} (Address already in "
        f"use); stop whatever uses it or set another PORT")
    assert saved.read_text() == '{"email": "kept@demo.example"}\n'


def test_help_describes_the_commands_for_an_operator():
    result = subprocess.run([sys.executable, str(ROOT / "server.py"), "--help"], cwd=ROOT,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0
    text = result.stdout
    for command in ("serve", "worker", "create-user", "create-site", "rotate-key",
                    "replay-erasures", "quarantine", "rebuild-figures"):
        assert f"    {command}" in text, command
    assert "MONGODB_URI" in text and "REDIS_URL" in text and "examples:" in text
    # What the code is made of is not an operator's concern.
    assert "make_app" not in text and "Deps" not in text


def test_a_malformed_setting_stops_the_start_with_one_line(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "server.py"), "serve"], cwd=ROOT,
                            env={**os.environ, "PORT": "eighty"}, capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 2
    assert result.stderr.strip() == "configuration error: PORT: invalid literal for int() " \
                                    "with base 10: 'eighty'"


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


async def test_tls_is_served_with_a_tls_1_2_minimum(tmp_path):
    cert, key = _self_signed(tmp_path)
    process, port = _start({"TLS_CERT_FILE": str(cert), "TLS_KEY_FILE": str(key)}, tmp_path)
    try:
        modern = ssl.create_default_context(cafile=str(cert))
        modern.check_hostname = False
        await _wait_listening(port, "https", modern)
        old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        old.check_hostname = False
        old.verify_mode = ssl.CERT_NONE
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # TLS 1.1 is the point here
            old.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
            old.maximum_version = ssl.TLSVersion.TLSv1_1
        try:
            old.set_ciphers("ALL:@SECLEVEL=0")
        except ssl.SSLError:
            pass
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            await AsyncHTTPClient().fetch(HTTPRequest(f"https://127.0.0.1:{port}/healthz",
                                                      ssl_options=old))
        negotiated = await _negotiated_version(port, modern)
        assert negotiated in ("TLSv1.2", "TLSv1.3")
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)


async def _negotiated_version(port: int, context: ssl.SSLContext) -> str | None:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    version = writer.get_extra_info("ssl_object").version()
    writer.close()
    return version


def test_the_tls_context_refuses_anything_below_tls_1_2(tmp_path):
    from config import load_settings
    from server import tls_context

    cert, key = _self_signed(tmp_path)
    context = tls_context(load_settings({"TLS_CERT_FILE": str(cert), "TLS_KEY_FILE": str(key)}))
    assert context is not None
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2


def test_the_client_address_comes_from_x_forwarded_for_only_via_a_trusted_proxy():
    from ipaddress import ip_network

    from handlers.base import client_address

    proxies = (ip_network("127.0.0.1/32"), ip_network("10.0.0.0/8"))
    assert client_address("127.0.0.1", "198.51.100.9", proxies) == "198.51.100.9"
    assert client_address("127.0.0.1", "6.6.6.6, 198.51.100.9, 10.1.2.3", proxies) \
        == "198.51.100.9"
    assert client_address("203.0.113.5", "198.51.100.9", proxies) == "203.0.113.5"
    assert client_address("127.0.0.1", "198.51.100.9", ()) == "127.0.0.1"
    assert client_address("127.0.0.1", "", proxies) == "127.0.0.1"


async def test_an_operator_lists_facts_set_aside_and_puts_them_back(tmp_path):
    """`quarantine` shows what the fold set aside, with its reason and no visitor data, and
    `--requeue` puts a site's back in line; `rebuild-figures` rebuilds a site under its lease."""
    from derived import daily_figures, derivation
    from derived.store_setup import prepare_store
    from documents.store import open_store
    from tests.support.secantus import running_secantus

    with running_secantus() as mongodb_uri:
        store = open_store(mongodb_uri, "operator_cli")
        await prepare_store(store)
        recorded = datetime.datetime.now(datetime.UTC)
        await store.collection(derivation.COLLECTION).insert_one({
            "_id": "fact-1", "siteId": "site-1", "visitorId": "ada", "kind": daily_figures.ORDER,
            "recordedAt": recorded, "records": [{"at": recorded, "currency": "EUR"}],
            "quarantined": {"reason": "FigureOverflow", "at": recorded}})
        env = {**os.environ, "MONGODB_URI": mongodb_uri, "MONGODB_DATABASE": "operator_cli",
               "SECRET_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
               "MASTER_KEY": base64.b64encode(secrets.token_bytes(32)).decode()}

        def cli(*args: str) -> list[dict]:
            done = subprocess.run([sys.executable, "server.py", *args], cwd=ROOT, env=env,
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
            return [json.loads(line) for line in done.stdout.splitlines()]

        [listed] = cli("quarantine")
        assert (listed["site"], listed["kind"], listed["reason"]) == (
            "site-1", daily_figures.ORDER, "FigureOverflow")
        assert "ada" not in json.dumps(listed)
        assert cli("quarantine", "--requeue", "site-1") == [{"site": "site-1", "requeued": 1}]
        assert cli("quarantine") == []
        assert await store.collection(derivation.COLLECTION).count_documents(
            {"quarantined": {"$exists": True}}) == 0
        assert cli("rebuild-figures", "--site-id", "site-1") == [
            {"site": "site-1", "rebuilt": True}]
        store.close()
