"""Per-site token buckets: a site's traffic cannot starve the others.

Buckets live in this process (each server process limits on its own; with N processes a site
gets up to N times the rate, which the operator's guide notes). The table is bounded: the least
recently used buckets are forgotten first, and a forgotten bucket simply starts full again.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable


class SiteRateLimiter:
    """`take(key)` spends one token; it answers the seconds to wait when none is left."""

    def __init__(self, rate_per_second: float, burst: int, *, max_keys: int = 100_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate_per_second
        self._burst = float(burst)
        self._max_keys = max_keys
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, key: str) -> int | None:
        """None when allowed; otherwise whole seconds until a token is available."""
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
