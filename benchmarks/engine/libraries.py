"""What importing the library set before the fork costs a zygote, and what it saves
a run, side by side. Outside the jail, pinned to one CPU (a jail has one).

For each way a zygote may prepare (nothing imported; the table's preloaded modules,
what the zygote does; every module of the table), a fresh process does what the
zygote does (imports JAX, the engine's ``prepare()``, then ``libraries.preimport``)
and reports the start time and its resident memory (an idle jail's zygote; its warm
child shares these pages until written). Then, in that process, the first
``from flax import nnx`` + ``import optax`` a run makes and one Flax NNX training step
(examples/flax_nnx_training_step.py: ``run_exec_s`` its module's code, imports and
model made; ``run_step_s`` the step traced, compiled with jit and run), in a process
whose backend already started, as a new tenant's warm child has it.

    .venv/bin/python benchmarks/engine/libraries.py [--repeat 3]

The lead measures on a quiet machine; on a loaded one the figures stretch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import json, os, sys, time
ROOT, MODE = sys.argv[1], sys.argv[2]
sys.path.insert(0, ROOT)
t0 = time.monotonic()
from sandbox.engine import api
api.prepare()
t1 = time.monotonic()
from sandbox.environments import libraries
mode = MODE
if mode == "preloaded":
    libraries.preimport()
elif mode == "all":
    libraries.preimport([m for lib in libraries.LIBRARIES for m in lib.imports])
t2 = time.monotonic()
def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
idle = rss_mb()
import jax, jax.numpy as jnp
jnp.ones(1).block_until_ready()  # the warm child's backend, started before any run
code = open(os.path.join(ROOT, "examples", "flax_nnx_training_step.py")).read()
t3 = time.monotonic()
namespace = {}
exec(compile(code, "snippet.py", "exec"), namespace)  # the run's imports and model
t4 = time.monotonic()
out = jax.jit(namespace["f"])(namespace["params"], jnp.ones((4, 3)), jnp.zeros((4, 1)))
jax.block_until_ready(out)
t5 = time.monotonic()
print(json.dumps({"start_s": t2 - t0, "preimport_s": t2 - t1, "idle_rss_mb": idle,
                  "run_exec_s": t4 - t3, "run_step_s": t5 - t4, "after_run_rss_mb": rss_mb()}))
"""

MODES = ("none", "preloaded", "all")


def measure(mode: str) -> dict[str, float]:
    out = subprocess.run(
        ["taskset", "-c", "0", sys.executable, "-c", PROBE, str(ROOT), mode],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu", "HOME": "/tmp"},
        check=True,
    )
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = {mode: [measure(mode) for _ in range(args.repeat)] for mode in MODES}
    keys = list(rows["none"][0])
    print(f"{'zygote imports':<16}" + "".join(f"{k:>18}" for k in keys))
    for mode, runs in rows.items():
        medians = [statistics.median(r[k] for r in runs) for k in keys]
        print(f"{mode:<16}" + "".join(f"{v:>18.2f}" for v in medians))
    print(f"(medians of {args.repeat} fresh processes each, one CPU; seconds and MB)")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    from benchmarks.support.reproduce import announce

    announce()
    main()
