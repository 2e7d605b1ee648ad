"""A real jailed warm pool on its own event loop (LivePool, make_live_pool, and the
fixtures tests/conftest.py offers every test: live_pool and degraded_pool, a pool per
module, and shared_pool, one pool for the session), and the checks that nothing of a
run is left behind."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from sandbox.jail.jail import TEARDOWN_S, Hardening, Jailer, lock_uid
from sandbox.jail.procstate import processes_by_uid
from sandbox.jail.settings import GiB, JailConfig, JailLimits, KiB, MiB
from sandbox.pool.settings import PoolSettings
from sandbox.pool.zygote_pool import ZygotePool
from sandbox.protocol import RunRequest
from tests.gates import needs_jail, skip_without_jail

#: the jail gate's mark (tests/gates.py): skipped without bubblewrap on a developer's
#: machine; where the jail is demanded (CI=true) the session fails at its start instead
needs_bwrap = needs_jail

#: Small limits so that every hostile case ends fast.
TEST_LIMITS = JailLimits(
    max_wall_s=10.0,
    memory_bytes=1 * GiB,
    data_bytes=768 * MiB,
    output_bytes=256 * KiB,
    event_bytes=8 * MiB,
    tmp_bytes=32 * MiB,
    cpus=1,
)
TEST_POOL = PoolSettings(pool_size=6, pool_running=2, pool_spares=2, pool_per_tenant=2)

#: Planted in the supervisor's environment: user code must never see it.
CANARY = "sk-jaxplay-canary-7f3a9c"
os.environ["JAXPLAY_TEST_CANARY_SECRET"] = CANARY


@dataclass
class Result:
    events: list[dict[str, Any]]
    elapsed_s: float
    zygote: str = ""
    done: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.done = self.events[-1]
        assert self.done["type"] == "done", self.events[-5:]
        assert sum(e["type"] == "done" for e in self.events) == 1

    @property
    def status(self) -> str:
        return str(self.done["status"])

    @property
    def out(self) -> str:
        return "".join(e["text"] for e in self.events if e["type"] in ("stdout", "stderr"))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]


class LivePool:
    """A ZygotePool driven from synchronous tests through its own event loop."""

    #: How long a retired jail's processes may take to be gone, once its bubblewrap is.
    #: Without cgroups nothing waits for them: a fork bomb's thousands of processes
    #: take seconds to tear down (its uid is not handed out again meanwhile).
    teardown_s = TEARDOWN_S

    def __init__(self, pool: ZygotePool) -> None:
        self.pool = pool
        self.loop = asyncio.new_event_loop()

    def call(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def run(self, code: str, tenant: str = "t", **request: Any) -> Result:
        request.setdefault("outputs", ["jaxpr"])
        request.setdefault("args", "(1.0,)")
        if "def f(" not in code:
            code += "\n\ndef f(x):\n    return x\n"
        req = RunRequest(code=code, **request)

        async def go() -> Result:
            started = time.monotonic()
            run = await self.pool.submit(req, tenant)
            events = [e async for e in run.events()]
            return Result(events, time.monotonic() - started, run.zygote_id)

        return self.call(go())

    def strays(self) -> list[str]:
        """Processes or cgroups of this pool's jails that should not exist now."""
        self.call(self.pool.drain())
        problems = []
        cgroups = self.pool.jailer.cgroups
        live = {z.jail.cgroup.main for z in self.pool.zygotes if z.jail.cgroup is not None}
        if cgroups.main_root is not None:
            for d in cgroups.main_root.glob(cgroups.prefix + "*"):
                if d not in live:
                    problems.append(f"{d} outlived its zygote")
        for z in self.pool.zygotes:
            if z.jail.cgroup is not None and z.state == "idle":
                pids = z.jail.cgroup.pids()
                if len(pids) > 4:  # bwrap, its pid-1 helper, the zygote, its warm child
                    problems.append(f"{z}: {len(pids)} processes in an idle jail")
        # By uid, which works without cgroups too: each jail has its own. A retired
        # jail's processes may still be exiting (out of its cgroup already, or without
        # one): they get the teardown time to be gone. A uid that another jaxplay
        # process on this host holds (tests running in parallel) is not ours to judge.
        jailer = self.pool.jailer
        if jailer.slots is not None:
            deadline = time.monotonic() + self.teardown_s
            while True:
                held = {z.jail.user[0]: z for z in self.pool.zygotes if z.jail.user is not None}
                by_uid = processes_by_uid()
                left = {uid: len(by_uid.get(uid, [])) for uid, _ in jailer.users}
                leftovers = [
                    f"{n} processes of the free jail uid {uid}"
                    for uid, n in left.items()
                    if n and uid not in held and not_elsewhere(uid)
                ]
                if not leftovers or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            problems += leftovers
            for uid, z in held.items():
                if z.state == "idle" and left.get(uid, 0) > 4:
                    problems.append(f"{z}: {left[uid]} processes of its uid {uid} in an idle jail")
        return problems

    def close(self) -> None:
        async def close() -> None:
            task = asyncio.create_task(self.pool.close())
            done, _ = await asyncio.wait([task], timeout=20)
            if not done:
                for t in asyncio.all_tasks():
                    t.print_stack(limit=4)
                print(self.pool.zygotes, self.pool._retiring, self.pool._starting)
                raise TimeoutError("the pool did not close")

        self.call(close())
        self.loop.close()


