"""What a float32 matrix product on this machine's default backend computes with, at
JAX's default matmul precision and at each named one: its largest error against a
float64 product of the same float32 inputs, relative to the largest magnitude.

A TPU's default passes float32 operands through bfloat16 (about 3 significant
digits); ``highest`` is float32's (about 7). Run by hand on a machine with an
accelerator; on a CPU every precision gives float32's.

    python benchmarks/engine/matmul_precision.py
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np


def main() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    b = rng.standard_normal((256, 256)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(exact).max()
    device = jax.devices()[0]
    print(
        f"{device.platform} ({device.device_kind}); jax_default_matmul_precision = "
        f"{jax.config.jax_default_matmul_precision!r}"
    )
    for name in (None, "bfloat16", "tensorfloat32", "float32"):
        with jax.default_matmul_precision(name) if name else contextlib.nullcontext():
            got = np.asarray(jax.jit(jnp.matmul)(a, b), dtype=np.float64)
        print(
            f"  {name or 'default':<14} max |error| / max |x| = {np.abs(got - exact).max() / scale:.1e}"
        )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.support.reproduce import announce

    announce()
    main()
