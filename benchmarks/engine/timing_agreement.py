"""Do jaxplay's timings agree with an in-process ``timeit`` of the same function?

For each case, side by side in one run: the median per-call time that jaxplay's
``timing`` event reports for the compiled pipeline, and the median of a plain
``timeit`` (autorange, then repeats) of the same compiled function in this process.
The target is agreement within 10 %. Run: ``make bench`` or
``.venv/bin/python benchmarks/engine/timing_agreement.py [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import timeit
from pathlib import Path

import jax
import jax.numpy as jnp

from sandbox.pool.subprocess_pool import SubprocessPool
from sandbox.protocol import RunRequest

CASES = {
    "matmul 256": (
        "def f(x):\n    return jnp.tanh(x @ x.T).sum()\n",
        "jnp.ones((256, 256))",
        ["grad", "jit"],
    ),
    "elementwise 1e5": (
        "def f(x):\n    return jnp.sin(x) * jnp.cos(x) + x ** 2\n",
        "jnp.linspace(0, 1, 100_000)",
        ["jit"],
    ),
    "scan 100": (
        "def f(x):\n    return lax.scan(lambda c, _: (jnp.sin(c) + 0.1, None), x, None, length=100)[0].sum()\n",
        "jnp.ones(1000)",
        ["grad", "jit"],
    ),
    "vmap grad 64x64": (
        "def f(w, x):\n    return jnp.sum(jnp.tanh(x @ w) ** 2)\n",
        "(jnp.ones((64, 64)), jnp.ones((32, 64)))",
        ["grad", "jit"],
    ),
}


def in_process_median_ms(code: str, args_expr: str, transforms: list[str]) -> float:
    ns: dict = {"jax": jax, "jnp": jnp, "lax": jax.lax}
    exec(code, ns)
    fn = ns["f"]
    for name in transforms:
        fn = getattr(jax, name)(fn)
    args = eval(args_expr, ns)
    args = args if isinstance(args, tuple) else (args,)
    compiled = jax.jit(fn).lower(*args).compile()
    call = lambda: jax.block_until_ready(compiled(*args))  # noqa: E731
    call()
    timer = timeit.Timer(call)
    number, _ = timer.autorange()
    per_call = [t / number for t in timer.repeat(repeat=15, number=number)]
    return statistics.median(per_call) * 1000


async def jaxplay_median_ms(code: str, args_expr: str, transforms: list[str]) -> float:
    request = RunRequest(
        code=code, args=args_expr, transforms=[{"name": t} for t in transforms], outputs=["timing"]
    )
    handle = await SubprocessPool(1).submit(request, "bench")
    events = [e async for e in handle.events()]
    rows = next(e for e in events if e["type"] == "timing")["rows"]
    return rows[-1]["median_ms"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per case")
    rounds = parser.parse_args().rounds
    print(f"jax {jax.__version__}, {rounds} alternating rounds per case, medians of medians")
    print(f"{'case':18} {'jaxplay ms':>11} {'timeit ms':>10} {'ratio':>7}")
    worst = 0.0
    for name, (code, args, transforms) in CASES.items():
        ours, theirs = [], []
        for _ in range(rounds):
            ours.append(asyncio.run(jaxplay_median_ms(code, args, transforms)))
            theirs.append(in_process_median_ms(code, args, transforms))
        a, b = statistics.median(ours), statistics.median(theirs)
        worst = max(worst, abs(a / b - 1))
        print(f"{name:18} {a:11.4f} {b:10.4f} {a / b:7.3f}")
    print(f"largest disagreement: {worst * 100:.1f} % (target: within 10 %)")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.support.reproduce import announce

    announce()
    main()
