"""Two JAX versions' warm pools share one machine: real jails, the pools' own accounting.

The second pool is made exactly as the versioned pool makes another version's
(``pool_for_environment``), here over the default environment: what is tested is
the budget, not the other JAX. Every zygote a pool starts and every run it takes is
checked against the one budget the moment it happens (the pools' ``_spawn`` and
``submit`` are wrapped), not sampled.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from sandbox.environments.versions import default_environment
from sandbox.jail.jail import Jailer
from sandbox.jail.settings import JailConfig
from sandbox.pool.base import PoolFull
from sandbox.pool.versioned import pool_for_environment
from sandbox.pool.zygote_pool import ZygotePool
from sandbox.protocol import RunRequest
from tests.support.live_pool import TEST_LIMITS, TEST_POOL, needs_bwrap

pytestmark = [needs_bwrap, pytest.mark.slow]

CODE = "def f(x):\n    return x * 2\n"


def request() -> RunRequest:
    return RunRequest(code=CODE, args="(1.0,)", outputs=["jaxpr"])


def test_two_versions_never_exceed_the_machines_places_or_zygotes() -> None:
    settings = replace(TEST_POOL, pool_size=2, pool_running=1, pool_spares=0, pool_per_tenant=1)
    env = default_environment()
    assert env is not None
    most = {"zygotes": 0, "running": 0}
    seen: list[str] = []

    def watched(pool: ZygotePool, name: str) -> None:
        spawn, submit = pool._spawn, pool.submit

        def counted() -> None:
            budget = pool.budget
            most["zygotes"] = max(most["zygotes"], budget.held())
            most["running"] = max(most["running"], len(budget.running()))
            assert budget.held() <= budget.zygotes, budget.describe()
            assert len(budget.running()) <= budget.places, budget.describe()

        def spawning(tenant: str | None) -> Any:
            z = spawn(tenant)
            seen.append(f"{name}:{tenant}")
            counted()
            return z

        async def submitting(req: RunRequest, tenant: str, **kw: Any) -> Any:
            run = await submit(req, tenant, **kw)
            counted()
            return run

        pool._spawn = spawning  # type: ignore[method-assign, assignment]
        pool.submit = submitting  # type: ignore[method-assign, assignment]

    async def run(pool: ZygotePool, tenant: str) -> dict[str, Any]:
        handle = await pool.submit(request(), tenant)
        events = [e async for e in handle.events()]
        return events[-1]

    async def scenario() -> None:
        base = ZygotePool(Jailer(TEST_LIMITS, JailConfig()), settings)
        other = pool_for_environment(base, env)  # another version's pool
        assert isinstance(other, ZygotePool) and other.budget is base.budget
        watched(base, "default")
        watched(other, "other")
        await base.start()
        await other.start()
        try:
            # one place for both versions: a run of one makes the other's PoolFull
            first = await base.submit(request(), "addr:a")
            with pytest.raises(PoolFull, match="runs in progress"):
                await other.submit(request(), "addr:x")
            assert [e async for e in first.events()][-1]["status"] == "ok"
            assert (await run(base, "addr:b"))["status"] == "ok"
            assert len(base.zygotes) == 2  # the default version holds the whole budget
            a = next(z for z in base.zygotes if z.tenant == "addr:a")
            # the other version needs a zygote: the default's least recently used idle
            # one (it holds more than its share) gives way, none beyond the budget
            assert (await run(other, "addr:c"))["status"] == "ok"
            assert a.state == "retired" and a not in base.zygotes
            assert [z.tenant for z in base.zygotes] == ["addr:b"]
            assert [z.tenant for z in other.zygotes] == ["addr:c"]
            # at its share now, the other version evicts its own, not the default's
            assert (await run(other, "addr:d"))["status"] == "ok"
            assert [z.tenant for z in base.zygotes] == ["addr:b"]
            assert [z.tenant for z in other.zygotes] == ["addr:d"]
        finally:
            await other.close()
            await base.close()
        assert base.budget.pools == []

    asyncio.run(scenario())
    assert seen == ["default:addr:a", "default:addr:b", "other:addr:c", "other:addr:d"]
    assert most == {"zygotes": 2, "running": 1}


def test_the_versioned_pool_reports_the_budget(tmp_path: Any) -> None:
    """/metrics reads the pool's flat figures: the budget's, over every version."""
    from sandbox.pool.versioned import VersionedPool

    async def go() -> dict[str, Any]:
        base = ZygotePool(
            Jailer(TEST_LIMITS, JailConfig()), replace(TEST_POOL, pool_size=3, pool_running=2)
        )
        return VersionedPool(base, default_version="0.99.0", versions_dir=tmp_path).stats()

    stats = asyncio.run(go())
    assert stats["budget_places"] == 2 and stats["budget_zygotes"] == 3
    assert stats["budget_running"] == 0 and stats["budget_held"] == 0
    assert stats["capacity"] == 2 and stats["size"] == 3
