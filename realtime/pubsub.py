"""What the two Redis subscriptions share (the live bus in realtime/bus.py, the site changes in
realtime/site_changes.py): backing off between reconnects, and closing what they hold."""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

from redis.exceptions import RedisError

from config.background import stop_task

log = logging.getLogger(__name__)


async def back_off(delay: float, ceiling: float) -> float:
    """Wait before reconnecting, then return the next delay (doubled, at most `ceiling`). Full
    jitter keeps many server processes from reconnecting in lockstep."""
    await asyncio.sleep(random.uniform(delay / 2, delay))
    return min(delay * 2, ceiling)


async def close_quietly(pubsub: Any) -> None:
    """Close a pubsub whose connection may already be dead."""
    try:
        await pubsub.aclose()
    except (RedisError, OSError) as exc:
        log.debug("closing a dead pubsub connection failed", extra={"error": repr(exc)})


async def close_subscription(task: asyncio.Task[None] | None, subscriber: Any,
                             publisher: Any) -> None:
    """Stop the subscription task and close both of its clients."""
    await stop_task(task)
    await subscriber.aclose()
    await publisher.aclose()
