"""What another JAX version costs: its first run (its pool starts) and its warm runs,
beside the default version's, through the jailed warm pool.

For the default and each installed version (or those named), in one go: the first
run of a tenant on that version (for a version other than the default this starts
its pool: a jail check and a zygote that imports that JAX), then ``--repeat`` more
runs of the same request by the same tenant, spaced ``--pause`` seconds apart (its
zygote's next warm child is ready by then). Prints per version the first run's time,
the warm runs' median and p95 (submit → ``done``), and the interpreter.

    .venv/bin/python benchmarks/pool/versions.py [--repeat 10] [--pause 0.3] [VERSION ...]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from backend.app.core.settings import Settings
from benchmarks.support.stats import percentile
from sandbox.environments.versions import default_version, installed
from sandbox.jail.jail import Jailer
from sandbox.pool.versioned import VersionedPool
from sandbox.pool.zygote_pool import ZygotePool
from sandbox.protocol import RunRequest

REQUEST: dict[str, Any] = {
    "code": "import jax.numpy as jnp\n\ndef f(x, y):\n    return jnp.sum(jnp.tanh(x @ y) ** 2)\n",
    "args": "(jnp.ones((4, 4)), jnp.ones((4, 4)))",
    "transforms": [{"name": "grad"}, {"name": "jit"}],
    "outputs": ["jaxpr", "stablehlo", "hlo", "value", "cost"],
}


async def timed_run(pool: VersionedPool, version: str, tenant: str) -> float:
    started = time.perf_counter()
    handle = await pool.submit(RunRequest(**REQUEST, jax_version=version), tenant)
    events = [e async for e in handle.events()]
    elapsed = (time.perf_counter() - started) * 1000
    done = events[-1]
    if done.get("status") != "ok":
        raise RuntimeError(f"jax {version}: the run ended {done}")
    return elapsed


async def main(versions: list[str], repeat: int, pause: float) -> None:
    root = Settings().jax_versions_dir
    default = default_version()
    assert default is not None, "no JAX in this environment"
    have = installed(root)
    versions = versions or list(have)
    missing = [v for v in versions if v not in have]
    if missing:
        raise SystemExit(f"not installed: {', '.join(missing)} (jaxplay versions add ...)")
    pool = VersionedPool(ZygotePool(Jailer()), default_version=default, versions_dir=root)
    await pool.start()
    await pool.ready()  # the default's spare is up, as on a running server
    rows = []
    try:
        for version in versions:
            tenant = f"bench-{version}"
            first = await timed_run(pool, version, tenant)
            warm = []
            for _ in range(repeat):
                await asyncio.sleep(pause)
                warm.append(await timed_run(pool, version, tenant))
            p95 = percentile(warm, 0.95)
            rows.append((version, have[version], first, statistics.median(warm), p95))
    finally:
        await pool.close()
    print(f"request: grad -> jit of a 4x4 matmul, outputs {', '.join(REQUEST['outputs'])}")
    print(
        f"{'version':<10} {'python':<8} {'first run ms':>13} {'warm median ms':>15} {'warm p95 ms':>12}"
    )
    for version, env, first, median, p95 in rows:
        label = f"{version}{' *' if env.default else ''}"
        print(f"{label:<10} {env.python_version:<8} {first:13.0f} {median:15.1f} {p95:12.1f}")
    print("* the default version: its pool was started (and its spare warm) before the first run")


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", help="versions (default: every installed one)")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--pause", type=float, default=0.3)
    options = parser.parse_args()
    asyncio.run(main(options.versions, options.repeat, options.pause))
