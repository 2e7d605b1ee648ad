"""What sharding provenance adds to a ``sharding`` output (issue 36 item 3): Shardy's
propagation run a second time with ``debug-sharding-origins``
(sandbox/engine/outputs/sharding/origins.py), and the capture of file descriptor 2
around a compile (sandbox/engine/core/compile_log.py), each beside the compile of the
same program. The program: ``jax.grad`` of an 8-layer 512-wide tanh MLP, batch 256,
on a 2 x 4 mesh of virtual CPU devices (rows of the batch over x, weights' columns
over y). Medians of ``--repeats`` rounds.

    .venv/bin/python benchmarks/engine/sharding_origins_cost.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    repeats = parser.parse_args().repeats

    import jax
    import jax.numpy as jnp
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    from sandbox.engine.core import compile_log
    from sandbox.engine.outputs.sharding.origins import propagate

    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    jax.set_mesh(mesh)

    def mlp(params: list[jax.Array], x: jax.Array) -> jax.Array:
        for w in params:
            x = jnp.tanh(x @ w)
        return x.sum()

    weight = jax.ShapeDtypeStruct(
        (512, 512), jnp.float32, sharding=NamedSharding(mesh, P(None, "y"))
    )
    batch = jax.ShapeDtypeStruct(
        (256, 512), jnp.float32, sharding=NamedSharding(mesh, P("x", None))
    )
    origins, compiles, captures = [], [], []
    for _ in range(repeats):
        # a new jit each round: its compile is not a cache hit
        lowered = jax.jit(jax.grad(mlp)).lower([weight] * 8, batch)
        start = time.perf_counter()
        propagate(lowered.as_text(debug_info=True), [], [], None)
        origins.append(time.perf_counter() - start)
        start = time.perf_counter()
        lowered.compile()
        compiles.append(time.perf_counter() - start)
        start = time.perf_counter()
        with compile_log.captured():
            pass
        captures.append(time.perf_counter() - start)
    ms = {k: 1000 * statistics.median(v) for k, v in
          (("origins", origins), ("compile", compiles), ("capture", captures))}  # fmt: skip
    print(f"jax {jax.__version__}: compile {ms['compile']:.1f} ms; origins (as_text with "
          f"locations + Shardy's propagation) {ms['origins']:.1f} ms "
          f"({100 * ms['origins'] / ms['compile']:.1f}% of the compile); fd-2 capture "
          f"{ms['capture']:.3f} ms")  # fmt: skip


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
