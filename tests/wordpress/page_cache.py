"""A full-page cache in front of the test WordPress, as WP Super Cache or a CDN would be.

Usage: page_cache.py PUBLIC_PORT BACKEND_PORT. Anonymous GETs of pages (not /wp-json, wp-admin,
wp-login, wp-cron, admin-ajax, not with a WordPress login cookie) answered 200 with HTML are kept
and served again byte for byte to everyone (`X-Cache: HIT`). `POST /__cache/purge` empties it.
Everything else is passed through unchanged, Host header included.
"""

from __future__ import annotations

import http.client
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BYPASS = ("/wp-json", "/wp-admin", "/wp-login.php", "/wp-cron.php", "/?rest_route")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-authorization", "proxy-authenticate"}


class Cache:
    def __init__(self) -> None:
        self.pages: dict[str, tuple[int, list[tuple[str, str]], bytes]] = {}
        self.lock = threading.Lock()


CACHE = Cache()
BACKEND_PORT = 0


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        sys.stdout.write(f"{self.address_string()} {format % args}\n")
        sys.stdout.flush()

    def _cacheable(self) -> bool:
        cookies = self.headers.get("Cookie", "")
        return (self.command == "GET" and not self.path.startswith(BYPASS)
                and "wordpress_logged_in_" not in cookies)

    def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes,
                state: str) -> None:
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("X-Cache", state)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _forward(self) -> None:
        if self.path == "/__cache/purge":
            with CACHE.lock:
                CACHE.pages.clear()
            self._answer(204, [], b"", "PURGE")
            return
        cacheable = self._cacheable()
        if cacheable:
            with CACHE.lock:
                kept = CACHE.pages.get(self.path)
            if kept is not None:
                self._answer(*kept, state="HIT")
                return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {name: value for name, value in self.headers.items()
                   if name.lower() not in HOP_BY_HOP}
        backend = http.client.HTTPConnection("127.0.0.1", BACKEND_PORT, timeout=60)
        try:
            backend.request(self.command, self.path, body=body, headers=headers)
            answer = backend.getresponse()
            content = answer.read()
            answer_headers = answer.getheaders()
            status = answer.status
        finally:
            backend.close()
        html = any(n.lower() == "content-type" and "text/html" in v for n, v in answer_headers)
        sets_cookie = any(n.lower() == "set-cookie" for n, _ in answer_headers)
        control = " ".join(v for n, v in answer_headers if n.lower() == "cache-control")
        private = any(word in control for word in ("no-cache", "no-store", "private"))
        if cacheable and status == 200 and html and not sets_cookie and not private:
            with CACHE.lock:
                CACHE.pages[self.path] = (status, answer_headers, content)
        self._answer(status, answer_headers, content, "MISS" if cacheable else "BYPASS")

    do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = do_OPTIONS = _forward


def main() -> None:
    global BACKEND_PORT
    public_port, BACKEND_PORT = int(sys.argv[1]), int(sys.argv[2])
    server = ThreadingHTTPServer(("127.0.0.1", public_port), Proxy)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
