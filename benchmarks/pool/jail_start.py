"""What a new jail costs: forked from a jail template against a new bubblewrap and
interpreter, side by side in one run (docs/sandbox.md, "A new jail at the price of
a fork").

Two warm pools of the jailed zygotes (sandbox/pool/zygote_pool.py) on this machine,
one with ``fork_jails`` on (a zygote's jail forked from its JAX version's template:
sandbox/jail/enter.py) and one with it off (``bwrap`` + ``python`` importing JAX, as
before), each with no spare kept. In turns, each pool is asked for a new zygote
(``Zygote.start``: the jail, the zygote and its first warm child, whose backend is
started and warmed, until the zygote's hello), N times:

- **ready ms**: from the ask until the hello (a new tenant's run could start);
- **CPU-s**: the time on a CPU of every thread of every process in the jail's cgroup
  at the hello (the monitor or bubblewrap, pid 1, the zygote, the warm child:
  ``/proc/PID/task/TID/schedstat``, in ns) and what they reaped (``stat``'s cutime and
  cstime);
- then one small run in it (``x * 2``), ms from submit to ``done``.

And the jail alone: a template that imported the zygote's modules as the real one
does forks a jail whose command only says it runs (``bare``): ms from the ask until
then, and the CPU-s of the jail's processes at that moment: what a jail costs before
its zygote starts a backend and warms a child. The fork pool's own start (its
template's import and the check jail it forks: once per JAX version, like a server's
start) is printed apart (``fork_pool_start_s``). Run it on a quiet machine; the ratios
are side by side in one run.

    .venv/bin/python benchmarks/pool/jail_start.py [--n 10] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.support.procfs import threads_cpu_s  # noqa: E402
from benchmarks.support.stats import spread  # noqa: E402
from sandbox.jail.jail import Jailer  # noqa: E402
from sandbox.jail.settings import JailConfig, JailLimits  # noqa: E402
from sandbox.pool.settings import PoolSettings  # noqa: E402
from sandbox.pool.zygote_pool import ZygotePool  # noqa: E402
from sandbox.protocol import RunRequest  # noqa: E402

SETTINGS = PoolSettings(pool_size=4, pool_running=1, pool_spares=0, pool_per_tenant=1)


#: A template like the zygote's (the same imports), whose jails' command says it runs.
BARE_TEMPLATE = """
import gc, os, sys
from sandbox.jail import fork_server
sock = fork_server.take_place(sys.argv)
from sandbox.zygote import main as zygote
zygote.boot()
gc.collect(); gc.freeze()
def command(fds):
    os.write(fds["out"], b"up")
    os.read(fds["hold"], 1)
    os._exit(0)
fork_server.serve(sock, command)
"""


async def bare_jail(jailer: Jailer) -> dict[str, float]:
    template = jailer.template(jailer.python("-c", BARE_TEMPLATE))
    await template.ensure_started()
    out_r, out_w = os.pipe()
    hold_r, hold_w = os.pipe()
    jail = jailer.jail()
    loop = asyncio.get_running_loop()
    try:
        t0 = time.perf_counter()
        await jail.start_forked(template, {"out": out_w, "hold": hold_r})
        os.close(out_w)
        os.close(hold_r)
        assert await loop.run_in_executor(None, os.read, out_r, 2) == b"up"
        ms = (time.perf_counter() - t0) * 1000
        used = (
            threads_cpu_s(sorted(jail.cgroup.pids())) if jail.cgroup is not None else float("nan")
        )
    finally:
        os.close(out_r)
        os.close(hold_w)
        await jail.close()
    return {"ready_ms": ms, "cpu_s": used}


async def one_jail(pool: ZygotePool, tenant: str) -> dict[str, float]:
    t0 = time.perf_counter()
    z = pool._spawn(tenant)
    await asyncio.shield(z.ready)
    ready_ms = (time.perf_counter() - t0) * 1000
    group = z.jail.cgroup
    pids = sorted(group.pids()) if group is not None else []
    used = threads_cpu_s(pids)
    request = RunRequest.model_validate(
        {"code": "def f(x):\n    return x * 2\n", "args": "(jnp.ones((3,)),)"}
    )
    t1 = time.perf_counter()
    run = await pool.submit(request, tenant)
    status = None
    async for event in run.events():
        if event.get("type") == "done":
            status = event.get("status")
    run_ms = (time.perf_counter() - t1) * 1000
    assert status == "ok", status
    z.retire("measured")
    await pool.drain()
    return {"ready_ms": ready_ms, "cpu_s": used, "run_ms": run_ms}


async def main(n: int) -> dict[str, object]:
    limits = JailLimits()
    pools = {}
    template_s = 0.0
    for mode, fork in (("exec", False), ("fork", True)):
        pool = ZygotePool(Jailer(limits, replace(JailConfig(), fork_jails=fork)), SETTINGS)
        t = time.perf_counter()
        await pool.start()  # with fork_jails, it waits for its template's start
        if fork:  # the template's one start, apart
            template_s = time.perf_counter() - t
        pools[mode] = pool
    found: dict[str, list[dict[str, float]]] = {m: [] for m in (*pools, "bare")}
    bare = Jailer(limits, JailConfig())
    try:
        for i in range(n):
            for mode, pool in pools.items():
                found[mode].append(await one_jail(pool, f"{mode}-{i}"))
            found["bare"].append(await bare_jail(bare))
    finally:
        for pool in pools.values():
            await pool.close()
        await bare.close_templates()
    out: dict[str, object] = {"n": n, "fork_pool_start_s": round(template_s, 2)}
    for mode, rows in found.items():
        for key in ("ready_ms", "cpu_s", "run_ms"):
            values = [r[key] for r in rows if key in r]
            if not values:
                continue
            out[f"{mode}_{key}"] = spread(values, 4)
    for key in ("ready_ms", "cpu_s"):
        fork = out[f"fork_{key}"]["median"]  # type: ignore[index]
        exec_ = out[f"exec_{key}"]["median"]  # type: ignore[index]
        out[f"{key}_ratio_fork_over_exec"] = round(fork / exec_, 3) if exec_ else None
    return out


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(main(args.n))
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:32} {value}")
