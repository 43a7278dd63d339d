"""WordPress with the plugin: time to first byte, active against inactive, in the same run.

Provisions the tests' WordPress (tests/support/wordpress.py: Debian's packages, a private
MariaDB, `php -S` with OPcache), points the plugin at a listener that only counts connections,
and times the first byte of the same pages, straight from PHP (the full-page cache bypassed),
with the plugin active and deactivated in alternating rounds. Target (issue 17): p50 at most
1.05 times the inactive p50, and no network call on the page's path (the listener counts none).
"""

from __future__ import annotations

import http.client
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.support.wordpress import WordPress, running_wordpress

ROUNDS = 10
PER_ROUND = 20
TARGET_RATIO = 1.05
PLUGIN = "visitor-service/visitor-service.php"


class CountingListener:
    """A TCP port that accepts and counts connections, and answers nothing useful."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


def _ttfb_ms(wp: WordPress, path: str) -> float:
    parts = urlsplit(wp.backend_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    started = time.perf_counter()
    # The public Host: WordPress would otherwise redirect to its canonical address.
    conn.request("GET", path, headers={"Host": wp.host, "Cookie": "svc_vid=bench-visitor"})
    answer = conn.getresponse()
    first_byte = time.perf_counter()
    answer.read()
    conn.close()
    if answer.status != 200:
        raise RuntimeError(f"{path} answered {answer.status}")
    return (first_byte - started) * 1000


def _round(wp: WordPress, paths: list[str]) -> list[float]:
    return [_ttfb_ms(wp, paths[i % len(paths)]) for i in range(PER_ROUND)]


def main() -> dict[str, Any]:
    listener = CountingListener()
    try:
        with tempfile.TemporaryDirectory() as root, running_wordpress(Path(root)) as wp:
            wp.php_sync(f"""
                update_option('visitor_service_url', 'http://127.0.0.1:{listener.port}');
                update_option('visitor_service_public_key', 'pk_bench');
                \\VisitorService\\Options::saveApiKey('sk_bench');
                return true;""")
            paths = ["/", urlsplit(wp.product_url).path]
            for path in paths:  # warm OPcache and MariaDB for both modes
                for _ in range(5):
                    _ttfb_ms(wp, path)
            times: dict[str, list[float]] = {"active": [], "inactive": []}
            page_connections = 0
            for _ in range(ROUNDS):
                for mode in ("inactive", "active"):
                    call = "deactivate_plugins" if mode == "inactive" else "activate_plugin"
                    wp.php_sync(f"{call}('{PLUGIN}'); return true;")
                    before = listener.connections
                    times[mode].extend(_round(wp, paths))
                    page_connections += listener.connections - before
    finally:
        listener.close()
    p50 = {mode: statistics.median(values) for mode, values in times.items()}
    p90 = {mode: statistics.quantiles(values, n=10)[-1] for mode, values in times.items()}
    ratio = round(p50["active"] / p50["inactive"], 3)
    return {
        "requests_per_mode": len(times["active"]),
        "p50_ms": {mode: round(value, 2) for mode, value in p50.items()},
        "p90_ms": {mode: round(value, 2) for mode, value in p90.items()},
        "p50_ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "service_connections_while_rendering": page_connections,
        "met": ratio <= TARGET_RATIO and page_connections == 0,
    }


if __name__ == "__main__":
    import json

    print(json.dumps(main(), indent=2))
