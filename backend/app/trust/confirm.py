"""Pristine runs: the only evidence that lets one person's answer reach another.

A tenant's run leaves a *candidate* in the result cache (backend/app/trust/cache.py), served
to no one. This service runs the same request again as a **pristine run**: the pool
makes it in a fresh process of a jail that never served a tenant, exactly as a new
client's first run (its code cannot tell), and retires that jail afterwards
(``submit_pristine``: the pools' MakesPristineRuns capability, docs/sandbox.md).
Nothing a tenant did earlier —
in its process, its jail's files, its compilation cache, its event channel — can reach
that run, so when it shows exactly what the candidate showed, the entry is confirmed
(and the pristine run's output is what is served). When it shows anything else, its
own output becomes the candidate and a second pristine run decides: the key is
unstable only when two pristine runs disagree (a tenant's run, forged or not, never
makes it so: it can only ask).

It is low priority, fair and bounded (backend/app/trust/pristine_lines.py): only while no
tenant waits for a place, ``pristine_concurrency`` at once (2 by default), a line per
client group served in turn, one run at a time per group, each group capped and
charged for the pristine seconds it asked for; an ask past a group's cap or budget
is refused, nobody else's key dropped. A request joins a pristine run only once it
runs, never one waiting in line (it runs at once instead). A pool that cannot make
pristine runs (Redis workers: a
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

from backend.app.core.logs import fields, get_logger
from backend.app.core.metrics import Metrics
from backend.app.core.settings import Settings
from backend.app.storage.base import CANDIDATE
from backend.app.tenancy.admission import Admission
from backend.app.trust.cache import KeptEvents, ResultCache
from backend.app.trust.pristine_lines import PristineLines, TimeBudget
from sandbox.pool.base import MakesPristineRuns, Pool, PoolFull, SignalsFree, submit_pristine
from sandbox.protocol import BadEvent, RunRequest, ValidEvent, validate_event

log = get_logger("confirm")

#: Who a pristine run is for, in the pool's logs (no tenant can be named so: tenants
#: are ``GROUP|NAME`` with a hashed group, backend/app/tenancy/identity.py).
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
    #: its run disagreed with a tenant's candidate: the next pristine run decides
    again: bool = False
    #: when it was first asked for (the wait until its run starts is logged)
    asked: float = field(default_factory=time.monotonic)


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
            cache.enabled
            and settings.pristine_concurrency > 0
            and isinstance(pool, MakesPristineRuns)
        )
        self._lines: PristineLines[_Job] = PristineLines(
            settings.pristine_per_group,
            settings.pristine_queue,
            TimeBudget(settings.pristine_budget_s, settings.pristine_refill_per_minute_s),
        )
        # sampled at each scrape
        metrics.pristine_line.labels("waiting").set_function(lambda: self._lines.waiting)
        metrics.pristine_line.labels("running").set_function(lambda: self._lines.running)
        #: workers waiting for a key to run (``_dispatch`` hands them one)
        self._idle: list[asyncio.Future[tuple[str, _Job]]] = []
        self._tasks: list[asyncio.Task[None]] = []
        #: set when the pool says a place freed or a spare is ready (``_pool_freed``)
        self._room = asyncio.Event()
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
        if isinstance(self.pool, SignalsFree):  # a place freed or a spare is ready
            self.pool.on_free(self._pool_freed)
        self._tasks = [
            loop.create_task(self._work()) for _ in range(self._settings.pristine_concurrency)
        ]

    async def close(self) -> None:
        self._idle.clear()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for job in self._lines.clear():
            if not job.done.done():
                job.done.set_result(None)

    # --- asking -------------------------------------------------------------------
    def ask(self, request: RunRequest, key: str, group: str) -> bool:
        """Ask for a pristine run of ``request`` for the entry under ``key``, on behalf
        of client ``group`` (``turns.group_of``: who pays for it). True when it
        waits or runs (once, however often asked); False when refused (the group's cap
        or budget, the lines full: pristine_lines.py) or pristine runs are off."""
        if not self.enabled:
            return False
        asked = self._lines.ask(key, group, lambda: _Job(request, key))
        if asked:
            self._metrics.pristine_asks.labels("queued").inc()
            self._dispatch()
        else:
            self._metrics.pristine_asks.labels(self._lines.last_refusal or "off").inc()
        return asked

    def running(self, key: str) -> asyncio.Future[None] | None:
        """The end of ``key``'s pristine run if one has started, else None: a request
        joins only a pristine run that is already running, never one still waiting
        in line (it runs at once instead)."""
        entry = self._lines.entry(key)
        if entry is None or entry.charged is None:
            return None
        return entry.job.done

    def stats(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "waiting": self._lines.waiting,
            "running": self._lines.running,
            "wall_s": round(self.wall_s, 3),
            **self.counts,
            **{f"refused_{why}": n for why, n in self._lines.refused.items()},
        }

    # --- the work -----------------------------------------------------------------
    def _pool_has_room(self) -> bool:
        """Low priority: a pristine run starts only while no tenant waits for a place."""
        if self._admission.queue_length() > 0:
            return False
        stats = self.pool.stats()
        running, capacity = stats.get("running"), stats.get("capacity")
        return not (isinstance(running, int) and isinstance(capacity, int) and running >= capacity)

    def _pool_freed(self) -> None:
        self._room.set()
        self._dispatch()

    def _dispatch(self) -> None:
        """Hand the next keys, by turns, to the idle workers while the pool has room:
        at once when asked, so that a key asked for while a worker is idle has started
        before the next request for it looks (that one joins it)."""
        while self._idle and self._lines.waiting and self._pool_has_room():
            picked = self._lines.next()
            if picked is None:  # every waiting group holds a run or is in debt
                return
            self._idle.pop().set_result(picked)

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            offered: asyncio.Future[tuple[str, _Job]] = loop.create_future()
            self._idle.append(offered)
            self._dispatch()
            # nothing to start now: an ask hands one over, or look again soon (a place
            # may free, a group's run end, its budget refill)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(offered), RETRY_S)
            if not offered.done():
                self._idle.remove(offered)
                continue
            key, job = offered.result()
            entry = self._lines.entry(key)
            group = entry.charged if entry is not None else None
            began = time.monotonic()
            try:
                started = await self._run(job)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("confirm.failed", extra=fields(error=repr(exc)))
                started = True
                self.counts["failed"] += 1
                self._metrics.pristine.labels("failed").inc()
            if not started:  # the pool was full after all: back in line, first
                self._lines.put_back(key)
                self._room.clear()  # until the pool says a place or a spare is free
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._room.wait(), RETRY_S)
                continue
            self._lines.finish(key, time.monotonic() - began)
            if job.again and group is not None:
                self.ask(job.request, key, group)
            if not job.done.done():
                job.done.set_result(None)

    async def _run(self, job: _Job) -> bool:
        """One pristine run and its evidence; False when the pool had no place. A run
        that disagreed with a tenant's candidate leaves its own output as the candidate
        and asks for the next pristine run (``_work``, on the same group's behalf): only
        two pristine runs that disagree make a key unstable."""
        try:
            handle = await submit_pristine(self.pool, job.request, PRISTINE_TENANT)
        except PoolFull:
            self.counts["no_place"] += 1  # no ready spare, or the places all taken
            return False
        started = time.monotonic()
        log.info(
            "confirm.start", extra=fields(key=job.key[:16], waited_s=round(started - job.asked, 3))
        )
        events = await self._collect(handle, job.request)
        self.wall_s += time.monotonic() - started
        self.counts["runs"] += 1
        if events is None:
            self.counts["no_evidence"] += 1
            self._metrics.pristine.labels("no_evidence").inc()
            return True
        recorded = await self._cache.record_pristine(job.request, job.key, handle.run_id, events)
        outcome = recorded.state if recorded is not None else "no_evidence"
        # Its output is the candidate now (it disagreed with a tenant's, or that one had
        # been trimmed): the next pristine run decides.
        job.again = recorded is not None and recorded.state == CANDIDATE
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
