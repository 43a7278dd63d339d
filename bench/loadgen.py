"""A small keep-alive HTTP load generator for loopback benchmarks.

Raw asyncio streams rather than an HTTP client library: the generator shares two cores with the
server under test, so it must spend as little CPU per request as possible. Every run is bounded
in time and count and talks only to 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# Re-exported: the benchmarks start their servers the way the tests do.
from tests.support.processes import free_port as free_port
from tests.support.processes import wait_for_port as wait_for_port

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class LoadResult:
    """What one load run measured."""

    requests: int
    seconds: float
    latencies_ms: list[float]
    statuses: dict[int, int]

    @property
    def per_second(self) -> float:
        """Completed requests per second."""
        return self.requests / self.seconds if self.seconds else 0.0

    def percentile(self, p: float) -> float:
        """Latency percentile in milliseconds."""
        if not self.latencies_ms:
            return 0.0
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(p / 100.0 * len(ordered)))]


async def _connection(port: int, make_request: Callable[[int], bytes], deadline: float,
                      max_requests: int, result: LoadResult, counter: list[int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.monotonic() < deadline and counter[0] < max_requests:
            counter[0] += 1
            request = make_request(counter[0])
            started = time.perf_counter()
            writer.write(request)
            status_line = await reader.readline()
            length = 0
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if length:
                await reader.readexactly(length)
            result.latencies_ms.append((time.perf_counter() - started) * 1000.0)
            status = int(status_line.split()[1]) if status_line else 0
            result.statuses[status] = result.statuses.get(status, 0) + 1
            result.requests += 1
    finally:
        writer.close()


async def run_load(port: int, make_request: Callable[[int], bytes], *, seconds: float,
                   connections: int, max_requests: int = 1_000_000) -> LoadResult:
    """Drive `connections` keep-alive connections for `seconds` (bounded by `max_requests`)."""
    result = LoadResult(0, 0.0, [], {})
    counter = [0]
    started = time.monotonic()
    deadline = started + seconds
    await asyncio.gather(*(
        _connection(port, make_request, deadline, max_requests, result, counter)
        for _ in range(connections)
    ))
    result.seconds = time.monotonic() - started
    return result


def post_json(path: str, body_for: Callable[[int], dict], headers: dict[str, str]
              ) -> Callable[[int], bytes]:
    """A request builder for POSTs of a JSON body."""
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())

    def build(n: int) -> bytes:
        body = json.dumps(body_for(n)).encode()
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n{extra}\r\n")
        return head.encode() + body

    return build


def start_process(args: list[str], env: dict[str, str], *, cwd: Path = ROOT) -> subprocess.Popen:
    """Start a Python process from the repository root (or another checkout of it)."""
    return subprocess.Popen([sys.executable, *args], cwd=cwd, env={**os.environ, **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used so far."""
    # Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set size (VmHWM) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def median(values: list[float]) -> float:
    """The median, 0 for no values."""
    return statistics.median(values) if values else 0.0
