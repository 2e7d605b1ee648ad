"""What the warm pool costs: jaxplay's end-to-end time against JAX itself.

Runs a fixed set of requests, each run an edit (a constant in the code changes, the
shapes do not: nothing a run compiles is ever reused by the next), several ways, side
by side, in one go. Like with like: every warm measurement keeps its process and JAX's
caches across runs, as the pool keeps a tenant's process (JAXPLAY_POOL_REUSE_RUNS);
none clears them, and the edits make each run trace, lower and compile its own f.

- plain JAX: what a notebook user types for the same outputs (``benchmarks/support/plain_jax.py``:
  ``make_jaxpr``, ``jit(f).lower(...).as_text()``, ``.compile().as_text()``, the call),
  in one warm process with the machine's CPUs, no jaxplay code;
- floor: the engine's ``run_message`` in a process that already imported JAX and
  started its backend, its caches kept, pinned to one CPU like a jail;
- forked: the same in a child forked from a prepared process, its backend warmed as a
  zygote's warm child does, but without jail, pool or supervisor: the difference to
  the warm pool is what the jail and the pool themselves cost;
- warm pool: ``ZygotePool`` end to end (submit → done), jailed, one CPU per jail,
  with ``--pause`` seconds between a tenant's runs (the time its zygote needs to have
  the next child's backend warm; 0 measures the cold-child path);
- fresh process: ``SubprocessPool``, a new unjailed ``python -m sandbox.engine`` per run.

Prints the medians per case, the overhead of the pool over the floor and over plain
JAX (median, p95),
the time to the first ``jaxpr`` event, the speed-up over a fresh process, and the
memory of an idle warm zygote.

    .venv/bin/python benchmarks/pool/pool_overhead.py [--repeat 10] [--fresh-repeat 2]
    .venv/bin/python benchmarks/pool/pool_overhead.py --quick   # 2 cases, 1 round: does it work
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.support import plain_jax
from benchmarks.support.stats import percentile
from sandbox.protocol import RunRequest

OUTPUTS = ["jaxpr", "stablehlo", "hlo", "value", "cost"]  # timing: its budget is noise
CASES: dict[str, dict[str, Any]] = {
    "jaxpr-small": {
        "code": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.tanh(x * {c}) ** 2)\n",
        "args": "(jnp.ones(3),)",
        "transforms": [{"name": "grad"}],
        "outputs": ["jaxpr"],
    },
    "grad-jit": {
        "code": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.tanh(x * {c}) ** 2)\n",
        "args": "(jnp.ones(3),)",
        "transforms": [{"name": "grad"}, {"name": "jit"}],
        "outputs": OUTPUTS,
    },
    "vmap-matmul": {
        "code": "import jax.numpy as jnp\n\ndef f(x, y):\n    return jnp.tanh(x @ y * {c})\n",
        "args": "(jnp.ones((8, 4, 4)), jnp.ones((8, 4, 4)))",
        "transforms": [{"name": "vmap"}, {"name": "jit"}],
        "outputs": OUTPUTS,
    },
    "jacrev": {
        "code": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sin(x * {c}) * jnp.cos(x[::-1])\n",
        "args": "(jnp.arange(4.0),)",
        "transforms": [{"name": "jacrev"}],
        "outputs": OUTPUTS,
    },
}


def _body(case: str, edit: int) -> dict[str, Any]:
    """The case's request, edit ``edit``: its constant changed, its shapes not."""
    spec = CASES[case]
    return {**spec, "code": spec["code"].replace("{c}", f"{1.0 + edit / 1000:.3f}")}


def _request(case: str, edit: int) -> RunRequest:
    return RunRequest(**_body(case, edit))


# --- the floor: in a child process of its own, so this one never imports JAX ---------


