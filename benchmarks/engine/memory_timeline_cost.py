"""What the memory timeline costs: the time the memory output takes to make its event
(read XLA's buffer assignment, join it to the code lines) beside the part of it that
reads the live-range dump and builds the timeline (``_timeline``: read and parse the
dump, the values' sizes, points and bands), in this process, on the compile of
jit(grad) of an MLP of ``--layers`` tanh layers (3: 25 scheduled steps; 200: 1,601).

The compile is done once (its dump kept); each of ``--rounds`` rounds times
``memory_event`` whole and the timeline's share of it, the medians printed. Run:
``.venv/bin/python benchmarks/engine/memory_timeline_cost.py [--layers 3 200] [--rounds 50]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from sandbox.engine.core.xla_dump import Dump, instruction_lines  # noqa: E402
from sandbox.engine.outputs.memory import _timeline, memory_event  # noqa: E402
from sandbox.engine.outputs.memory.buffers import buffers_of  # noqa: E402


def mlp(params: list[tuple[jax.Array, jax.Array]], x: jax.Array) -> jax.Array:
    for w, b in params:
        x = jnp.tanh(x @ w + b)
    return jnp.sum(x)


def measure(layers: int, rounds: int) -> None:
    params = [(jnp.ones((64, 64)) * 0.01, jnp.zeros(64)) for _ in range(layers)]
    x = jnp.ones((32, 64))
    with tempfile.TemporaryDirectory() as folder:
        dump = Dump(Path(folder))
        compiled = (
            jax.jit(jax.grad(mlp)).lower(params, x).compile(dump.compiler_options(("module",)))
        )
        files = dump.files()
        assignment = dump.read(files["cpu_after_optimizations-buffer-assignment.txt"])
        hlo_text = compiled.as_text()
        lines_of = instruction_lines(hlo_text)
        buffers = buffers_of(assignment, lines_of)
        whole, part = [], []
        for _ in range(rounds):
            start = time.perf_counter()
            event = memory_event(dump, compiled)
            whole.append(time.perf_counter() - start)
            start = time.perf_counter()
            _timeline(dump, files, hlo_text, assignment, lines_of, buffers, [])
            part.append(time.perf_counter() - start)
    t = event["timeline"]
    print(
        f"{layers} layers: {t['steps']:,} steps ({len(t['points'])} points, stride {t['stride']}), "
        f"peak step {t['peak_step']}, {t['peak_bytes']:,} B; memory event "
        f"{1000 * statistics.median(whole):.2f} ms, of which the timeline "
        f"{1000 * statistics.median(part):.2f} ms (medians of {rounds})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[3, 200])
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    for layers in args.layers:
        measure(layers, args.rounds)


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
