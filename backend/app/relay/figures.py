"""The service's public figures (``GET /api/v1/stats``, the ``/stats`` page): runs in
the last hour and day, the result cache's hit rate, and the first-output latency p50 and
p95, per JAX version, and a day's plot by the hour.

Each run that ends (backend/app/relay/service.py, ``RunStream``) leaves one ``RunRow``: when it
ended, the JAX version that answered it, whether the cache answered it, its status, and
the time from its key (the server's first step with the request) to its first IR event
(jaxpr, StableHLO or HLO), as the server saw it. Nothing else: no code, no tenant, no
address, so the figures cannot carry anyone's code or identity. Rows are buffered and
written to the storage (SQLite or PostgreSQL: every replica's rows, one set of figures)
every ``FLUSH_S`` seconds and when the figures are asked for; kept ``KEEP_S``.
The server's own runs (its probe, its report environments) are not counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from backend.app.core.errors import log_internal
from backend.app.storage.base import RunRow, Storage

FLUSH_S = 5.0
KEEP_S = 2 * 86_400.0
#: rows buffered at most between writes (a burst beyond it is counted, not kept)
MAX_BUFFER = 10_000
HOUR_S = 3600.0
DAY_S = 86_400.0
#: the IR events whose first arrival ends a run's first-output latency
IR_EVENTS = frozenset({"jaxpr", "stablehlo", "hlo"})


class RunStats:
    """``cache_s``: figures are made at most once in that many seconds (the route is
    public: a client asking in a loop costs one query, not one each)."""

    def __init__(self, storage: Storage, cache_s: float = 5.0) -> None:
        self._storage = storage
        self._cache_s = cache_s
        self._made: tuple[float, dict[str, Any]] | None = None
        self._making = asyncio.Lock()
        self._buffer: list[RunRow] = []
        self._lost = 0
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    def note(self, row: RunRow) -> None:
        if len(self._buffer) >= MAX_BUFFER:
            self._lost += 1
            return
        self._buffer.append(row)

    def start(self) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(FLUSH_S)
                await self.flush()

        self._task = asyncio.get_running_loop().create_task(loop())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        await self.flush()

    async def flush(self) -> None:
        async with self._lock:
            rows, self._buffer = self._buffer, []
            if not rows:
                return
            try:
                await self._storage.record_runs(rows, time.time() - KEEP_S)
            except Exception as exc:  # figures are not worth a failed run
                log_internal("storage.record_runs", exc)

    async def figures(self) -> dict[str, Any]:
        async with self._making:  # callers that come together share one making
            made = self._made
            if made is not None and time.monotonic() - made[0] < self._cache_s:
                return made[1]
            await self.flush()
            now = time.time()
            rows = await self._storage.run_rows(now - DAY_S)
            # a busy day is 10^5 rows: counted off the event loop, which serves runs
            answer = await asyncio.to_thread(figures, rows, now)
            self._made = (time.monotonic(), answer)
            return answer


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank percentile (``q`` in 0..1), or None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 1))  # ceil(n q), at least 1
    return round(ordered[int(rank) - 1], 1)


def _summary(rows: list[RunRow]) -> dict[str, Any]:
    latencies = [r.first_ir_ms for r in rows if r.first_ir_ms is not None]
    hits = sum(1 for r in rows if r.cached)
    return {
        "runs": len(rows),
        "cache_hits": hits,
        "cache_hit_rate": round(hits / len(rows), 4) if rows else None,
        "first_output_ms": {
            "count": len(latencies),
            "p50": percentile(latencies, 0.50),
            "p95": percentile(latencies, 0.95),
        },
    }


def _window(rows: Iterable[RunRow], since: float) -> dict[str, Any]:
    kept = [r for r in rows if r.at >= since]
    by_version: dict[str, list[RunRow]] = {}
    for r in kept:
        by_version.setdefault(r.jax_version, []).append(r)
    return {
        **_summary(kept),
        "per_version": {v: _summary(by_version[v]) for v in sorted(by_version)},
    }


@dataclass(frozen=True)
class HourBar:
    start: float
    runs: int
    cache_hits: int
    p50_ms: float | None
    p95_ms: float | None


def hours(rows: list[RunRow], now: float) -> list[HourBar]:
    """The last day by the hour, oldest first: 24 bars, the last ending now (one pass)."""
    start = now - DAY_S
    buckets: list[list[RunRow]] = [[] for _ in range(24)]
    for r in rows:
        if start <= r.at <= now:
            buckets[min(23, int((r.at - start) // HOUR_S))].append(r)
    bars = []
    for i, inside in enumerate(buckets):
        latencies = [r.first_ir_ms for r in inside if r.first_ir_ms is not None]
        bars.append(
            HourBar(
                start=start + i * HOUR_S,
                runs=len(inside),
                cache_hits=sum(1 for r in inside if r.cached),
                p50_ms=percentile(latencies, 0.5),
                p95_ms=percentile(latencies, 0.95),
            )
        )
    return bars


def figures(rows: list[RunRow], now: float) -> dict[str, Any]:
    return {
        "generated_at": now,
        "hour": _window(rows, now - HOUR_S),
        "day": _window(rows, now - DAY_S),
        "day_by_hour": [vars(bar) for bar in hours(rows, now)],
    }
