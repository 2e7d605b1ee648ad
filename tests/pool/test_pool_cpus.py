"""Runs and CPUs: the pool starts a run on a CPU no other run is using, moving the
tenant's whole jail there first (its cpuset), and a process kept across runs stays
kept through such a move (sandbox/pool/zygote_pool.py ``_place``)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import replace

import pytest

from sandbox.protocol import RunRequest
from sandbox.zygote import kernel_view
from sandbox.zygote.handle import Zygote
from tests.support.live_pool import TEST_POOL, LivePool, make_live_pool, needs_bwrap

pytestmark = [needs_bwrap, pytest.mark.slow]

#: Prints the CPUs the run may use, then keeps its CPU busy for a while (``x`` seconds),
#: so that another tenant's run starts while this one is still going.
BUSY = """import os, time

print("cpus", sorted(os.sched_getaffinity(0)))

def f(x):
    return x

end = time.monotonic() + {seconds}
while time.monotonic() < end:
    pass
"""


@pytest.fixture(scope="module")
def pinned_pool() -> Iterator[LivePool]:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    live = make_live_pool(settings=replace(TEST_POOL, pool_size=4, pool_spares=2))
    cgroup = next(z.jail.cgroup for z in live.pool.zygotes if z.jail.cgroup is not None)
    if not (
        cgroup.dirs.get("cpuset" if cgroup.version == 1 else "", cgroup.main) / "cpuset.cpus"
    ).exists():
        live.close()
        pytest.skip("no cpuset cgroup: jails cannot be moved")
    try:
        yield live
    finally:
        live.close()


def printed_cpus(events: list[dict]) -> list[int]:
    text = "".join(e["text"] for e in events if e["type"] == "stdout")
    found = re.search(r"cpus \[([0-9, ]+)\]", text)
    assert found, events
    return [int(c) for c in found.group(1).split(",")]


def zygote_of(live: LivePool, tenant: str) -> Zygote:
    return next(z for z in live.pool.zygotes if z.tenant == tenant)


def test_two_runs_never_share_a_cpu_while_another_idles(pinned_pool: LivePool) -> None:
    live = pinned_pool
    for tenant in ("left", "right"):  # each gets its jail, and a kept process
        assert live.run(BUSY.format(seconds=0), tenant=tenant).status == "ok"
    first_cpu = live.pool.jailer.cpus[0]
    for tenant in ("left", "right"):  # both jails on one CPU, as round-robin pinning may leave them
        assert zygote_of(live, tenant).jail.move_to([first_cpu])
    moved = live.pool.moved
    retired = live.pool.retired

    async def both() -> tuple[list[dict], list[dict]]:
        left = await live.pool.submit(
            RunRequest(code=BUSY.format(seconds=1.5), args="(1.0,)", outputs=["jaxpr"]), "left"
        )
        left_events: list[dict] = []

        async def read_left() -> None:
            async for event in left.events():
                left_events.append(event)

        reader = asyncio.create_task(read_left())
        while not any(e["type"] == "stdout" for e in left_events):  # it is running
            await asyncio.sleep(0.02)
        right = await live.pool.submit(
            RunRequest(code=BUSY.format(seconds=0), args="(1.0,)", outputs=["jaxpr"]), "right"
        )
        right_events = [e async for e in right.events()]
        await reader
        return left_events, right_events

    left_events, right_events = live.call(both())
    assert left_events[-1]["status"] == "ok" and right_events[-1]["status"] == "ok"
    left_cpus, right_cpus = printed_cpus(left_events), printed_cpus(right_events)
    assert not set(left_cpus) & set(right_cpus), (left_cpus, right_cpus)
    assert live.pool.moved > moved
    # the move is the pool's own: neither the zygote nor its kept process is retired for it
    assert live.pool.retired == retired
    reused = live.pool.reused
    again = live.run(BUSY.format(seconds=0), tenant="right")
    assert again.status == "ok" and printed_cpus(again.events) == zygote_of(live, "right").jail.cpus
    assert live.pool.reused == reused + 1


def test_the_kept_process_cpus_are_compared_with_the_zygotes_own() -> None:
    """A kept process's CPUs must be its zygote's (which the pool may move), not
    those of its baseline; any other mask is a change (a run that narrowed it)."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    mine = sorted(os.sched_getaffinity(0))
    child = subprocess.Popen(["sleep", "30"])
    try:
        os.sched_setaffinity(child.pid, mine[:1])
        narrowed = kernel_view.kernel_view(child.pid)["Cpus_allowed_list"]
        assert narrowed == str(mine[0])
        os.sched_setaffinity(0, mine[:1])  # the reader moved too: as a pool's move does
        try:
            assert kernel_view.kernel_view(child.pid)["Cpus_allowed_list"] == "as the reader's"
        finally:
            os.sched_setaffinity(0, mine)
    finally:
        child.kill()
        child.wait()
