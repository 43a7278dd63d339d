"""Starting and stopping the helper servers of tests and benchmarks: ports and processes."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def wait_for_port(port: int, within_seconds: float = 30.0) -> None:
    """Wait until something accepts connections on the loopback port."""
    deadline = time.monotonic() + within_seconds
    while time.monotonic() < deadline:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise TimeoutError(f"nothing listens on {port}")


def stop(process: subprocess.Popen, timeout: float = 10) -> None:
    """Terminate the process, and kill it when it does not stop in time."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
