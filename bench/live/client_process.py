"""One benchmark client process: N dashboard sockets that note when each event arrives.

`python -m bench.live.client_process <port> <origin> <token> <siteId> <sockets>` opens the
sockets, authenticates and subscribes each, prints ``ready``, and records the monotonic time
at which every event frame arrives (CLOCK_MONOTONIC is system-wide on Linux, so the
coordinator's publish times compare with it). When stdin closes it prints
``{event id: [arrival times]}`` as JSON and exits.

A hand-written asyncio.Protocol rather than Tornado's client: the clients share the machine's
two cores with the server, and every microsecond a client spends per frame is CPU the server
does not get. Nothing here parses JSON per event; the id is cut out of the frame's bytes.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
import sys
import time

#: Client frames must be masked (RFC 6455); an all-zero key leaves the payload as it is.
_ZERO_MASK = b"\x00\x00\x00\x00"
_ID_MARKER = b'"id":"'
_EVENT_PREFIX = b'{"type":"new_'
#: Sockets opened at once; more only queues up in the server's accept backlog.
_CONNECT_BATCH = 50


def _client_frame(opcode: int, payload: bytes) -> bytes:
    size = len(payload)
    if size < 126:
        header = struct.pack("!BB", 0x80 | opcode, 0x80 | size)
    else:
        header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, size)
    return header + _ZERO_MASK + payload


class BenchSocket(asyncio.Protocol):
    """One socket: the upgrade, then frames; event arrivals go into the shared receipts."""

    def __init__(self, receipts: dict[bytes, list[float]]) -> None:
        self.receipts = receipts
        self.buffer = bytearray()
        self.upgraded = False
        self.transport: asyncio.Transport | None = None
        self.replies: asyncio.Queue[bytes] = asyncio.Queue()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def send_text(self, text: str) -> None:
        """Send one masked text frame."""
        assert self.transport is not None
        self.transport.write(_client_frame(0x1, text.encode()))

    def data_received(self, data: bytes) -> None:
        arrived = time.monotonic()
        buffer = self.buffer
        buffer += data
        if not self.upgraded:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            if not buffer.startswith(b"HTTP/1.1 101"):
                raise RuntimeError(bytes(buffer[:200]).decode(errors="replace"))
            del buffer[:end + 4]
            self.upgraded = True
            self.replies.put_nowait(b"upgraded")
        while len(buffer) >= 2:
            size = buffer[1] & 0x7F
            start = 2
            if size == 126:
                if len(buffer) < 4:
                    return
                size = struct.unpack_from("!H", buffer, 2)[0]
                start = 4
            elif size == 127:
                if len(buffer) < 10:
                    return
                size = struct.unpack_from("!Q", buffer, 2)[0]
                start = 10
            if len(buffer) < start + size:
                return
            opcode = buffer[0] & 0x0F
            payload = bytes(buffer[start:start + size])
            del buffer[:start + size]
            if opcode == 0x1:
                self._on_text(payload, arrived)
            elif opcode == 0x9 and self.transport is not None:
                self.transport.write(_client_frame(0xA, payload))

    def _on_text(self, payload: bytes, arrived: float) -> None:
        if payload.startswith(_EVENT_PREFIX):
            start = payload.index(_ID_MARKER) + len(_ID_MARKER)
            event_id = payload[start:payload.index(b'"', start)]
            self.receipts.setdefault(event_id, []).append(arrived)
        else:
            self.replies.put_nowait(payload)


async def _open(port: int, origin: str, token: str, site_id: str,
                receipts: dict[bytes, list[float]]) -> BenchSocket:
    loop = asyncio.get_running_loop()
    _, socket = await loop.create_connection(lambda: BenchSocket(receipts), "127.0.0.1", port)
    assert socket.transport is not None
    key = base64.b64encode(os.urandom(16)).decode()
    socket.transport.write(
        f"GET /dashboard/live HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Origin: {origin}\r\n\r\n".encode())
    await socket.replies.get()
    socket.send_text(json.dumps({"type": "auth", "token": token}))
    authenticated = await socket.replies.get()
    socket.send_text(json.dumps({"type": "subscribe", "siteIds": [site_id]}))
    subscribed = await socket.replies.get()
    if b'"authenticated"' not in authenticated or b'"subscribed"' not in subscribed:
        raise RuntimeError(f"setup refused: {authenticated!r} {subscribed!r}")
    return socket


async def run(port: int, origin: str, token: str, site_id: str, count: int) -> None:
    """Open the sockets, say ready, record arrivals until stdin closes, print them."""
    receipts: dict[bytes, list[float]] = {}
    sockets: list[BenchSocket] = []
    for start in range(0, count, _CONNECT_BATCH):
        batch = min(_CONNECT_BATCH, count - start)
        sockets.extend(await asyncio.gather(*(
            _open(port, origin, token, site_id, receipts) for _ in range(batch))))
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    for socket in sockets:
        if socket.transport is not None:
            socket.transport.close()
    print(json.dumps({key.decode(): times for key, times in receipts.items()}), flush=True)


if __name__ == "__main__":
    asyncio.run(run(int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
