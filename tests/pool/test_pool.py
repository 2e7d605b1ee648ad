"""The warm pool's behaviour: spares, tenants, cancel, retirement, limits, stats."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sandbox.pool.base import PoolFull
from sandbox.protocol import RunRequest
from tests.support.live_pool import TEST_LIMITS, TEST_POOL, LivePool, make_live_pool, needs_bwrap
from tests.support.ports import wait_for
from tests.support.processes import alive, descendants

pytestmark = [needs_bwrap, pytest.mark.slow]

SMALL = "def f(x):\n    return x * 2\n"


@pytest.fixture(scope="module")
def small_pool() -> Iterator[LivePool]:
    """A second pool with tight retirement settings."""
    live = make_live_pool(
        settings=replace(
            TEST_POOL,
            pool_size=3,
            pool_spares=1,
            pool_max_runs=2,
            pool_idle_s=1.0,
            pool_per_tenant=1,
        )
    )
    try:
        yield live
    finally:
        live.close()


#: What the preloaded libraries (Flax, Optax, Equinox...) may add to an idle zygote
#: (docs/sandbox.md, "Imported before the run"), and what the zygote's own code may.
LIBRARIES_BUDGET_KIB = 80 * 1024
ZYGOTE_CODE_KIB = 16 * 1024

#: A fresh process that prepares JAX as a zygote does (imports, warmed tracing, no
#: backend), without the libraries: its resident memory in KiB.
JAX_ALONE = (
    "from sandbox.engine import api; api.prepare()\n"
    "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmRSS')))"
)


def jax_alone_rss_kib() -> int:
    """Measured on this machine, beside the pool: how much JAX itself takes differs
    between machines (a CI machine's zygote was 38 MB larger than this one's)."""
    out = subprocess.run(
        [sys.executable, "-c", JAX_ALONE],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return int(out.stdout.split()[-1])


def test_zygotes_are_warm_and_single_threaded(live_pool: LivePool) -> None:
    spares = [z for z in live_pool.pool.zygotes if z.tenant is None and z.state == "idle"]
    assert spares, live_pool.pool.zygotes
    budget = jax_alone_rss_kib() + LIBRARIES_BUDGET_KIB + ZYGOTE_CODE_KIB
    for z in spares:
        assert z.info is not None
        assert z.info.threads == 1  # forking is safe only with one thread
        # an idle warm worker is JAX, the preloaded libraries within their budget, and
        # the zygote: no more
        assert z.info.rss_kib < budget, (z.info.rss_kib, budget)


def test_a_new_tenant_gets_a_ready_spare(live_pool: LivePool) -> None:
    ready = {z.id for z in live_pool.pool.zygotes if z.tenant is None and z.state == "idle"}
    r = live_pool.run(SMALL, tenant="newcomer")
    assert r.status == "ok"
    assert r.zygote in ready
    assert [e["type"] for e in r.events][:1] == ["accepted"]
    assert r.of("jaxpr")[0]["text"].startswith("{ lambda")


def test_same_tenant_reuses_its_zygote(live_pool: LivePool) -> None:
    first = live_pool.run(SMALL, tenant="regular")
    second = live_pool.run(SMALL, tenant="regular")
    assert first.zygote == second.zygote


def test_warm_and_cold_children(live_pool: LivePool) -> None:
    first = live_pool.run(SMALL, tenant="warmth")
    zygote = next(z for z in live_pool.pool.zygotes if z.id == first.zygote)
    deadline = time.monotonic() + 20
    while not zygote.warm_child:  # the next child's backend warms up meanwhile
        assert time.monotonic() < deadline
        live_pool.call(asyncio.sleep(0.05))

    async def go(**request: object) -> tuple[bool, list[dict]]:
        run = await live_pool.pool.submit(
            RunRequest(code=SMALL, args="(1.0,)", **request), "warmth"
        )
        events = [e async for e in run.events()]
        return run.warm, events

    warm, events = live_pool.call(go())
    assert warm and events[-1]["status"] == "ok"
    # two devices: the warm child (started with one) cannot take it; a cold child does
    warm, events = live_pool.call(go(devices=2))
    assert not warm and events[-1]["status"] == "ok"
    assert events[0]["worker"]["devices"] == 2


def test_cancel_kills_the_run_but_keeps_the_zygote(live_pool: LivePool) -> None:
    async def go() -> tuple[list[dict], str]:
        await live_pool.pool.ready()  # a spare is up: the time below is the cancel's own
        run = await live_pool.pool.submit(
            RunRequest(
                code="import time\ntime.sleep(30)\n" + SMALL, args="(1.0,)", outputs=["jaxpr"]
            ),
            "canceller",
        )
        events = []
        started = time.monotonic()
        async for event in run.events():
            events.append(event)
            if event["type"] == "accepted":
                await asyncio.sleep(0.2)
                await run.cancel()
        # ended by the cancel (its status, below), long before its 30 s sleep would
        assert time.monotonic() - started < 20
        return events, run.zygote_id

    events, zygote = live_pool.call(go())
    assert events[-1]["status"] == "cancelled"
    after = live_pool.run(SMALL, tenant="canceller")
    assert after.status == "ok" and after.zygote == zygote
    assert live_pool.strays() == []


def test_a_timeout_retires_the_zygote(live_pool: LivePool) -> None:
    retired = live_pool.pool.retired
    live_pool.call(live_pool.pool.ready())  # a spare is up: the time below is the run's own
    r = live_pool.run("while True:\n    pass\n", tenant="looper", timeout_s=1)
    assert r.status == "timeout" and r.done["timeout_stage"] == "exec"
    assert r.done["reason"] == (
        "wall clock 1 s, reached in the exec stage (stages done: none); "
        "a longer timeout_s may let it finish"
    )
    # the request's 1 s ended it (the reason), not the limit's 10 s
    assert r.elapsed_s < TEST_LIMITS.max_wall_s
    # its zygote retired (under load another may too: a spare past its start's deadline)
    assert live_pool.pool.retired >= retired + 1
    assert all(z.id != r.zygote for z in live_pool.pool.zygotes)
    after = live_pool.run(SMALL, tenant="looper")
    assert after.status == "ok" and after.zygote != r.zygote
    assert live_pool.strays() == []


def test_request_timeout_is_capped_by_the_limit(live_pool: LivePool) -> None:
    run = live_pool.call(live_pool.pool.submit(RunRequest(code=SMALL, timeout_s=600), "capped"))
    assert run._wall_s == live_pool.pool.jailer.limits.max_wall_s
    live_pool.call(run.cancel())
    live_pool.call(_drain(run))


async def _drain(run: object) -> list[dict]:
    return [e async for e in run.events()]  # type: ignore[attr-defined]


def test_stats(live_pool: LivePool) -> None:
    stats = live_pool.pool.stats()
    assert stats["kind"] == "zygote"
    for key in (
        "zygotes",
        "size",
        "spares",
        "tenants",
        "running",
        "capacity",
        "runs",
        "retired",
        "moved",
        "jail",
    ):
        assert key in stats
    assert stats["jail"]["uid"] != 0
    # what the pool keeps ready, with no pristine run in progress: the settings' spares
    assert stats["spares_wanted"] == live_pool.pool.settings.spares(stats["size"]) >= 1
    # the zygotes said how their kept processes check themselves: in C where built
    from sandbox.zygote import watch as state_watch

    assert stats["identity_check"] == state_watch.IDENTITY_CHECK


def test_retire_after_max_runs(small_pool: LivePool) -> None:
    zygotes = [small_pool.run(SMALL, tenant="busy").zygote for _ in range(3)]
    assert zygotes[0] == zygotes[1] != zygotes[2]


def test_retire_when_idle(small_pool: LivePool) -> None:
    r = small_pool.run(SMALL, tenant="sleepy")
    deadline = time.monotonic() + 30  # idle for pool_idle_s (1 s), then retired
    while any(z.id == r.zygote for z in small_pool.pool.zygotes):
        assert time.monotonic() < deadline, "the idle zygote was not retired"
        small_pool.call(asyncio.sleep(0.05))
    assert small_pool.strays() == []


def test_per_tenant_limit(small_pool: LivePool) -> None:
    async def go() -> None:
        first = await small_pool.pool.submit(RunRequest(code=SMALL), "greedy")
        with pytest.raises(PoolFull):
            await small_pool.pool.submit(RunRequest(code=SMALL), "greedy")
        await first.cancel()
        await _drain(first)

    small_pool.call(go())


def test_close_leaves_nothing() -> None:
    live = make_live_pool(settings=replace(TEST_POOL, pool_spares=1))
    assert live.run(SMALL, tenant="x").status == "ok"
    cgroups = live.pool.jailer.cgroups
    jails = {z.jail.proc.pid for z in live.pool.zygotes if z.jail.proc is not None}
    processes = jails.union(*(descendants(pid) for pid in jails))
    assert len(processes) > len(jails), "no jail processes to watch"
    live.close()
    # with or without cgroups: every process of every jail is gone
    wait_for(lambda: not any(alive(p) for p in processes), 30, "the jails' processes to exit")
    # and with cgroups, every jail's cgroup
    assert (cgroups.kind == "none") == (cgroups.main_root is None), cgroups.kind
    left = [] if cgroups.main_root is None else list(cgroups.main_root.glob(cgroups.prefix + "*"))
    assert left == []


def test_a_runtime_under_tmp_survives_the_wipe() -> None:
    """A checkout under /tmp is bound into the jail's private /tmp: the wipe between
    runs removes what a run put around it, keeps the bind mount and the directories
    on the way to it, and the zygote stays warm."""
    from sandbox.jail.jail import Jailer
    from sandbox.jail.settings import JailConfig
    from sandbox.pool.zygote_pool import ZygotePool
    from tests.support.live_pool import TEST_LIMITS

    base = Path(tempfile.mkdtemp(prefix="jaxplay-runtime-"))  # the jail user must reach it
    lib = base / "deep" / "lib"
    lib.mkdir(parents=True)
    (lib / "data.txt").write_text("bound")
    for p in (base, base / "deep", lib, lib / "data.txt"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    jailer = Jailer(TEST_LIMITS, JailConfig())
    jailer.runtime = replace(jailer.runtime, ro_paths=(*jailer.runtime.ro_paths, str(lib)))
    live = LivePool.__new__(LivePool)
    live.loop = asyncio.new_event_loop()

    async def build() -> ZygotePool:
        pool = ZygotePool(jailer, replace(TEST_POOL, pool_spares=1))
        await pool.start()
        await pool.ready()
        return pool

    live.pool = live.call(build())
    try:
        a = live.run(
            f"import os\nopen({str(base / 'evil')!r}, 'w').write('x')\n"
            f"open({str(base / 'deep' / 'evil')!r}, 'w').write('x')\n"
            f"os.chmod({str(base)!r}, 0)\n",
            tenant="tmp",
        )
        assert a.status == "ok", a.events
        b = live.run(
            f"import os\nprint(sorted(os.listdir({str(base)!r})), sorted(os.listdir({str(base / 'deep')!r})),"
            f" open({str(lib / 'data.txt')!r}).read())\n",
            tenant="tmp",
        )
        assert b.status == "ok", b.events
        assert b.zygote == a.zygote  # not retired: the cleanup succeeded
        assert "['deep'] ['lib'] bound" in b.out, b.out
    finally:
        live.close()
        shutil.rmtree(base)


def test_a_cancel_before_the_run_starts_ends_it_cancelled(live_pool: LivePool) -> None:
    # The page cancels while a new tenant's zygote is still starting: the run ends
    # `cancelled`, not as a worker that "could not start".
    run = live_pool.call(live_pool.pool.submit(RunRequest(code=SMALL), "early-cancel"))
    live_pool.call(run.cancel())
    events = live_pool.call(_drain(run))
    assert [e["type"] for e in events] == ["done"]
    assert events[-1]["status"] == "cancelled", events[-1]
    after = live_pool.run(SMALL, tenant="early-cancel")
    assert after.status == "ok"
    assert live_pool.strays() == []


async def _retire(z: Any, why: str) -> None:
    z.retire(why)


def test_a_sandbox_gone_before_the_run_was_sent_hands_the_run_to_another(
    live_pool: LivePool,
) -> None:
    # A zygote that retires between the pick and the run being sent to it (its jail
    # died, say) ran none of the run's code: another zygote takes the run, once.
    run = live_pool.call(live_pool.pool.submit(RunRequest(code=SMALL, args="(1.0,)"), "moved-on"))
    first = run.zygote_id
    live_pool.call(_retire(run._zygote, "the test killed it"))
    events = live_pool.call(_drain(run))
    assert events[-1]["status"] == "ok", events
    assert run.zygote_id != first
    assert live_pool.strays() == []


def test_a_second_sandbox_gone_ends_the_run_with_both_reasons(live_pool: LivePool) -> None:
    run = live_pool.call(live_pool.pool.submit(RunRequest(code=SMALL, args="(1.0,)"), "unlucky"))
    live_pool.call(_retire(run._zygote, "the test killed the first"))
    repick = run.repick
    assert repick is not None

    def and_kill_the_second() -> Any:
        z = repick()
        z.retire("the test killed the second")
        return z

    run.repick = and_kill_the_second
    events = live_pool.call(_drain(run))
    assert [e["type"] for e in events] == ["done"]
    assert events[-1]["status"] == "error"
    assert "the test killed the second" in events[-1]["reason"], events[-1]
    assert "the test killed the first" in events[-1]["reason"], events[-1]
