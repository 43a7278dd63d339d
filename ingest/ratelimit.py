"""Per-site token buckets: a site's traffic cannot starve the others.

`SiteRateLimiter` keeps the buckets in this process; it is the limiter of the embedded default
(one process). With REDIS_URL, `SharedSiteRateLimiter` keeps them in Redis, one atomic script
call per request, so the configured rate holds for the whole deployment however many server
processes share it. When Redis does not answer, it falls back to this process's own buckets
(logged once per outage): never to no limit, and never to refusing everything.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import redis.asyncio as redis_asyncio
from redis.exceptions import RedisError

log = logging.getLogger(__name__)


class SiteRateLimiter:
    """`take(key)` spends one token; it answers the seconds to wait when none is left.

    The table is bounded: the least recently used buckets are forgotten first, and a forgotten
    bucket simply starts full again.
    """

    def __init__(self, rate_per_second: float, burst: int, *, max_keys: int = 100_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate_per_second
        self._burst = float(burst)
        self._max_keys = max_keys
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    async def take(self, key: str) -> int | None:
        """None when allowed; otherwise whole seconds until a token is available."""
        return self.take_now(key)

    def take_now(self, key: str) -> int | None:
        """`take`, without waiting for anything."""
        now = self._clock()
        tokens, stamp = self._buckets.pop(key, (self._burst, now))
        tokens = min(self._burst, tokens + (now - stamp) * self._rate)
        if tokens >= 1.0:
            self._remember(key, (tokens - 1.0, now))
            return None
        self._remember(key, (tokens, now))
        return max(1, math.ceil((1.0 - tokens) / self._rate))

    def _remember(self, key: str, state: tuple[float, float]) -> None:
        self._buckets[key] = state
        if len(self._buckets) > self._max_keys:
            self._buckets.popitem(last=False)

    async def close(self) -> None:
        """Nothing to release."""


#: The token bucket as one atomic step in Redis, timed by the Redis server's clock so that every
#: process agrees. Returns -1 when a token was taken, else the whole seconds to wait.
_TAKE_SCRIPT = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'stamp')
local tokens = tonumber(state[1]) or burst
local stamp = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - stamp) * rate)
local wait = -1
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = math.max(1, math.ceil((1 - tokens) / rate))
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'stamp', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(burst / rate) + 1)
return wait
"""


class SharedSiteRateLimiter:
    """Token buckets in Redis, shared by every server process; this process's own buckets
    while Redis does not answer."""

    #: A Redis that failed is tried again after this long; meanwhile the local buckets answer.
    RETRY_AFTER_SECONDS = 5.0
    KEY_PREFIX = "visitor-service:rate:"

    def __init__(self, redis_url: str, rate_per_second: float, burst: int, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._client: Any = redis_asyncio.Redis.from_url(
            redis_url, socket_timeout=0.5, socket_connect_timeout=0.5)
        self._script = self._client.register_script(_TAKE_SCRIPT)
        self._args = (repr(float(rate_per_second)), str(int(burst)))
        self._fallback = SiteRateLimiter(rate_per_second, burst, clock=clock)
        self._clock = clock
        self._down_until: float | None = None

    async def take(self, key: str) -> int | None:
        """None when allowed; otherwise whole seconds until a token is available."""
        if self._down_until is not None and self._clock() < self._down_until:
            return self._fallback.take_now(key)
        try:
            wait = int(await self._script(keys=[self.KEY_PREFIX + key], args=self._args))
        except (RedisError, OSError) as exc:
            if self._down_until is None:
                log.warning("rate limits fall back to this process: Redis did not answer",
                            extra={"error": type(exc).__name__})
            self._down_until = self._clock() + self.RETRY_AFTER_SECONDS
            return self._fallback.take_now(key)
        if self._down_until is not None:
            log.info("rate limits are shared through Redis again")
            self._down_until = None
        return None if wait < 0 else wait

    async def close(self) -> None:
        """Close the Redis connections."""
        await self._client.aclose()
