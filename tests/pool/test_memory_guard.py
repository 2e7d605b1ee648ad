"""Low memory: the pool retires its least recently used idle tenant zygote while the
machine's available memory is under ``pool_min_available_bytes`` (sandbox/pool/
zygote_pool.py ``_relieve_memory``), never a spare or a running one, and the tenant's
next run starts a new jail. And the pool's size follows what an idle zygote holds."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path

import pytest

from sandbox.jail.settings import MiB
from sandbox.pool.settings import ZYGOTE_BYTES, PoolSettings, available_memory, machine
from tests.support.live_pool import TEST_POOL, make_live_pool, needs_bwrap

CODE = "def f(x):\n    return x * 2\n"


def test_available_memory_is_read_from_the_kernel() -> None:
    available = available_memory()
    assert available is not None
    assert 0 < available <= machine()[1]


def test_the_pool_is_sized_by_the_memory_an_idle_zygote_holds() -> None:
    memory = machine()[1]
    forked, _ = PoolSettings().sizes(1 << 30, forked=True)
    execd, _ = PoolSettings().sizes(1 << 30, forked=False)
    assert forked == max(2, memory * 3 // 4 // ZYGOTE_BYTES["fork"])
    assert execd == max(2, memory * 3 // 4 // ZYGOTE_BYTES["exec"])
    assert forked > execd  # a forked jail shares its template's pages
    assert PoolSettings(pool_size=3).sizes(1 << 30)[0] == 3  # a setting wins
    assert PoolSettings().min_available_bytes() == memory // 8
    assert PoolSettings(pool_min_available_bytes=5 * MiB).min_available_bytes() == 5 * MiB


@needs_bwrap
@pytest.mark.slow
def test_low_memory_retires_idle_tenant_zygotes_only() -> None:
    # a floor above any machine's memory: the machine is "low" all along
    live = make_live_pool(
        settings=replace(TEST_POOL, pool_size=4, pool_spares=1, pool_min_available_bytes=1 << 60)
    )
    try:
        first = live.run(CODE, tenant="g|a")
        assert first.status == "ok"
        deadline = time.monotonic() + 30
        while live.pool.memory_retired == 0 and time.monotonic() < deadline:
            live.call(asyncio.sleep(0.2))  # the pool's loop runs only inside calls
        assert live.pool.memory_retired >= 1
        assert not [z for z in live.pool.zygotes if z.tenant == "g|a" and z.state != "retired"]
        # spares are never its victims: the pool still makes and keeps one
        live.call(live.pool.ready(timeout_s=120))
        assert live.pool._spares(ready_only=True) >= 1
        again = live.run(CODE, tenant="g|a")  # a new jail for the tenant, and it runs
        assert again.status == "ok"
    finally:
        live.close()


@needs_bwrap
@pytest.mark.slow
def test_enough_memory_keeps_the_tenants_process() -> None:
    live = make_live_pool(
        settings=replace(TEST_POOL, pool_size=4, pool_spares=1, pool_min_available_bytes=1)
    )
    try:
        assert live.run(CODE, tenant="g|b").status == "ok"
        live.call(asyncio.sleep(3))  # three ticks of the pool's upkeep, on its loop
        assert live.pool.memory_retired == 0
        assert [z for z in live.pool.zygotes if z.tenant == "g|b" and z.state == "idle"]
        assert live.run(CODE, tenant="g|b").status == "ok"
        assert live.pool.reused >= 1  # the same process served its next run
    finally:
        live.close()


def test_a_containers_memory_limit_bounds_the_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sandbox.pool import settings

    limit, usage = tmp_path / "memory.max", tmp_path / "memory.current"
    monkeypatch.setattr(settings, "CGROUP_MEMORY_LIMITS", (str(limit),))
    monkeypatch.setattr(settings, "CGROUP_MEMORY_USAGE", (str(usage),))
    limit.write_text("max\n")
    assert settings.memory_limit() is None  # no limit: the host's memory
    limit.write_text(f"{2 << 30}\n")
    usage.write_text(f"{(2 << 30) - 100 * MiB}\n")
    assert settings.machine()[1] == min(
        2 << 30, settings.os.sysconf("SC_PAGE_SIZE") * settings.os.sysconf("SC_PHYS_PAGES")
    )
    assert settings.available_memory() == 100 * MiB  # what is left under the limit
    assert PoolSettings().sizes(1 << 30)[0] == max(
        2, settings.machine()[1] * 3 // 4 // ZYGOTE_BYTES["fork"]
    )
