"""The hub's per-socket backlog, with transports that stand in for a fast and a stuck socket."""

from __future__ import annotations

import asyncio
import uuid

from realtime.events import new_error_event
from realtime.hub import CLOSE_SLOW_CONSUMER, LiveHub

QUEUE_LIMIT = 8


class KernelTakesEverything:
    """A socket whose kernel buffer always has room: every frame is written at once."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.closed_with: int | None = None

    def write_frame(self, frame: bytes) -> asyncio.Future[None] | None:
        self.frames.append(frame)
        return None

    def close_with(self, code: int, reason: str) -> None:
        self.closed_with = code


class KernelBufferFull(KernelTakesEverything):
    """A socket whose kernel buffer is full: every frame waits until `drain`."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[asyncio.Future[None]] = []

    def write_frame(self, frame: bytes) -> asyncio.Future[None] | None:
        self.frames.append(frame)
        self.pending.append(asyncio.get_running_loop().create_future())
        return self.pending[-1]

    def drain(self) -> None:
        for future in self.pending:
            future.set_result(None)
        self.pending.clear()


def _event(site_id: str) -> dict:
    return new_error_event(site_id, error_id=str(uuid.uuid4()), fingerprint="fp",
                           message="TypeError: x", occurrence_count=1, status="open",
                           reopened=False)


async def test_a_socket_that_keeps_up_has_no_backlog_however_many_events_it_gets():
    hub, site_id = LiveHub(QUEUE_LIMIT), str(uuid.uuid4())
    fast = KernelTakesEverything()
    subscriber = hub.attach(fast)
    hub.subscribe(subscriber, {site_id: "org"})
    for _ in range(QUEUE_LIMIT * 10):
        hub.dispatch(site_id, _event(site_id))
    assert len(fast.frames) == QUEUE_LIMIT * 10
    assert subscriber.backlog == 0
    assert hub.dropped_slow == 0


async def test_one_frame_is_built_per_event_and_shared_by_every_socket():
    hub, site_id = LiveHub(QUEUE_LIMIT), str(uuid.uuid4())
    sockets = [KernelTakesEverything() for _ in range(3)]
    for transport in sockets:
        hub.subscribe(hub.attach(transport), {site_id: "org"})
    hub.dispatch(site_id, _event(site_id))
    assert sockets[0].frames[0] is sockets[1].frames[0] is sockets[2].frames[0]


async def test_a_socket_whose_writes_stay_pending_is_dropped_at_the_limit_and_others_go_on():
    hub, site_id = LiveHub(QUEUE_LIMIT), str(uuid.uuid4())
    stuck, fast = KernelBufferFull(), KernelTakesEverything()
    for transport in (stuck, fast):
        hub.subscribe(hub.attach(transport), {site_id: "org"})
    for _ in range(QUEUE_LIMIT + 1):
        hub.dispatch(site_id, _event(site_id))
    assert stuck.closed_with == CLOSE_SLOW_CONSUMER
    assert len(stuck.frames) == QUEUE_LIMIT
    assert hub.dropped_slow == 1
    assert hub.watchers(site_id) == 1
    hub.dispatch(site_id, _event(site_id))
    assert len(fast.frames) == QUEUE_LIMIT + 2


async def test_the_backlog_shrinks_as_pending_writes_reach_the_kernel():
    hub, site_id = LiveHub(QUEUE_LIMIT), str(uuid.uuid4())
    slow = KernelBufferFull()
    subscriber = hub.attach(slow)
    hub.subscribe(subscriber, {site_id: "org"})
    for _ in range(QUEUE_LIMIT - 1):
        hub.dispatch(site_id, _event(site_id))
    assert subscriber.backlog == QUEUE_LIMIT - 1
    slow.drain()
    assert subscriber.backlog == 0
    for _ in range(QUEUE_LIMIT - 1):
        hub.dispatch(site_id, _event(site_id))
    assert slow.closed_with is None
    assert hub.dropped_slow == 0
