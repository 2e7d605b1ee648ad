"""Admission control: who may start a run now, who waits, who is told to come back.

Three checks, in order, each answered with ``Retry-After``:
1. a token bucket per rate key (client address, or a known API token) -> 429;
2. runs in flight per tenant -> 429;
3. the pool: a run it cannot take now waits in a bounded FIFO queue per backend,
   at most ``queue_timeout_s``; a full queue, or a wait that runs out -> 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, deque
from dataclasses import dataclass, field

from backend.app.errors import Overloaded
from backend.app.metrics import Metrics
from backend.app.settings import Settings
from sandbox.pool.base import Pool, PoolFull, RunHandle
from sandbox.protocol import RunRequest


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """A token bucket per key: ``burst`` at once, refilled at ``per_minute``."""

    def __init__(self, per_minute: float, burst: int, max_keys: int = 100_000) -> None:
        self._rate = per_minute / 60.0
        self._burst = float(burst)
        self._buckets: dict[str, _Bucket] = {}
        self._max_keys = max_keys

    def take(self, key: str) -> float:
        """0 if a run may start now, else the seconds until one may."""
        if self._rate <= 0:
            return 0.0
        now = time.monotonic()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self._max_keys:
                self._forget_full(now)
            bucket = self._buckets[key] = _Bucket(self._burst, now)
        bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.updated) * self._rate)
        bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self._rate

    def _forget_full(self, now: float) -> None:
        full_after = self._burst / self._rate
        for key in [k for k, b in self._buckets.items() if now - b.updated >= full_after]:
            del self._buckets[key]


@dataclass
class Ticket:
    """A tenant's place among the runs in flight; ``release`` it exactly once."""

    tenant: str
    backend: str
    waited_s: float = 0.0
    released: bool = field(default=False)


class Admission:
    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self._s = settings
        self._metrics = metrics
        self._rate = RateLimiter(settings.rate_limit_per_minute, settings.rate_limit_burst)
        self._tenant_runs: Counter[str] = Counter()
        self._waiters: dict[str, deque[asyncio.Event]] = {}
        self._in_flight = 0

    # --- what /api/v1/backends shows -------------------------------------------------
    def queue_length(self, backend: str | None = None) -> int:
        if backend is not None:
            return len(self._waiters.get(backend, ()))
        return sum(len(q) for q in self._waiters.values())

    @property
    def in_flight(self) -> int:
        return self._in_flight

    # --- the checks ------------------------------------------------------------------
    def check_rate(self, rate_key: str) -> None:
        wait = self._rate.take(rate_key)
        if wait > 0:
            self._metrics.rejected.labels("rate").inc()
            raise Overloaded(
                429,
                "rate_limited",
                f"too many runs: at most {self._s.rate_limit_per_minute:g} a minute "
                f"(bursts of {self._s.rate_limit_burst}); try again in {wait:.1f} s",
                wait,
            )

    def enter(self, tenant: str, backend: str, limit: int | None = None) -> Ticket:
        limit = self._s.max_runs_per_tenant if limit is None else limit
        if self._tenant_runs[tenant] >= limit:
            self._metrics.rejected.labels("tenant").inc()
            raise Overloaded(
                429,
                "too_many_runs",
                f"this client already has {self._tenant_runs[tenant]} runs in progress (at most {limit})",
                1.0,
            )
        self._tenant_runs[tenant] += 1
        self._in_flight += 1
        self._metrics.in_flight.set(self._in_flight)
        return Ticket(tenant, backend)

    def release(self, ticket: Ticket) -> None:
        if ticket.released:
            return
        ticket.released = True
        self._tenant_runs[ticket.tenant] -= 1
        if self._tenant_runs[ticket.tenant] <= 0:
            del self._tenant_runs[ticket.tenant]
        self._in_flight -= 1
        self._metrics.in_flight.set(self._in_flight)
        self._wake(ticket.backend)

    def _wake(self, backend: str) -> None:
        # A run ended: the longest waiter tries the pool again (any backend's, when
        # backends share a pool: capacity freed for one is capacity for all).
        for name in [backend, *self._waiters]:
            queue = self._waiters.get(name)
            if queue:
                queue[0].set()
                return

    async def submit(self, pool: Pool, request: RunRequest, ticket: Ticket) -> RunHandle:
        """The pool's handle for the run, after waiting in the queue if need be."""
        backend = ticket.backend
        queue = self._waiters.setdefault(backend, deque())
        retry = 1.0
        if not queue:
            try:
                return await pool.submit(request, ticket.tenant)
            except PoolFull as exc:
                retry = exc.retry_after_s
        if len(queue) >= self._s.max_queue:
            self._metrics.rejected.labels("queue_full").inc()
            raise Overloaded(
                503,
                "server_busy",
                f"every worker is busy and {len(queue)} runs are waiting for {backend}; try again later",
                max(retry, 1.0),
            )
        started = time.monotonic()
        deadline = started + self._s.queue_timeout_s
        me = asyncio.Event()
        queue.append(me)
        self._metrics.queue.labels(backend).set(len(queue))
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._metrics.rejected.labels("queue_timeout").inc()
                    raise Overloaded(
                        503,
                        "server_busy",
                        f"no worker became free within {self._s.queue_timeout_s:g} s; try again later",
                        max(retry, 1.0),
                    )
                # The head of the queue retries when a run ends or after the pool's
                # own hint; the others wait their turn.
                head = queue[0] is me
                timeout = min(remaining, max(retry, 0.05)) if head else remaining
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(me.wait(), timeout)
                me.clear()
                if queue[0] is not me:
                    continue
                try:
                    handle = await pool.submit(request, ticket.tenant)
                except PoolFull as exc:
                    retry = exc.retry_after_s
                    continue
                ticket.waited_s = time.monotonic() - started
                self._metrics.queue_wait.observe(ticket.waited_s)
                return handle
        finally:
            was_head = bool(queue) and queue[0] is me
            queue.remove(me)
            self._metrics.queue.labels(backend).set(len(queue))
            if was_head and queue:
                queue[0].set()  # the next in line may find a free worker too
