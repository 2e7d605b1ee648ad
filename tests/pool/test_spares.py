"""A full pool keeps a spare ready for new clients (ZygotePool._refill): the least
recently used tenant zygote unused for pool_spare_after_idle_s gives its place.
Stand-ins for the zygotes and the budget: no jail."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

from sandbox.pool.settings import PoolSettings
from sandbox.pool.zygote_pool import ZygotePool
from sandbox.zygote.handle import PRISTINE


class StandIn(SimpleNamespace):
    def retire(self, why: str) -> None:
        self.state = "retired"
        self.why = why
        self.pool.zygotes.remove(self)


def full_pool(ages: dict[str, float], size: int) -> tuple[ZygotePool, dict[str, Any]]:
    pool = object.__new__(ZygotePool)
    pool.settings = PoolSettings(pool_spares=1, pool_spare_after_idle_s=30.0)
    pool._closing = False
    pool._listeners = []
    pool.zygotes = []
    pool.budget = SimpleNamespace(has_room=lambda: len(pool.zygotes) < size)
    pool.size = size
    now = time.monotonic()
    made = {}
    for tenant, age in ages.items():
        z = StandIn(
            pool=pool, tenant=tenant, state="idle", run=None, judging=False, last_used=now - age
        )
        pool.zygotes.append(z)
        made[tenant] = z
    spawned: list[Any] = []

    def spawn(tenant: str | None, background: bool = False) -> Any:
        z = StandIn(
            pool=pool,
            tenant=tenant,
            state="idle",
            run=None,
            judging=False,
            info=True,
            background=background,
        )
        z.ready = asyncio.get_running_loop().create_future()
        z.ready.set_result(None)
        pool.zygotes.append(z)
        spawned.append(z)
        return z

    pool._spawn = spawn  # type: ignore[method-assign]
    made["spawned"] = spawned
    return pool, made


def test_a_full_pool_gives_the_oldest_idle_tenants_place_to_a_spare() -> None:
    pool, z = full_pool({"a|1": 100.0, "a|2": 200.0, "b|1": 5.0}, size=3)
    asyncio.run(pool._refill())
    assert z["a|2"].state == "retired"  # the least recently used
    assert z["a|1"].state == "idle" and z["b|1"].state == "idle"
    assert [s.tenant for s in z["spawned"]] == [None]


def test_tenants_in_their_edit_loop_keep_their_zygotes() -> None:
    pool, z = full_pool({"a|1": 3.0, "b|1": 10.0, "c|1": 29.0}, size=3)
    asyncio.run(pool._refill())
    assert z["spawned"] == []
    assert all(z[t].state == "idle" for t in ("a|1", "b|1", "c|1"))


def test_busy_judging_and_pristine_zygotes_are_never_taken() -> None:
    pool, z = full_pool({"a|1": 100.0, "b|1": 100.0, PRISTINE: 100.0}, size=3)
    z["a|1"].run = object()
    z["b|1"].judging = True
    asyncio.run(pool._refill())
    assert z["spawned"] == []
    assert all(z[t].state == "idle" for t in ("a|1", "b|1", PRISTINE))


def test_with_room_nothing_is_evicted() -> None:
    pool, z = full_pool({"a|1": 100.0}, size=3)
    asyncio.run(pool._refill())
    assert z["a|1"].state == "idle"
    assert [s.tenant for s in z["spawned"]] == [None]


def test_beside_a_pristine_run_one_more_spare_is_made_and_each_says_it_is_ready() -> None:
    """A pristine run retires its zygote: a group keeping one running would take every
    spare as it is made, and another group's pristine run would wait for a jail."""
    pool, z = full_pool({"a|1": 100.0, PRISTINE: 1.0}, size=4)
    z[PRISTINE].run = object()
    told: list[str] = []
    pool.on_free(lambda: told.append("free"))

    async def refill() -> None:
        await pool._refill()
        await asyncio.sleep(0)  # the listeners are called soon after

    asyncio.run(refill())
    assert [s.tenant for s in z["spawned"]] == [None, None]  # pool_spares=1, and one more
    assert z["a|1"].state == "idle"  # room enough: nobody gave a place
    assert told == ["free", "free"]


def test_without_a_pristine_run_the_pool_keeps_its_spares_setting() -> None:
    pool, z = full_pool({"a|1": 100.0}, size=4)
    asyncio.run(pool._refill())
    assert [s.tenant for s in z["spawned"]] == [None]


def test_the_machine_sets_how_many_spares_wait_unless_the_setting_does() -> None:
    """-1 (the default): one per sixteen places of the pool, 1 to 4; a number set is
    kept, 0 included (no spare), but never more than the pool holds."""
    auto = PoolSettings(pool_spares=-1)
    assert [auto.spares(n) for n in (2, 16, 40, 64, 112, 400)] == [1, 1, 2, 4, 4, 4]
    assert PoolSettings().pool_spares == -1
    assert PoolSettings(pool_spares=0).spares(112) == 0
    assert PoolSettings(pool_spares=3).spares(112) == 3
    assert PoolSettings(pool_spares=9).spares(4) == 4


def test_a_pool_beside_the_default_keeps_one_spare_unless_one_is_set() -> None:
    """Another JAX version's or libraries' pool: the machine's spares are the
    default's; such a pool keeps one, or what an operator set."""
    from sandbox.pool.versioned import beside_the_default

    assert beside_the_default(PoolSettings()).spares(112) == 1
    assert beside_the_default(PoolSettings(pool_spares=3)).spares(112) == 3
    assert beside_the_default(PoolSettings(pool_spares=0)).spares(112) == 0
