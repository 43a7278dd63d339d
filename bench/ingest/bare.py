"""The baseline: a bare Tornado handler that parses JSON and answers `{"ok": true}`."""

from __future__ import annotations

import asyncio
import json
import sys

import tornado.web


class BareJsonHandler(tornado.web.RequestHandler):
    """What any Tornado JSON endpoint costs at the least."""

    def post(self, _: str) -> None:
        json.loads(self.request.body)
        self.set_header("Content-Type", "application/json")
        self.finish(b'{"ok":true}')


async def main(port: int) -> None:
    """Serve until killed."""
    app = tornado.web.Application([(r"/(.*)", BareJsonHandler)], log_function=lambda h: None)
    app.listen(port, "127.0.0.1")
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
