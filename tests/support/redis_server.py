"""A real redis-server on a free port in a temporary directory, for tests and benchmarks."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.processes import free_port, stop


def _wait_until_listening(port: int, process: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"redis-server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("redis-server did not start within 10 s")


@contextmanager
def running_redis() -> Iterator[str]:
    """Start redis-server without persistence and yield its redis:// URL; stop it afterwards."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (make system-deps installs it)")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="redis-") as workdir:
        process = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", workdir, "--logfile", str(Path(workdir) / "log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            _wait_until_listening(port, process, time.monotonic() + 10)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            stop(process, timeout=5)
