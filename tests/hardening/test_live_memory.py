"""A dashboard socket that never reads is dropped, and the server's memory stays flat.

tests/realtime/test_live_socket.py shows one stalled client is dropped while others keep
receiving; this adds the memory side: stalled clients come and go round after round while
events keep flowing, and what Python holds (tracemalloc) does not grow with the rounds.
"""

from __future__ import annotations

import gc
import tracemalloc
import uuid

import server
from realtime.events import new_error_event
from tests.support.app import Tenant

ROUNDS = 5
#: Growth allowed from the first round to the last: a few stray allocations (log records,
#: interned strings), far below one round's worth of queued frames (256 x ~1 KB).
FLAT_BYTES = 200 * 1024


def _error_event(site_id: str) -> dict:
    return new_error_event(site_id, error_id=str(uuid.uuid4()), fingerprint="fp1",
                           message="TypeError: " + "m" * 800, occurrence_count=1, status="open",
                           reopened=False)


async def _one_stalled_client(deps: server.Deps, ws_connect, tenant: Tenant) -> int:
    """Connect a client that stops reading, publish until it is dropped; events published."""
    dropped_before = deps.hub.dropped_slow
    stalled = await ws_connect(token=tenant.token, site_ids=(tenant.site_id,))
    stream = stalled.connection.protocol.stream
    stream.io_loop.remove_handler(stream.socket)  # stop reading, keep the socket open
    published = 0
    while deps.hub.dropped_slow == dropped_before:
        await deps.bus.publish(tenant.site_id, _error_event(tenant.site_id))
        published += 1
        assert published < 50_000, "a client that never reads was never dropped"
    stream.close()  # its reads are off, so a close handshake would never finish
    return published


async def test_clients_that_never_read_are_dropped_round_after_round_with_flat_memory(
        deps: server.Deps, ws_connect, tenant: Tenant):
    await _one_stalled_client(deps, ws_connect, tenant)  # warm-up: imports, caches, buffers
    tracemalloc.start()
    try:
        sizes = []
        published = 0
        for _ in range(ROUNDS):
            published += await _one_stalled_client(deps, ws_connect, tenant)
            gc.collect()
            sizes.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    assert deps.hub.dropped_slow == ROUNDS + 1
    assert deps.hub.watchers(tenant.site_id) == 0
    assert published > ROUNDS * deps.settings.live_queue_limit
    assert sizes[-1] - sizes[0] < FLAT_BYTES, f"grew by round: {sizes}"
