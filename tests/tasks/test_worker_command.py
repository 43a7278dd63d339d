"""`visitor-service worker` refuses to run where it cannot work, with one clear line."""

from __future__ import annotations

import pytest

import server


@pytest.mark.parametrize("environment", [
    {},
    {"REDIS_URL": "redis://127.0.0.1:6379/0"},
])
def test_the_worker_refuses_the_embedded_store_naming_redis_url_and_mongodb_uri(
        monkeypatch, capsys, environment):
    monkeypatch.delenv("MONGODB_URI", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert server.cli(["worker"]) == 2
    message = capsys.readouterr().err.strip()
    assert len(message.splitlines()) == 1
    assert "REDIS_URL" in message and "MONGODB_URI" in message
