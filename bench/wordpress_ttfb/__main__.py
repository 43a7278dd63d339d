"""WordPress with the plugin: time to first byte, active against inactive, in the same run.

Provisions the tests' WordPress (tests/support/wordpress.py: Debian's packages, a private
MariaDB, `php -S` with OPcache), points the plugin at a listener that only counts connections,
and times the first byte of the same pages, straight from PHP (the full-page cache bypassed),
with the plugin active and deactivated in alternating rounds. Target (issue 17): p50 at most
1.05 times the inactive p50, and no network call on the page's path (the listener counts none).

"Service hung" (issue 33): the first byte of a lead (`POST /wp-json/service/v1/leads`), a survey
answer (`/surveys`) and a checkout (the WooCommerce stand-in's) with the plugin pointed at a
port that accepts and never answers, against the same with a service that answers at once, in
alternating rounds on `php -S` (no PHP-FPM). Target: at most 50 ms more at p50 for each, and
every item kept in the outbox.
"""

from __future__ import annotations

import http.client
import json
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
HUNG_TARGET_ADDED_MS = 50
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


class HungListener:
    """A TCP port that accepts connections and never answers (a hung service)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        for conn in self.held:
            conn.close()
        self.sock.close()


class AnsweringListener:
    """A service that answers every request at once with 202."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    @staticmethod
    def _answer(conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                body += chunk
            conn.sendall(b"HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 2\r\nConnection: close\r\n\r\n{}")

    def close(self) -> None:
        self.sock.close()


def _ttfb_ms(wp: WordPress, path: str, method: str = "GET", body: bytes | None = None,
             expect: int = 200, cookies: str = "svc_vid=bench-visitor") -> float:
    parts = urlsplit(wp.backend_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    started = time.perf_counter()
    # The public Host: WordPress would otherwise redirect to its canonical address.
    headers = {"Host": wp.host, "Cookie": cookies}
    if body is not None:
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=body, headers=headers)
    answer = conn.getresponse()
    first_byte = time.perf_counter()
    answer.read()
    conn.close()
    if answer.status != expect:
        raise RuntimeError(f"{path} answered {answer.status}")
    return (first_byte - started) * 1000


def _kept_item_ms(wp: WordPress, kind: str, number: int) -> float:
    """One visitor-facing request that keeps an item: a lead, a survey answer or a checkout."""
    if kind == "lead":
        body = json.dumps({"visitorId": f"bench-{number}", "email": f"lead{number}@example.com",
                           "url": wp.url + "/"}).encode()
        return _ttfb_ms(wp, "/wp-json/service/v1/leads", "POST", body, expect=202)
    if kind == "survey":
        body = json.dumps({"visitorId": f"bench-{number}", "surveyId": "nps",
                           "answers": [{"question": "Q?", "score": 9}]}).encode()
        return _ttfb_ms(wp, "/wp-json/service/v1/surveys", "POST", body, expect=202)
    # The WooCommerce stand-in's checkout (tests/wordpress/mu-plugins/fake-woocommerce.php).
    return _ttfb_ms(wp, f"/?fake_wc_checkout=1&email=buyer{number}@example.com", cookies=(
        f"svc_vid=bench-{number}; fake_wc_cart=%7B%22{wp.product_id}%22%3A1%7D"))


KINDS = ("lead", "survey", "checkout")


def _service_hung(wp: WordPress) -> dict[str, Any]:
    """TTFB of what keeps an item, the service hung against answering, in alternating rounds;
    the outbox checked."""
    hung, answering = HungListener(), AnsweringListener()
    times: dict[str, dict[str, list[float]]] = {kind: {"hung": [], "answering": []}
                                                for kind in KINDS}
    kept = 0
    number = 0
    try:
        for _ in range(ROUNDS // 2):
            for mode, port in (("answering", answering.port), ("hung", hung.port)):
                wp.php_sync(f"""update_option('visitor_service_url', 'http://127.0.0.1:{port}');
                    delete_option('visitor_service_delivery_hold'); global $wpdb;
                    $wpdb->query('TRUNCATE TABLE ' . \\VisitorService\\Outbox::table());
                    return true;""")
                for _ in range(PER_ROUND):
                    for kind in KINDS:
                        number += 1
                        times[kind][mode].append(_kept_item_ms(wp, kind, number))
                if mode == "hung":
                    kept += int(wp.php_sync("return \\VisitorService\\Outbox::backlog();"))
    finally:
        hung.close()
        answering.close()
    p50 = {kind: {mode: statistics.median(values) for mode, values in by_mode.items()}
           for kind, by_mode in times.items()}
    return {
        "p50_ms": {kind: {mode: round(value, 2) for mode, value in by_mode.items()}
                   for kind, by_mode in p50.items()},
        "p50_added_ms": {kind: round(by_mode["hung"] - by_mode["answering"], 2)
                         for kind, by_mode in p50.items()},
        "kept_while_hung": kept,
        "sent_while_hung": sum(len(by_mode["hung"]) for by_mode in times.values()),
    }


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
            # One address sends every lead here: the per-address limit is lifted, as a shop's
            # own code may through the visitor_service_rate_limit filter.
            limits = wp.site / "wp-content" / "mu-plugins" / "rate-limits.json"
            limits.write_text(json.dumps({"leads": 0, "surveys": 0}))
            hung = _service_hung(wp)
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
        "service_hung": hung,
        "met": (ratio <= TARGET_RATIO and page_connections == 0
                and max(hung["p50_added_ms"].values()) <= HUNG_TARGET_ADDED_MS
                and hung["kept_while_hung"] == hung["sent_while_hung"]),
    }


if __name__ == "__main__":
    import json

    print(json.dumps(main(), indent=2))