def floor_main(repeat: int) -> None:
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    from sandbox.engine import api, worker
    from sandbox.zygote import child

    api.prepare()  # as a zygote prepares (sandbox/zygote/main.py)
    api.discover_backends()
    gc.collect()
    gc.freeze()
    devnull = os.open(os.devnull, os.O_WRONLY)
    # forked: what a zygote's warm child does, without jail, pool or supervisor (the
    # fork happens before this process starts a backend, as in a zygote)
    forked: dict[str, list[float]] = {c: [] for c in CASES}
    for edit in range(1, repeat + 1):
        for case in CASES:
            message = {
                "protocol": 1,
                "run_id": "floor",
                "request": _request(case, edit).model_dump(),
            }
            mine, its = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            pid = os.fork()
            if pid == 0:
                mine.close()
                child.warm_up(api, its)  # as a warm child: stops when the run comes
                its.recv(16)
                worker.run_message(message, devnull)
                os._exit(0)
            its.close()
            mine.recv(16)  # warm
            time.sleep(0.5)  # its further warm-up, as between a tenant's runs
            started = time.perf_counter()
            mine.send(b"run")
            os.waitpid(pid, 0)
            forked[case].append((time.perf_counter() - started) * 1000)
            mine.close()
    # JAX's caches are kept from run to run, as in a tenant's kept process: each run
    # is an edit, so it traces, lowers and compiles its own f all the same
    results: dict[str, list[float]] = {c: [] for c in CASES}
    for edit in range(repeat + 1):
        for case in CASES:
            message = {
                "protocol": 1,
                "run_id": "floor",
                "request": _request(case, edit).model_dump(),
            }
            started = time.perf_counter()
            worker.run_message(message, devnull)
            if edit:  # the first round starts the backend and imports the rest: not counted
                results[case].append((time.perf_counter() - started) * 1000)
    sys.stdout = sys.__stdout__
    print(json.dumps({"floor": results, "forked": forked}))


