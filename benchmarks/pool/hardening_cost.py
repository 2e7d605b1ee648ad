"""What the jail's hardening (issue 10) costs: the warm pool before and after, side by side.

Two jailed warm pools in one process, one as the jail was before the hardening
(``NO_HARDENING``: the deny-list filter without allow-lists and system call table, no
run filter, no zygote check, no /proc masks, every jail on one shared uid) and one as
it is (the defaults: per-jail uids too). Rounds alternate which pool goes first. Each
round, on each pool:

- warm runs: a tenant's run on its own warm zygote, ``--pause`` seconds after its
  previous one (submit → ``done``), for two of benchmarks/pool/pool_overhead.py's cases;
- a new tenant's first run: a tenant never seen before, served by the ready spare,
  after the pool has refilled its spares and settled.

Then the parts on their own: loading the run filter in a child, reading and comparing
a zygote's limits after a run, the /proc scan that picks a jail uid, and a tiny jail's
start with and without the /proc masks.

    .venv/bin/python benchmarks/pool/hardening_cost.py [--rounds 8] [--pause 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.pool.pool_overhead import CASES
from sandbox.protocol import RunRequest

WARM_CASES = ("jaxpr-small", "grad-jit")


async def _timed(pool: Any, case: str, tenant: str) -> float:
    started = time.perf_counter()
    run = await pool.submit(RunRequest(**CASES[case]), tenant)
    events = [event async for event in run.events()]
    if events[-1]["status"] != "ok":
        raise RuntimeError(f"{case} for {tenant} ended: {events[-3:]}")
    return (time.perf_counter() - started) * 1000


async def _settle(pool: Any) -> None:
    await pool.ready()
    while any(z.state != "idle" for z in pool.zygotes):
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)  # the new spare's warm child finishes its warm-up


async def measure_pools(rounds: int, pause_s: float) -> dict[str, dict[str, list[float]]]:
    from sandbox.jail.jail import NO_HARDENING, Hardening, Jailer
    from sandbox.jail.settings import JailConfig, JailLimits
    from sandbox.pool.settings import PoolSettings
    from sandbox.pool.zygote_pool import ZygotePool

    limits = JailLimits.from_env()
    settings = PoolSettings(pool_size=4, pool_spares=1, pool_running=1, pool_per_tenant=1)
    config = JailConfig.from_env()
    pools = {
        "before": ZygotePool(Jailer(limits, replace(config, jail_slots=0), NO_HARDENING), settings),
        "after": ZygotePool(Jailer(limits, config, Hardening()), settings),
    }
    for pool in pools.values():
        await pool.start()
        await pool.ready()
    times: dict[str, dict[str, list[float]]] = {name: {} for name in pools}
    try:
        for r in range(rounds):
            order = list(pools) if r % 2 == 0 else list(reversed(pools))
            for name in order:
                pool, got = pools[name], times[name]
                await _settle(pool)
                for case in WARM_CASES:
                    await _timed(pool, case, f"{name}-warm")  # its zygote is warm after this
                    await asyncio.sleep(pause_s)
                    got.setdefault(f"warm {case}", []).append(
                        await _timed(pool, case, f"{name}-warm")
                    )
                    await asyncio.sleep(pause_s)
                await _settle(pool)
                newcomer = f"{name}-{uuid.uuid4().hex[:6]}"
                got.setdefault("new tenant jaxpr-small", []).append(
                    await _timed(pool, "jaxpr-small", newcomer)
                )
                for z in list(pool.zygotes):  # room for the next spare (the pool is small)
                    if z.tenant == newcomer:
                        z.retire("the benchmark is done with this tenant")
                await pool.drain()
            print(f"round {r + 1}/{rounds} done", file=sys.stderr)
    finally:
        for pool in pools.values():
            await pool.close()
    return times


# --- the parts on their own -----------------------------------------------------------


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def run_filter_load(n: int = 40) -> float:
    """Stacking the run filter in a fresh child (what each run's child does once)."""
    from sandbox.jail.seccomp import load, run_filter_bpf

    program = run_filter_bpf()
    samples = []
    for _ in range(n):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            started = time.perf_counter()
            load(program)
            os.write(w, str(time.perf_counter() - started).encode())
            os._exit(0)
        os.close(w)
        samples.append(float(os.read(r, 64)))
        os.close(r)
        os.waitpid(pid, 0)
    return _median_us(samples)


def state_check(n: int = 200) -> float:
    """Reading a process's limits and scheduling and comparing them (after each run)."""
    from sandbox.jail.procstate import read_state

    pid = os.getpid()
    start = read_state(pid)
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        assert not start.changes(read_state(pid))
        samples.append(time.perf_counter() - t)
    return _median_us(samples)


def uid_scan(n: int = 50) -> float:
    """The /proc scan before a jail uid is handed out (once per new jail)."""
    from sandbox.jail.procstate import processes_by_uid

    samples = []
    for _ in range(n):
        t = time.perf_counter()
        processes_by_uid()
        samples.append(time.perf_counter() - t)
    return _median_us(samples)


def fork_cost(namespaces: bool, n: int = 30) -> float:
    """Fork of a process with JAX imported (as a zygote is) until the child runs, in µs;
    with ``namespaces``, as a run in a pid namespace of its own would need: the child
    unshares a user, pid and mount namespace, forks again (the new namespace's first
    process) and mounts its own /proc. (The alternative to the run filter, not taken.)"""
    import ctypes

    import jax  # noqa: F401 (the size of the process is the point)

    libc = ctypes.CDLL(None, use_errno=True)
    flags = 0x10000000 | 0x20000000 | 0x20000  # CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS
    samples = []
    for _ in range(n):
        r, w = os.pipe()
        started = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            if namespaces:
                if libc.unshare(flags) != 0:
                    os._exit(3)
                inner = os.fork()
                if inner != 0:
                    os.waitpid(inner, 0)
                    os._exit(0)
                libc.mount(b"none", b"/", None, 0x40000 | 0x4000, None)  # MS_REC | MS_PRIVATE
                if libc.mount(b"proc", b"/proc", b"proc", 0, None) != 0:
                    os._exit(4)
            os.write(w, b"x")
            os._exit(0)
        os.read(r, 1)
        samples.append(time.perf_counter() - started)
        os.waitpid(pid, 0)
        os.close(r)
        os.close(w)
    return _median_us(samples)


async def jail_start(mask_proc: bool, n: int = 6) -> float:
    """A tiny jail (python -c 'import sandbox') from spawn to exit, in µs."""
    from sandbox.jail.jail import Hardening, Jailer

    jailer = Jailer(hardening=Hardening(mask_proc=mask_proc))
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        await jailer.check()
        samples.append(time.perf_counter() - t)
    return _median_us(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--pause", type=float, default=0.5, help="seconds between warm runs")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    times = asyncio.run(measure_pools(args.rounds, args.pause))
    print(
        f"\n{'ms, median (p90) of ' + str(args.rounds):34} {'before':>16} {'after':>16} {'after − before':>15}"
    )
    for key in times["before"]:
        b, a = times["before"][key], times["after"][key]
        mb, ma = statistics.median(b), statistics.median(a)
        pb = sorted(b)[int(0.9 * (len(b) - 1))]
        pa = sorted(a)[int(0.9 * (len(a) - 1))]
        print(f"{key:34} {mb:8.1f} ({pb:5.1f}) {ma:8.1f} ({pa:5.1f}) {ma - mb:+15.1f}")
    print("\nthe parts, median µs:")
    print(f"  run filter stacked in a child          {run_filter_load():9.0f}")
    print(f"  zygote limits read and compared        {state_check():9.0f}")
    print(f"  /proc scan before a jail uid is taken  {uid_scan():9.0f}")
    on, off = asyncio.run(jail_start(True)), asyncio.run(jail_start(False))
    print(f"  tiny jail start, /proc masked          {on:9.0f}")
    print(f"  tiny jail start, unmasked              {off:9.0f}")
    plain, nested = fork_cost(False), fork_cost(True)
    print(f"  fork of a JAX-sized process            {plain:9.0f}")
    print(f"  same, run in its own user+pid+mount ns {nested:9.0f}  (not taken; see docs)")


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
