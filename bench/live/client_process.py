"""One benchmark client process: N dashboard sockets that note when each event arrives.

`python -m bench.live.client_process <port> <origin> <token> <siteId> <sockets>` opens the
sockets, authenticates and subscribes each, prints ``ready``, and records the monotonic time
at which every event frame arrives (CLOCK_MONOTONIC is system-wide on Linux, so the
coordinator's publish times compare with it). When stdin closes it prints
``{event id: [arrival times]}`` as JSON and exits.

A hand-written asyncio.BufferedProtocol rather than Tornado's client: the clients share the
machine's two cores with the server, and every microsecond a client spends per frame is CPU
the server does not get. Every socket of a process reads into one preallocated buffer: with
a plain Protocol asyncio calls recv(256 KiB) per read, and allocating that buffer was most of
a client's CPU (py-spy: ~70 %), about 20 us per frame. Nothing here parses JSON per event;
the id is cut out of the frame's bytes.
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
#: The shared receive buffer; a read never needs more than the frames waiting on one socket.
_RECEIVE_BYTES = 64 * 1024


def _client_frame(opcode: int, payload: bytes) -> bytes:
    size = len(payload)
    if size < 126:
        header = struct.pack("!BB", 0x80 | opcode, 0x80 | size)
    else:
        header = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, size)
    return header + _ZERO_MASK + payload


class BenchSocket(asyncio.BufferedProtocol):
    """One socket: the upgrade, then frames; event arrivals go into the shared receipts."""

    def __init__(self, receipts: dict[bytes, list[float]], shared: bytearray) -> None:
        self.receipts = receipts
        # One process runs one socket's callback at a time, so all its sockets can read into
        # the same buffer as long as each parses what it read before returning.
        self.shared = shared
        self.view = memoryview(shared)
        #: An incomplete frame (or upgrade response) left over from the last read.
        self.partial = b""
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

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.view

    def buffer_updated(self, nbytes: int) -> None:
        arrived = time.monotonic()
        data: bytes | bytearray = self.shared
        end = nbytes
        if self.partial:
            data = self.partial + self.view[:nbytes]
            end = len(data)
        position = 0
        if not self.upgraded:
            header_end = data.find(b"\r\n\r\n", 0, end)
            if header_end < 0:
                self.partial = bytes(data[:end])
                return
            if not data.startswith(b"HTTP/1.1 101"):
                raise RuntimeError(bytes(data[:200]).decode(errors="replace"))
            self.upgraded = True
            self.replies.put_nowait(b"upgraded")
            position = header_end + 4
        while end - position >= 2:
            following = self._frame(data, position, end, arrived)
            if following < 0:
                break
            position = following
        self.partial = bytes(data[position:end]) if position < end else b""

    def _frame(self, data: bytes | bytearray, position: int, end: int, arrived: float) -> int:
        """Handle the frame at `position`; where the next one starts, or -1 if incomplete."""
        size = data[position + 1] & 0x7F
        start = position + 2
        if size == 126:
            if end - position < 4:
                return -1
            size = struct.unpack_from("!H", data, position + 2)[0]
            start = position + 4
        elif size == 127:
            if end - position < 10:
                return -1
            size = struct.unpack_from("!Q", data, position + 2)[0]
            start = position + 10
        stop = start + size
        if stop > end:
            return -1
        opcode = data[position] & 0x0F
        if opcode == 0x1:
            if data.startswith(_EVENT_PREFIX, start, stop):
                id_start = data.find(_ID_MARKER, start, stop) + len(_ID_MARKER)
                event_id = bytes(data[id_start:data.find(b'"', id_start, stop)])
                self.receipts.setdefault(event_id, []).append(arrived)
            else:
                self.replies.put_nowait(bytes(data[start:stop]))
        elif opcode == 0x9 and self.transport is not None:
            self.transport.write(_client_frame(0xA, bytes(data[start:stop])))
        return stop


async def _open(port: int, origin: str, token: str, site_id: str,
                receipts: dict[bytes, list[float]], shared: bytearray) -> BenchSocket:
    loop = asyncio.get_running_loop()
    _, socket = await loop.create_connection(lambda: BenchSocket(receipts, shared),
                                             "127.0.0.1", port)
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
    shared = bytearray(_RECEIVE_BYTES)
    sockets: list[BenchSocket] = []
    for start in range(0, count, _CONNECT_BATCH):
        batch = min(_CONNECT_BATCH, count - start)
        sockets.extend(await asyncio.gather(*(
            _open(port, origin, token, site_id, receipts, shared) for _ in range(batch))))
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    for socket in sockets:
        if socket.transport is not None:
            socket.transport.close()
    print(json.dumps({key.decode(): times for key, times in receipts.items()}), flush=True)


if __name__ == "__main__":
    asyncio.run(run(int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