def measure_floor(repeat: int) -> dict[str, dict[str, list[float]]]:
    out = subprocess.run(
        [sys.executable, __file__, "--floor", "--repeat", str(repeat), "--cases", str(len(CASES))],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- the pools -------------------------------------------------------------------------


async def _timed(pool: Any, case: str, tenant: str, edit: int) -> tuple[float, float | None, str]:
    started = time.perf_counter()
    run = await pool.submit(_request(case, edit), tenant)
    first_jaxpr = None
    status = "?"
    async for event in run.events():
        if event["type"] == "jaxpr" and first_jaxpr is None:
            first_jaxpr = (time.perf_counter() - started) * 1000
        if event["type"] == "done":
            status = event["status"]
    return (time.perf_counter() - started) * 1000, first_jaxpr, status


async def measure_pools(repeat: int, fresh_repeat: int, pause_s: float) -> dict[str, Any]:
    from sandbox.jail.jail import Jailer
    from sandbox.pool.settings import PoolSettings
    from sandbox.pool.subprocess_pool import SubprocessPool
    from sandbox.pool.zygote_pool import ZygotePool

    pool = ZygotePool(Jailer(), PoolSettings(pool_spares=1))
    await pool.start()
    await pool.ready()
    spare = next(z for z in pool.zygotes if z.state == "idle")
    while not spare.warm_child:
        await asyncio.sleep(0.05)
    assert spare.info is not None
    idle_rss_kib = spare.info.rss_kib
    idle_jail_bytes = spare.jail.cgroup.memory_bytes() if spare.jail.cgroup else 0
    idle_memory = _jail_memory(spare.jail.cgroup.pids()) if spare.jail.cgroup else {}
    warm: dict[str, list[float]] = {c: [] for c in CASES}
    first: list[float] = []
    new_tenant_first: list[float] = []
    try:
        for case in CASES:  # one warm-up run each (the supervisor's own first time)
            await _timed(pool, case, "bench", 0)
        for edit in range(1, repeat + 1):
            for case in CASES:
                await asyncio.sleep(pause_s)
                ms, jaxpr_ms, status = await _timed(pool, case, "bench", edit)
                assert status == "ok", (case, status)
                warm[case].append(ms)
                if case == "jaxpr-small" and jaxpr_ms is not None:
                    first.append(jaxpr_ms)
        for i in range(3):  # a tenant never seen before takes a ready spare
            await pool.ready()
            _, jaxpr_ms, _ = await _timed(pool, "jaxpr-small", f"newcomer-{i}", 1)
            if jaxpr_ms is not None:
                new_tenant_first.append(jaxpr_ms)
    finally:
        await pool.close()
    fresh: dict[str, list[float]] = {c: [] for c in CASES}
    sub = SubprocessPool(max_concurrent=1)
    for edit in range(1, fresh_repeat + 1):
        for case in CASES:
            ms, _, status = await _timed(sub, case, "bench", edit)
            assert status == "ok", (case, status)
            fresh[case].append(ms)
    return {
        "warm": warm,
        "fresh": fresh,
        "first_jaxpr": first,
        "new_tenant_first_jaxpr": new_tenant_first,
        "idle_rss_kib": idle_rss_kib,
        "idle_jail_bytes": idle_jail_bytes,
        "idle_memory": idle_memory,
    }


def _jail_memory(pids: set[int]) -> dict[str, int]:
    """RSS and PSS (KiB) of each process of an idle jail, by name, and the PSS total:
    PSS shares pages between the zygote and its forked child instead of counting them twice."""
    found: dict[str, int] = {"pss_total_kib": 0}
    for pid in sorted(pids):
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in rollup.splitlines()[1:])
        pss = int(fields["Pss"].split()[0])
        rss = int(fields["Rss"].split()[0])
        name = status.split("\n", 1)[0].split()[1]
        found["pss_total_kib"] += pss
        found[f"{pid}:{name} rss_kib"] = rss
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--fresh-repeat", type=int, default=2)
    parser.add_argument(
        "--pause",
        type=float,
        default=0.5,
        help="seconds between two runs of the tenant (a person reading the result); "
        "0: back to back, so each run's child starts cold",
    )
    parser.add_argument("--cases", type=int, default=len(CASES), help="the first N cases only")
    parser.add_argument(
        "--quick", action="store_true", help="a check that it works: 2 cases, 1 round, no pause"
    )
    parser.add_argument("--floor", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.cases, args.repeat, args.fresh_repeat, args.pause = 2, 1, 1, 0.0
    for name in list(CASES)[args.cases :]:
        del CASES[name]
    if args.floor:
        floor_main(args.repeat)
        return
    load = os.getloadavg()[0]
    plain = plain_jax.measure(
        [[(case, _body(case, edit)) for case in CASES] for edit in range(args.repeat + 1)]
    )["later"]
    floors = measure_floor(args.repeat)
    floor, forked = floors["floor"], floors["forked"]
    pools = asyncio.run(measure_pools(args.repeat, args.fresh_repeat, args.pause))
    warm, fresh = pools["warm"], pools["fresh"]
    print(
        f"{len(os.sched_getaffinity(0))} CPUs, load average {load:.1f}, {args.pause:g} s between "
        f"a tenant's runs; medians in ms"
    )
    print(
        "every run an edit; caches kept in every warm process (none cleared): like with like; "
        "plain = plain JAX as a user types it (all CPUs), floor = jaxplay's engine (one CPU)"
    )
    print(
        f"{'case':<14}{'plain':>8}{'floor':>8}{'forked':>8}{'warm pool':>11}{'-plain':>8}"
        f"{'-floor':>8}{'-forked':>9}{'fresh proc':>12}{'fresh/warm':>12}"
    )
    overheads: list[float] = []
    over_plain: list[float] = []
    transport: list[float] = []
    ratios: list[float] = []
    for case in CASES:
        p_med, f_med, k_med, w_med, x_med = (
            statistics.median(d[case]) for d in (plain, floor, forked, warm, fresh)
        )
        overheads += [w - f_med for w in warm[case]]
        over_plain += [w - p_med for w in warm[case]]
        transport += [w - k_med for w in warm[case]]
        ratios.append(x_med / w_med)
        print(
            f"{case:<14}{p_med:>8.1f}{f_med:>8.1f}{k_med:>8.1f}{w_med:>11.1f}{w_med - p_med:>8.1f}"
            f"{w_med - f_med:>8.1f}{w_med - k_med:>9.1f}{x_med:>12.1f}{x_med / w_med:>11.1f}x"
        )
    print(
        f"overhead of the warm pool over plain JAX: median {statistics.median(over_plain):.1f} ms, "
        f"p95 {percentile(over_plain, 0.95):.1f} ms"
    )
    print(
        f"overhead of the warm pool over the floor: median {statistics.median(overheads):.1f} ms, "
        f"p95 {percentile(overheads, 0.95):.1f} ms (targets 10 / 30)"
    )
    print(
        f"of which jail + pool + supervisor (warm pool - forked child without them): median "
        f"{statistics.median(transport):.1f} ms, p95 {percentile(transport, 0.95):.1f} ms"
    )
    print(
        f"first jaxpr event after submit (jaxpr-small): median {statistics.median(pools['first_jaxpr']):.1f} ms; "
        f"for a new tenant (ready spare): median {statistics.median(pools['new_tenant_first_jaxpr']):.1f} ms (target 40)"
    )
    print(f"fresh process / warm pool: median {statistics.median(ratios):.1f}x (target >= 10x)")
    memory = pools["idle_memory"]
    rss = ", ".join(
        f"{k.split()[0]} {v / 1024:.0f}" for k, v in memory.items() if k.endswith("rss_kib")
    )
    print(
        f"idle warm jail: zygote {pools['idle_rss_kib'] / 1024:.0f} MiB RSS; RSS per process "
        f"(MiB): {rss}; PSS of the whole jail {memory.get('pss_total_kib', 0) / 1024:.0f} MiB; "
        f"cgroup charge {pools['idle_jail_bytes'] / 2**20:.0f} MiB (target 250 MB)"
    )


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
