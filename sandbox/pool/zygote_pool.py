"""The warm pool: jailed zygotes that imported JAX once; a run gets a forked child.

A zygote (main.py) lives in its own jail and serves one tenant only. Spares, bound
to no tenant yet, are kept ready so a new tenant never waits for ``import jax``.
Per run the pool reserves a zygote (handle.py) and returns its run's supervisor
(run.py). The zygote forks, the child runs the engine, and when it is gone the
zygote kills what it left and empties /tmp before it takes the next run. A child
whose run ended well and changed nothing it relies on may be kept for the tenant's
next run (``JAXPLAY_POOL_REUSE_RUNS``; watch.py).

A timeout, an output or event cap, the OOM killer, a zygote that dies or a cleanup
that fails: each kills the whole jail (SIGKILL from outside, cgroup emptied) and the
zygote is retired. A cancel only kills the run's child (the zygote stays), unless
that takes longer than a second. Zygotes also retire on idle time, run count and age.

A pristine run (``submit_pristine``, the MakesPristineRuns capability, issue 20) takes a ready spare that
never had a tenant (never an active tenant's place: issue 33), marks it ``PRISTINE``,
runs in a fresh child exactly as a new tenant's first run would (nothing in it tells
them apart), and retires the zygote and its jail after. So does a single-use
tenant's run (sandbox/protocol/tenants.py: a link's code, an address-only client):
its zygote serves that run only. Every run's
``accepted`` carries the worker its zygote described in its hello, before any run
(``Zygote.known_worker``), never the one the run's line claims.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import time
import uuid
from collections.abc import Callable
from typing import Any

from sandbox.jail.jail import Jailer
from sandbox.pool.base import PoolFull
from sandbox.pool.budget import Budget
from sandbox.pool.settings import PoolSettings, available_memory
from sandbox.protocol import RunRequest
from sandbox.protocol.tenants import is_single_use
from sandbox.supervisor import OutputLimits
from sandbox.zygote.handle import PRISTINE, Zygote, template_command
from sandbox.zygote.run import ZygoteRun

#: how often, at most, the pool's upkeep looks at memory, ages and idle times (s)
SWEEP_S = 1.0

log = logging.getLogger(__name__)


def tenant_group(tenant: str) -> str:
    """The client a tenant belongs to: tenants are ``GROUP|NAME`` (or just ``GROUP``),
    as the server names them (backend/app/tenancy/identity.py)."""
    return tenant.split("|", 1)[0]


#: the longest a spare starts in the background (Jail.run_in_background): a start
#: takes ~0.3 s of a CPU, so a spare still starting after this was starved by runs
BACKGROUND_S = 3.0


class ZygotePool:
    """Jailed warm zygotes on this machine; implements sandbox.pool.base.Pool."""

    def __init__(
        self,
        jailer: Jailer | None = None,
        settings: PoolSettings | None = None,
        *,
        budget: Budget | None = None,
    ) -> None:
        self.jailer = jailer or Jailer()
        self.settings = settings or PoolSettings()  # read at start-up and passed in
        self.size, self.max_running = self.settings.sizes(
            self.jailer.limits.memory_bytes, forked=self.jailer.config.fork_jails
        )
        per_run = self.jailer.limits.cpus
        if not self.settings.pool_running and 0 < per_run < len(self.jailer.cpus):
            # pinned jails of several CPUs: as many runs as fit side by side
            self.max_running = max(1, min(self.max_running, len(self.jailer.cpus) // per_run))
        slots = self.jailer.slots
        if slots is not None and self.size > slots:  # each zygote's jail holds a jail uid
            if self.settings.pool_size:  # asked for more than the host has uids for
                log.warning(
                    "pool size %d capped at JAXPLAY_JAIL_SLOTS=%d jail uids", self.size, slots
                )
            self.size, self.max_running = slots, min(self.max_running, slots)
        #: the machine's places and zygotes, shared with the pools of other JAX
        #: versions (sandbox/pool/budget.py); this pool's own sizes make a new one
        self.budget = budget if budget is not None else Budget(self.max_running, self.size)
        self.size, self.max_running = self.budget.zygotes, self.budget.places
        self.zygotes: list[Zygote] = []
        self.total_runs = 0
        self.retired = 0
        self.reused = 0  # runs served by a process kept from an earlier run
        self.moved = 0  # runs whose jail was moved to a free CPU first (_place)
        self.memory_retired = 0  # idle tenant zygotes retired for low memory
        self.pristine_runs = 0  # pristine runs (submit_pristine), each in a retired spare
        #: runs of single-use tenants (a link's code, an address-only client): each
        #: zygote retired after its one run (sandbox/protocol/tenants.py)
        self.single_use_runs = 0
        #: what the first zygote said its jail runs on (Zygote.known_worker's fallback)
        self.worker: dict[str, Any] | None = None
        self._listeners: list[Callable[[], None]] = []
        #: how kept processes check themselves (note_check); None until a zygote said
        self.identity_check: str | None = None
        self._seq = 0
        self._refiller: asyncio.Task[None] | None = None
        self._maintainer: asyncio.Task[None] | None = None
        self._swept_at = -math.inf
        self._wake = asyncio.Event()
        self._closing = False
        self._retiring: set[Zygote] = set()
        self._starting: set[asyncio.Task[None]] = set()

    # --- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        # the jails' own way in: with fork_jails, the template (started now, as the
        # first spare would) forks the check's jail
        fork = self.jailer.config.fork_jails
        await self.jailer.check(template_command(self.jailer) if fork else None)
        self.budget.join(self)
        self._maintainer = asyncio.create_task(self._maintain())
        self.changed()

    async def close(self) -> None:
        self._closing = True
        self.changed()
        tasks = [t for t in (self._maintainer, self._refiller) if t is not None]
        for task in tasks:
            task.cancel()
        for z in list(self.zygotes):
            z.retire("the pool is closing")
        await asyncio.gather(*tasks, *self._starting, return_exceptions=True)
        self.budget.leave(self)
        await self.drain()
        await self.jailer.close_templates()

    async def drain(self) -> None:
        """Wait until every retired jail is gone (its processes and cgroup)."""
        while self._retiring:
            await asyncio.gather(
                *(z.closed() for z in list(self._retiring)), return_exceptions=True
            )

    async def ready(self, timeout_s: float = 120.0) -> None:
        """Wait until the spares are up (tests and the benchmark use this)."""
        deadline = time.monotonic() + timeout_s
        while self._spares(ready_only=True) < self.settings.spares(self.size):
            if time.monotonic() > deadline:
                raise TimeoutError("the pool's spares did not start")
            await asyncio.sleep(0.05)

    # --- runs ---------------------------------------------------------------------

    async def submit(self, request: RunRequest, tenant: str) -> ZygoteRun:
        run = self._start_run(request, lambda: self._pick(tenant))
        self.single_use_runs += is_single_use(tenant)
        return run

    async def submit_pristine(self, request: RunRequest, asked_by: str) -> ZygoteRun:
        """A ready spare, a fresh child like any new tenant's, retired after
        (``_pick_pristine``); ``asked_by`` takes no zygote of its own."""
        run = self._start_run(request, self._pick_pristine)
        self.pristine_runs += 1
        return run

    def _start_run(self, request: RunRequest, pick: Callable[[], Zygote]) -> ZygoteRun:
        """The run of ``request``, reserved in the zygote ``pick`` takes (placed on CPUs
        clear of the running ones); ``pick`` again if that zygote goes before the run is
        sent to it."""
        if self._closing:
            raise PoolFull("the pool is closing", retry_after_s=5.0)
        running = self.budget.running()  # every JAX version's: one machine's places
        if len(running) >= self.budget.places:
            raise PoolFull(f"{len(running)} runs in progress", retry_after_s=1.0)
        z = pick()
        self._needed(z)
        self._place(z, running)
        jl = self.jailer.limits
        run = ZygoteRun(
            z,
            request,
            uuid.uuid4().hex,
            wall_s=min(request.timeout_s, jl.max_wall_s),
            limits=OutputLimits(output_bytes=jl.output_bytes, event_bytes=jl.event_bytes),
        )
        z.reserve(run)
        run.repick = lambda: self._repick(run, pick)
        self.changed()
        return run

    def _repick(self, run: ZygoteRun, pick: Callable[[], Zygote]) -> Zygote:
        """Another zygote for ``run``, whose own went before the run was sent to it
        (PoolFull if none is free now)."""
        if self._closing:
            raise PoolFull("the pool is closing", retry_after_s=5.0)
        z = pick()
        self._needed(z)
        self._place(z, [o for o in self.budget.running() if o.run is not run])
        z.reserve(run)
        self.changed()
        return z

    def _place(self, z: Zygote, running: list[Zygote]) -> None:
        """Put ``z``'s jail on CPUs no other run is using: jails are pinned (one CPU
        each by default) when they start, and two runs on one CPU would each go at half
        speed, with timings to match, while another CPU idles. Among the free CPUs,
        those where no other jail is starting or checking its kept process come first,
        then the jail's own. A jail that is starting (past the point where taskset
        still has to run) or has no cpuset stays where it is."""
        own = z.jail.cpus
        if own is None or (z.state == "starting" and z.jail.cgroup is not None):
            return
        taken = {c for o in running if o is not z for c in o.jail.cpus or ()}
        free = [c for c in self.jailer.cpus if c not in taken]
        if len(free) < len(own):
            return
        noisy = collections.Counter(
            c
            for o in self.budget.all_zygotes()
            if o is not z and (o.state == "starting" or o.judging)
            for c in o.jail.cpus or ()
        )
        best = sorted(free, key=lambda c: (noisy[c], c not in own, c))[: len(own)]
        if sorted(best) != sorted(own) and z.jail.move_to(best):
            self.moved += 1

    def _pick_pristine(self) -> Zygote:
        """A ready spare for a pristine run: a zygote that never had a tenant (its warm
        child ran jaxplay's warm-up only), in a jail that never served one. It is
        marked PRISTINE, which no tenant can be, and retires after the run. None
        ready: PoolFull (the server retries later); never a spare still starting, never
        a new one waited for, and never a tenant's zygote given up for one (issue 33):
        spares come from free places, or from the places of tenants idle for
        ``pool_spare_after_idle_s`` (the refiller, ``_spare_victim``), as for any new
        client, so a pristine run never costs an active tenant its warm process."""
        ready = [
            z
            for z in self.zygotes
            if z.tenant is None and z.run is None and z.state == "idle" and z.runs == 0
        ]
        if not ready:
            self.changed()  # the refiller starts a spare where it may
            raise PoolFull("no spare sandbox is ready for a pristine run", retry_after_s=2.0)
        z = min(ready, key=lambda z: z.born)
        z.take_for(PRISTINE)
        self.changed()  # the refiller starts a spare in its place
        return z

    def _pick(self, tenant: str) -> Zygote:
        mine = [z for z in self.zygotes if z.tenant == tenant]
        idle = [z for z in mine if z.state == "idle" and z.run is None]
        if idle:
            return max(idle, key=lambda z: z.last_used)
        if len(mine) >= self.settings.pool_per_tenant:
            raise PoolFull(f"{len(mine)} runs of this client in progress", retry_after_s=1.0)
        spares = [z for z in self.zygotes if z.tenant is None and z.run is None]
        if spares:
            z = min(spares, key=lambda z: (z.state != "idle", z.born))  # ready ones first
            z.take_for(tenant)
            return z
        if not self.budget.has_room():
            victim = self.budget.victim(self, tenant)
            if victim is None:
                raise PoolFull("every sandbox is busy", retry_after_s=1.0)
            victim.retire("evicted for a new client")
        return self._spawn(tenant)

    def _victim(self, tenant: str) -> Zygote | None:
        """The idle zygote a full pool gives up for ``tenant``, fairly between client
        groups (a tenant ``GROUP|NAME``: the server's client address or token; see
        ``tenant_group``): a group at its share (the pool's size over the groups
        holding zygotes) evicts only its own; otherwise the least recently used of
        a group over its share goes. So one client opening sessions without end takes
        its share of warm zygotes, never everyone's."""
        mine = tenant_group(tenant)
        held: dict[str, int] = {}
        for z in self.zygotes:
            if z.tenant is not None:
                held[tenant_group(z.tenant)] = held.get(tenant_group(z.tenant), 0) + 1
        share = max(1, self.size // len(held.keys() | {mine}))
        idle = [z for z in self.zygotes if z.state == "idle" and z.run is None and z.tenant]
        if held.get(mine, 0) >= share:
            idle = [z for z in idle if tenant_group(z.tenant or "") == mine]
        elif len(held.keys() - {mine}) > 0:
            idle = [z for z in idle if held[tenant_group(z.tenant or "")] > share] or [
                z for z in idle if tenant_group(z.tenant or "") != mine
            ]
        # else the group is alone in the pool, under its share of the pool's size but
        # with no room to grow (other JAX versions hold the rest of the machine's
        # budget): its own least recently used gives way, or no session of it would
        # ever start until those versions' pools close
        return min(idle, key=lambda z: z.last_used) if idle else None

    @property
    def tenant_slots(self) -> int:
        """How many tenants can hold a zygote at once: the server refuses a new tenant
        beyond it while they all use theirs (backend/app/tenancy/turns.py, TenantTurns)."""
        return self.size

    def end_turn(self, tenant: str) -> None:
        """``tenant``'s turn at the pool is over while others wait: its idle zygotes
        retire now, so a spare starts for the next tenant (a busy one goes when a new
        tenant needs it, as the least recently used)."""
        for z in list(self.zygotes):
            if z.tenant == tenant and z.state == "idle" and z.run is None:
                z.retire("its tenant's turn is over and others are waiting")

    # --- zygotes ------------------------------------------------------------------

    def _needed(self, z: Zygote) -> None:
        """``z`` takes a run: at full weight from now; and once no spare is ready, every
        spare still starting too (someone may be waiting for the next)."""
        z.jail.run_in_background(False)
        if self._spares(ready_only=True) == 0:
            for o in self.zygotes:
                if o.tenant is None and o.run is None:
                    o.jail.run_in_background(False)

    def _spawn(self, tenant: str | None, background: bool = False) -> Zygote:
        """A new zygote for ``tenant`` (None: a spare); ``background``: its jail takes
        only the CPU that runs leave (Jail.run_in_background)."""
        self._seq += 1
        z = Zygote(self, self._seq, tenant)
        z.jail.run_in_background(background)
        self.zygotes.append(z)
        task = asyncio.create_task(z.start())
        self._starting.add(task)
        task.add_done_callback(self._started)
        return z

    def _started(self, task: asyncio.Task[None]) -> None:
        self._starting.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved; a failed start was logged by retire()

    def forget(self, z: Zygote) -> None:
        if z in self.zygotes:
            self.zygotes.remove(z)
            self.retired += 1
            self._retiring.add(z)
            assert z._closed is not None
            z._closed.add_done_callback(lambda _: self._retiring.discard(z))
        self.changed()
        self.budget.changed()  # room for another version's spare

    def changed(self) -> None:
        self._wake.set()

    def note_check(self, kind: object) -> None:
        """Which implementation a zygote's kept processes check themselves with
        (watch.py): "c", or "python" (~10 ms more per run) where the
        extension was not built; said once in the log when it is not "c"."""
        kind = str(kind)[:16]
        if kind != self.identity_check and kind != "c":
            log.warning(
                "the kept processes' check runs in Python (%s): the C extension "
                "sandbox/zygote/_identity was not built (make setup builds it)",
                kind,
            )
        self.identity_check = kind

    def note_worker(self, worker: dict[str, Any]) -> None:
        """A zygote's hello said what its jail runs on: the pool's fallback for
        zygotes whose first warm child did not say it in time."""
        if self.worker is None:
            self.worker = worker

    def on_free(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` whenever a run's place frees (its run ended), so that a
        run waiting for one (the server's queue) starts at once, not when the ended
        run's events have all been relayed."""
        self._listeners.append(listener)

    def freed(self) -> None:
        self.budget.freed()  # a place of the machine's: runs of any version may wait
        if self not in self.budget.pools:  # closed (left the budget) as its run ended
            self.notify_free()

    def notify_free(self) -> None:
        loop = asyncio.get_running_loop()
        for listener in self._listeners:
            loop.call_soon(listener)

    def _spares(self, ready_only: bool = False) -> int:
        return sum(
            1
            for z in self.zygotes
            if z.tenant is None and z.run is None and (z.state == "idle" or not ready_only)
        )

    async def _maintain(self) -> None:
        # Ends on _closing rather than on cancellation alone: Python 3.11's wait_for
        # may swallow a cancel that arrives as the event fires.
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 1.0)
            self._wake.clear()
            if self._closing:
                return
            now = time.monotonic()
            if now - self._swept_at >= SWEEP_S:
                self._swept_at = now
                self._sweep(now)
            if self._refiller is None or self._refiller.done():
                self._refiller = asyncio.create_task(self._refill())

    def _sweep(self, now: float) -> None:
        """What changes by the second, not by the run: the memory guard, and zygotes
        past their age or their tenant's idle time retired. Once a second at most: the
        loop wakes on every run's start and end, and reading the machine's memory
        (/proc/meminfo, the cgroup's files) on each was a tenth of the server's own
        CPU under load (benchmarks/server/load_ws.py, profiled)."""
        s = self.settings
        self._relieve_memory()
        for z in list(self.zygotes):
            if z.state != "idle" or z.run is not None:
                continue
            if now - z.born > s.pool_max_age_s:
                z.retire(f"age over {s.pool_max_age_s:g} s")
            elif z.tenant is not None and now - z.last_used > s.pool_idle_s:
                z.retire(f"idle over {s.pool_idle_s:g} s")

    async def _refill(self) -> None:
        """Start spares one at a time (a forked jail and its warm child's warm-up take a
        core for tens of milliseconds; a bubblewrap jail's import of JAX, for seconds).
        With the budget full, a tenant's zygote unused for pool_spare_after_idle_s
        gives its place: else once the pool is full of idle tenants (a public page's
        one-time visitors) every new client would wait for a whole jail to start."""
        while not self._closing and self._spares() < self._spares_wanted():
            if not self.budget.has_room():
                victim = self._spare_victim()
                if victim is None:
                    return
                victim.retire("its place goes to a spare for new clients")
            # While another spare is ready nobody waits for this one: it is made in the
            # CPU time runs leave, and a run never shares its CPU with a spare's start
            # (a single-use run's replacement starts as the run starts).
            z = self._spawn(None, background=self._spares(ready_only=True) > 0)
            with contextlib.suppress(Exception):
                if z.jail.background:
                    try:
                        await asyncio.wait_for(asyncio.shield(z.ready), BACKGROUND_S)
                    except TimeoutError:
                        # starved by runs that long: made at full weight from now, so
                        # that it is never ready with its warm-up unfinished (main.py's
                        # WARM_S) nor killed as a start that failed (pool_start_s)
                        z.jail.run_in_background(False)
                await z.ready
            if z.state == "retired" and not z.info:  # failed to start: do not spin
                await asyncio.sleep(5.0)
            elif z.state == "idle":
                self.notify_free()  # a pristine run or a new client waiting may take it

    def _relieve_memory(self) -> None:
        """Under ``pool_min_available_bytes`` of available memory, the least recently
        used idle tenant zygote retires (one a tick: its memory is back only once its
        jail is gone, and the next tick reads the machine again). Its tenant's next
        run starts a new jail; nothing running is touched."""
        available = available_memory()
        if available is None or available >= self.settings.min_available_bytes():
            return
        victim = self._least_recently_used_tenant(unused_since=time.monotonic())
        if victim is not None:
            victim.retire(f"the machine's available memory is low ({available // 2**20} MiB)")
            self.memory_retired += 1

    def _spares_wanted(self) -> int:
        """The spares (``PoolSettings.spares``), and one more beside each pristine run
        in progress: a pristine run retires its zygote, so a client group that keeps
        one running (its cap) would otherwise take every spare as it is made, and
        another group's pristine run would wait for a jail to start (issue 33's
        flood)."""
        pristine = sum(1 for z in self.zygotes if z.tenant == PRISTINE)
        return self.settings.spares(self.size) + pristine

    def _spare_victim(self) -> Zygote | None:
        """This pool's least recently used tenant zygote, idle and unused for
        pool_spare_after_idle_s (None: each is in use or was lately): a tenant in its
        edit loop keeps its process."""
        return self._least_recently_used_tenant(
            unused_since=time.monotonic() - self.settings.pool_spare_after_idle_s
        )

    def _least_recently_used_tenant(self, unused_since: float) -> Zygote | None:
        """The least recently used of this pool's tenant zygotes that are idle (not
        running, not checking their last run) and unused since ``unused_since``; never
        a spare or a pristine run's."""
        idle = [
            z
            for z in self.zygotes
            if z.tenant not in (None, PRISTINE)
            and z.state == "idle"
            and z.run is None
            and not z.judging
            and z.last_used < unused_since
        ]
        return min(idle, key=lambda z: z.last_used) if idle else None

    def stats(self) -> dict[str, Any]:
        return {
            "kind": "zygote",
            "zygotes": len(self.zygotes),
            "size": self.size,
            "spares": self._spares(ready_only=True),
            "spares_wanted": self._spares_wanted(),
            "warm_children": sum(1 for z in self.zygotes if z.warm_child),
            "tenants": len({z.tenant for z in self.zygotes if z.tenant not in (None, PRISTINE)}),
            "running": sum(1 for z in self.zygotes if z.run is not None),
            "capacity": self.max_running,
            "runs": self.total_runs,
            "reused": self.reused,
            "moved": self.moved,
            "pristine_runs": self.pristine_runs,
            "single_use_runs": self.single_use_runs,
            "identity_check": self.identity_check,
            "retired": self.retired,
            "memory_retired": self.memory_retired,
            "jail": self.jailer.describe(),
        }
