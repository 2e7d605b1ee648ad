"""A spare started while another is ready is made in the CPU time runs leave (its
jail's cgroup at the least CPU weight: Jail.run_in_background), so that a run never
shares its CPU with a spare's start at equal weight; a zygote is at full weight from
the moment it is picked for a run, and every spare still starting is too once none is
ready (someone may be waiting for the next). Real fork-jails and their cgroups."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from sandbox.jail.jail import Jailer
from sandbox.jail.settings import JailConfig
from sandbox.pool import zygote_pool
from sandbox.pool.settings import PoolSettings
from sandbox.pool.zygote_pool import ZygotePool
from sandbox.protocol import RunRequest
from sandbox.zygote.handle import Zygote
from sandbox.zygote.run import ZygoteRun
from tests.gates import needs_jail
from tests.support.live_pool import TEST_LIMITS

pytestmark = needs_jail

SETTINGS = PoolSettings(pool_size=6, pool_running=2, pool_spares=2, pool_per_tenant=1)
REQUEST = RunRequest.model_validate({"code": "def f(x):\n    return x\n", "args": "(1.0,)"})


def weight(z: Zygote) -> str:
    """``full`` or ``background``, read from the jail's cgroup itself."""
    group = z.jail.cgroup
    assert group is not None
    if group.version == 1:
        path, full, low = group.dirs.get("cpu", Path("/nonexistent")) / "cpu.shares", "1024", "2"
    else:
        path, full, low = group.dirs[""] / "cpu.weight", "100", "1"
    if not path.exists():
        pytest.skip(f"the jails' cgroups have no CPU controller here ({path} is missing)")
    value = path.read_text().strip()
    assert value in (full, low), value
    return "full" if value == full else "background"


async def _new_spare(pool: ZygotePool, besides: Zygote) -> Zygote:
    """The spare the refiller starts (it runs on the pool's next tick)."""
    for _ in range(500):
        found = [z for z in pool.zygotes if z.tenant is None and z is not besides]
        if found and found[0].jail.cgroup is not None:
            return found[0]
        await asyncio.sleep(0.01)
    raise AssertionError("no spare was started in the taken one's place")


@contextlib.asynccontextmanager
async def _pool_with_spares() -> AsyncIterator[tuple[ZygotePool, Zygote, Zygote]]:
    """A fork-jail pool with its two spares ready, the older first; closed after."""
    pool = ZygotePool(Jailer(TEST_LIMITS, replace(JailConfig(), fork_jails=True)), SETTINGS)
    await pool.start()
    try:
        await pool.ready()
        first, second = sorted((z for z in pool.zygotes if z.tenant is None), key=lambda z: z.born)
        yield pool, first, second
    finally:
        await pool.close()


async def _ok(run: ZygoteRun) -> None:
    assert [e["status"] async for e in run.events() if e.get("type") == "done"] == ["ok"]


async def _scenario() -> None:
    async with _pool_with_spares() as (pool, first, second):
        # the first was started with no spare ready, the second while the first was
        assert (weight(first), weight(second)) == ("full", "background")

        # a new tenant takes the older ready spare: at full weight before its run is sent
        run = await pool.submit(REQUEST, "a|1")
        assert first.run is run and weight(first) == "full"
        # its replacement starts while `second` is ready: in the background
        third = await _new_spare(pool, besides=second)
        assert weight(third) == "background"

        # the last ready spare is taken: it and every spare still starting go full weight
        other = await pool.submit(REQUEST, "b|1")
        assert second.run is other and weight(second) == "full"
        if third.state == "starting":
            assert weight(third) == "full"
        await _ok(run)
        await _ok(other)


def test_spares_made_while_another_is_ready_give_way_to_runs() -> None:
    asyncio.run(_scenario())


async def _starved() -> None:
    async with _pool_with_spares() as (pool, _, second):
        run = await pool.submit(REQUEST, "a|1")  # takes the first; `second` stays ready
        third = await _new_spare(pool, besides=second)  # started in the background
        await asyncio.shield(third.ready)
        # a start takes longer than BACKGROUND_S here: it went on at full weight (left
        # in the background, a ready spare stays there until it is picked: see above)
        assert third.state == "idle" and weight(third) == "full"
        await _ok(run)


def test_a_spare_starved_in_the_background_is_made_at_full_weight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No spare stays in the background past ``BACKGROUND_S``: else, starved by runs, its
    warm child could still be warming when the zygote says ready (main.py's WARM_S), or
    its start be killed as failed (pool_start_s). Here every start outlasts the bound."""
    monkeypatch.setattr(zygote_pool, "BACKGROUND_S", 0.001)
    asyncio.run(_starved())
