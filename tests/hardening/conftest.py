"""Fixtures for the hardening tests: a redis-server that can be killed and restarted.

The session-wide `redis_url` fixture must outlive every test; these tests stop Redis on purpose,
so they get one of their own, with an append-only file so that what Redis acknowledged survives
the kill and the restart.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import free_port
from tests.support.redis_server import _wait_until_listening


def pytest_configure(config: pytest.Config) -> None:
    """Declare `slow` here too, so that `filterwarnings = error` accepts it in this folder."""
    config.addinivalue_line("markers", "slow: takes seconds (real Redis, Celery, fuzzing); "
                            "runs in make test, deselect with -m 'not slow'")


class KillableRedis:
    """A redis-server with AOF (`appendfsync always`) that a test may kill -9 and start again."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (make system-deps installs it)")
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start (or restart) on the same port and directory, replaying the append-only file."""
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.workdir),
             "--maxmemory-policy", "noeviction", "--logfile", str(self.workdir / "log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        _wait_until_listening(self.port, self.process, time.monotonic() + 10)

    def kill(self) -> None:
        """kill -9: no shutdown save, no goodbye to clients."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


@pytest.fixture
def killable_redis() -> Iterator[KillableRedis]:
    """A running KillableRedis, stopped at the end whatever the test did to it."""
    with tempfile.TemporaryDirectory(prefix="redis-aof-") as workdir:
        redis = KillableRedis(Path(workdir))
        redis.start()
        try:
            yield redis
        finally:
            redis.kill()
