"""Per-principal token buckets. Pure: time comes from an injected clock."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable


class RateLimiter:
    """`rate` requests per second per principal with bursts of `burst`; `rate == 0` means no limit.

    Buckets of principals not seen for a while are dropped (at most `max_principals` are kept)."""

    def __init__(
        self,
        rate: float,
        burst: int,
        *,
        max_principals: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._max = max_principals
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # principal -> (tokens, at)

    @property
    def enabled(self) -> bool:
        return self._rate > 0

    def allow(self, principal: str) -> bool:
        if not self.enabled:
            return True
        now = self._clock()
        tokens, at = self._buckets.pop(principal, (self._burst, now))
        tokens = min(self._burst, tokens + (now - at) * self._rate)
        allowed = tokens >= 1.0
        self._buckets[principal] = (tokens - 1.0 if allowed else tokens, now)
        while len(self._buckets) > self._max:
            self._buckets.popitem(last=False)
        return allowed

    def exhausted(self, principal: str) -> bool:
        """Would `allow(principal)` refuse now? (Takes nothing from the bucket.)"""
        if not self.enabled or principal not in self._buckets:
            return False
        tokens, at = self._buckets[principal]
        return min(self._burst, tokens + (self._clock() - at) * self._rate) < 1.0

    def retry_after(self, principal: str) -> float:
        """Seconds until `principal` has a token again."""
        tokens, _ = self._buckets.get(principal, (self._burst, 0.0))
        return max(0.0, (1.0 - tokens) / self._rate) if self.enabled else 0.0
