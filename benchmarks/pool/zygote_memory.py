"""What a zygote holds in memory: forked from its JAX version's jail template against
a new bubblewrap and interpreter, side by side in one run (the pool's size follows
it: sandbox/pool/settings.py).

For each way, a warm pool (sandbox/pool/zygote_pool.py) starts ``--n`` spares, each a
jail with its zygote and the zygote's warm child (the CPU backend started, a warm-up
run done), and this reads ``/proc/PID/smaps_rollup`` of every process in each jail's
cgroup: the resident set (RSS), the proportional set (PSS: a page shared by k
processes counts 1/k to each) and the private pages (USS: what the machine gets
back when the jail goes). With forked jails a zygote shares the template's pages
(JAX and the libraries imported, the heap frozen) until it writes them, so its USS
is what another tenant's jail costs the machine.

    .venv/bin/python benchmarks/pool/zygote_memory.py [--n 6]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.support.stats import spread  # noqa: E402
from sandbox.jail.jail import Jailer  # noqa: E402
from sandbox.jail.settings import JailConfig, JailLimits  # noqa: E402
from sandbox.pool.settings import PoolSettings  # noqa: E402
from sandbox.pool.zygote_pool import ZygotePool  # noqa: E402

MiB = 1024 * 1024


def rollup(pid: int) -> dict[str, int]:
    """RSS, PSS and USS of one process in bytes (smaps_rollup is in kB)."""
    values: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, rest = line.partition(":")
        if rest.strip().endswith("kB"):
            values[key] = int(rest.split()[0]) * 1024
    return {
        "rss": values.get("Rss", 0),
        "pss": values.get("Pss", 0),
        "uss": values.get("Private_Clean", 0) + values.get("Private_Dirty", 0),
    }


async def measure(fork: bool, n: int) -> list[dict[str, float]]:
    settings = PoolSettings(pool_size=n, pool_running=1, pool_spares=n, pool_per_tenant=1)
    pool = ZygotePool(Jailer(JailLimits(), replace(JailConfig(), fork_jails=fork)), settings)
    await pool.start()
    try:
        await pool.ready(timeout_s=600)
        await asyncio.sleep(2)  # the warm children's warm-ups are done: memory settles
        jails = []
        for z in pool.zygotes:
            cgroup = z.jail.cgroup
            if cgroup is None:
                raise SystemExit("no cgroup: a jail's processes cannot be found")
            totals = {"rss": 0, "pss": 0, "uss": 0, "processes": 0}
            for pid in cgroup.pids():
                try:
                    for k, v in rollup(pid).items():
                        totals[k] += v
                    totals["processes"] += 1
                except OSError:
                    continue
            jails.append({k: (v / MiB if k != "processes" else v) for k, v in totals.items()})
        return jails
    finally:
        await pool.close()
        await pool.jailer.close_templates()


async def main(n: int) -> dict[str, object]:
    out: dict[str, object] = {"n": n}
    for mode, fork in (("exec", False), ("fork", True)):
        jails = await measure(fork, n)
        for key in ("rss", "pss", "uss", "processes"):
            values = [j[key] for j in jails]
            out[f"{mode}_{key}" + ("" if key == "processes" else "_mib")] = spread(values, 1)
    return out


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=6)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(main(args.n))
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:24} {value}")