def not_elsewhere(uid: int) -> bool:
    """Whether no other jaxplay process on this host holds jail uid ``uid`` now."""
    lock = lock_uid(uid)
    if lock is None:
        return False
    lock.close()
    return True


def make_live_pool(
    limits: JailLimits = TEST_LIMITS,
    settings: PoolSettings = TEST_POOL,
    config: JailConfig | None = None,
    hardening: Hardening | None = None,
) -> LivePool:
    live = LivePool.__new__(LivePool)
    live.loop = asyncio.new_event_loop()

    async def build() -> ZygotePool:
        pool = ZygotePool(Jailer(limits, config or JailConfig(), hardening), settings)
        await pool.start()
        await pool.ready()
        return pool

    live.pool = live.loop.run_until_complete(build())
    return live


def _opened_pool() -> Iterator[LivePool]:
    """A live pool with the tests' limits and settings, closed after its fixture's scope."""
    skip_without_jail()
    live = make_live_pool()
    try:
        yield live
    finally:
        live.close()


@pytest.fixture(scope="module")
def live_pool() -> Iterator[LivePool]:
    yield from _opened_pool()


@pytest.fixture(scope="session")
def _session_pool() -> Iterator[LivePool]:
    yield from _opened_pool()


@pytest.fixture(scope="module")
def shared_pool(_session_pool: LivePool) -> Iterator[LivePool]:
    """live_pool's pool (the same limits and settings), one for the session: for the
    modules whose checks are each about their own runs (what a run shows, what its
    tenant's next run shows), not about the pool (its zygotes, its processes, its
    counters: those modules take live_pool, a pool of their own). Each pool costs
    its spares' jails importing JAX, seconds a module. When a module ends, its
    tenants' zygotes retire, so the next module's tenants take spares as they would
    from a new pool."""
    live = _session_pool
    yield live

    async def end_turns() -> None:
        for tenant in {z.tenant for z in live.pool.zygotes if z.tenant is not None}:
            live.pool.end_turn(tenant)
        await live.pool.drain()

    live.call(end_turns())


#: The degraded mode: no cgroups, rlimits, per-jail uids and tmpfs sizes only.
DEGRADED = JailConfig(cgroup_root="none")


@pytest.fixture(scope="module")
def degraded_pool() -> Iterator[LivePool]:
    skip_without_jail()
    live = make_live_pool(config=DEGRADED)
    assert live.pool.jailer.cgroups.kind == "none"
    live.teardown_s = 30.0
    try:
        yield live
    finally:
        live.close()
