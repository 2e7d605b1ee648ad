"""Pristine runs: the only evidence that lets one person's answer reach another.

A tenant's run leaves a *candidate* in the result cache (backend/app/cache.py), served
to no one. This service runs the same request again as a **pristine run**: the pool
makes it in a fresh process of a jail that never served a tenant, exactly as a new
client's first run (its code cannot tell), and retires that jail afterwards
(``Pool.submit(..., pristine=True)``; docs/sandbox.md). Nothing a tenant did earlier —
in its process, its jail's files, its compilation cache, its event channel — can reach
that run, so when it shows exactly what the candidate showed, the entry is confirmed
(and the pristine run's output is what is served); when it shows anything else, the
key is unstable for good.

It is low priority and bounded: one pristine run at a time by default
(``pristine_concurrency``), only while no tenant waits for a place, never more keys
waiting than ``pristine_queue`` (the oldest are forgotten: they are asked again when
their request runs again). A pool that cannot make pristine runs (Redis workers: a
remote worker's word that its run was pristine is no evidence) leaves every entry a
candidate: the cache then serves each person only their own answers' absence.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from backend.app.admission import Admission
from backend.app.cache import KeptEvents, ResultCache
from backend.app.logs import fields, get_logger
from backend.app.metrics import Metrics
from backend.app.settings import Settings
from sandbox.pool.base import Pool, PoolFull
from sandbox.protocol import BadEvent, RunRequest, ValidEvent, validate_event

log = get_logger("confirm")

#: Who a pristine run is for, in the pool's logs (no tenant can be named so: tenants
#: are ``GROUP|NAME`` with a hashed group, backend/app/tenancy.py).
PRISTINE_TENANT = "jaxplay:pristine"
#: How long to wait before asking a busy pool again.
RETRY_S = 0.5


@dataclass
class _Job:
    request: RunRequest
    key: str
    #: resolved when the job ends, for the identical requests waiting on it
    done: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Confirmer:
    def __init__(
        self,
        settings: Settings,
        pool: Pool,
        cache: ResultCache,
        admission: Admission,
        metrics: Metrics,
    ) -> None:
        self._settings = settings
        self.pool = pool
        self._cache = cache
        self._admission = admission
        self._metrics = metrics
        self.enabled = (
            cache.enabled and settings.pristine_concurrency > 0 and pool.makes_pristine_runs
        )
        self._waiting: collections.OrderedDict[str, _Job] = collections.OrderedDict()
        self._running: dict[str, _Job] = {}
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        #: counts for stats(): runs made, and what they did
        self.counts: collections.Counter[str] = collections.Counter()
        self.wall_s = 0.0  # the pristine runs' wall time, summed

    # --- lifecycle ----------------------------------------------------------------
    def start(self) -> None:
        if not self.enabled:
            if self._cache.enabled:
                log.warning(
                    "confirm.off",
                    extra=fields(
                        why="the pool cannot make pristine runs: no cache entry is ever "
                        "served to anyone but nobody (every run runs)"
                    ),
                )
            return
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._work()) for _ in range(self._settings.pristine_concurrency)
        ]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for job in [*self._waiting.values(), *self._running.values()]:
            if not job.done.done():
                job.done.set_result(None)
        self._waiting.clear()

    # --- asking -------------------------------------------------------------------
    def ask(self, request: RunRequest, key: str) -> asyncio.Future[None] | None:
        """Make a pristine run of ``request`` for the entry under ``key`` (once, however
        often asked while it waits or runs); answers a future resolved when it ended,
        or None when pristine runs are off."""
        if not self.enabled:
            return None
        job = self._running.get(key) or self._waiting.get(key)
        if job is not None:
            return job.done
        job = _Job(request, key)
        self._waiting[key] = job
        while len(self._waiting) > self._settings.pristine_queue:
            _, dropped = self._waiting.popitem(last=False)
            dropped.done.set_result(None)
            self.counts["dropped"] += 1
        self._wake.set()
        return job.done

    def pending(self, key: str) -> asyncio.Future[None] | None:
        job = self._running.get(key) or self._waiting.get(key)
        return None if job is None else job.done

    def stats(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "waiting": len(self._waiting),
            "running": len(self._running),
            "wall_s": round(self.wall_s, 3),
            **self.counts,
        }

    # --- the work -----------------------------------------------------------------
    def _pool_has_room(self) -> bool:
        """Low priority: a pristine run starts only while no tenant waits for a place."""
        if self._admission.queue_length() > 0:
            return False
        stats = self.pool.stats()
        running, capacity = stats.get("running"), stats.get("capacity")
        return not (isinstance(running, int) and isinstance(capacity, int) and running >= capacity)

    async def _work(self) -> None:
        while True:
            if not self._waiting:
                self._wake.clear()
                await self._wake.wait()
                continue
            if not self._pool_has_room():
                await asyncio.sleep(RETRY_S)
                continue
            key, job = self._waiting.popitem(last=False)
            self._running[key] = job
            try:
                started = await self._run(job)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("confirm.failed", extra=fields(error=repr(exc)))
                started = True
                self.counts["failed"] += 1
                self._metrics.pristine.labels("failed").inc()
            finally:
                self._running.pop(key, None)
            if not started:  # the pool was full after all: back in line, first
                self._waiting[key] = job
                self._waiting.move_to_end(key, last=False)
                await asyncio.sleep(RETRY_S)
                continue
            if not job.done.done():
                job.done.set_result(None)

    async def _run(self, job: _Job) -> bool:
        """One pristine run and its evidence; False when the pool had no place."""
        try:
            handle = await self.pool.submit(job.request, PRISTINE_TENANT, pristine=True)
        except PoolFull:
            return False
        started = time.monotonic()
        events = await self._collect(handle, job.request)
        self.wall_s += time.monotonic() - started
        self.counts["runs"] += 1
        if events is None:
            self.counts["no_evidence"] += 1
            self._metrics.pristine.labels("no_evidence").inc()
            return True
        recorded = await self._cache.record_pristine(job.request, job.key, handle.run_id, events)
        outcome = recorded.state if recorded is not None else "no_evidence"
        self.counts[outcome] += 1
        self._metrics.pristine.labels(outcome).inc()
        log.info("confirm.done", extra=fields(key=job.key[:16], outcome=outcome))
        return True

    async def _collect(self, handle: Any, request: RunRequest) -> list[dict[str, Any]] | None:
        """The run's accepted, shown events and done, or None when it is no evidence
        (``KeptEvents``) or went past its own deadline."""
        kept = KeptEvents(self._cache.max_entry_bytes)
        try:
            async with asyncio.timeout(request.timeout_s + self._settings.run_grace_s):
                async for item in handle.events():
                    event = item if type(item) is ValidEvent else validate_event(item)
                    kept.add(event)
                    if event["type"] == "done":
                        break
        except (TimeoutError, BadEvent):
            with contextlib.suppress(Exception):
                await handle.cancel()
            return None
        return kept.events()
