"""Token buckets: the rates admission holds a client to (runs, snippets, lookups of
unknown snippets, sessions issued), one bucket per key in a bounded map."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """A token bucket per key: ``burst`` at once, refilled at ``per_minute``.

    The buckets are kept least recently used first, so forgetting is O(1) per call:
    a bucket that refilled since its last use (it is as a new one) is dropped from the
    front as calls go by, and past ``max_keys`` the least recently used goes (it
    forgets a client that has been quiet longest, which then starts with a full
    burst: the price of a bounded map)."""

    def __init__(
        self,
        per_minute: float,
        burst: int,
        max_keys: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rate = per_minute / 60.0
        self._burst = float(burst)
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._max_keys = max_keys
        self._clock = clock

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, key: str) -> float:
        """0 if a run may start now (and it is counted), else the seconds until one may."""
        return self._check(key, take=True)

    def peek(self, key: str) -> float:
        """What ``take`` would answer, counting nothing."""
        return self._check(key, take=False)

    def _check(self, key: str, *, take: bool) -> float:
        if self._rate <= 0:
            return 0.0
        now = self._clock()
        self._forget(now)
        bucket = self._buckets.get(key)
        if bucket is None:
            while len(self._buckets) >= self._max_keys:
                self._buckets.popitem(last=False)
            bucket = self._buckets[key] = _Bucket(self._burst, now)
        else:
            self._buckets.move_to_end(key)
        bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.updated) * self._rate)
        bucket.updated = now
        if bucket.tokens >= 1.0:
            if take:
                bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self._rate

    def _forget(self, now: float) -> None:
        """Drop the buckets at the front that are full again (at most two a call: O(1),
        and the map still shrinks faster than one new key a call can grow it)."""
        full_after = self._burst / self._rate
        for _ in range(2):
            oldest = next(iter(self._buckets.values()), None)
            if oldest is None or now - oldest.updated < full_after:
                return
            self._buckets.popitem(last=False)
