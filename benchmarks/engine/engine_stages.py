"""Where jaxplay's engine spends a run beyond plain JAX, stage by stage: both in ONE
warm process pinned to one CPU (as a jail is), interleaved edit by edit, each stage's
wall time and CPU time (``time.process_time``: every thread of the process).

CPU time is the figure to read on a shared, loaded machine: a stage's wall time
counts the time other processes held the CPU, its CPU time only the work done. The
engine runs ``run_message`` (every output with its source map, the events), its
stages and each output's make timed; plain JAX runs the notebook cell of
``benchmarks/support/plain_jax.py`` (what a user types), its steps timed under the engine's
stage names. ``outside stages`` is the engine's run less its stages and outputs
(the request, the events, the run's set-up). The cases and edits are
``benchmarks/engine/edit_loop.py``'s.

    .venv/bin/python benchmarks/engine/engine_stages.py [--only "flax nnx grad,tanh-matmul grad"] [--repeat 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.engine.edit_loop import CASES, request  # noqa: E402
from benchmarks.support import plain_jax  # noqa: E402

T = TypeVar("T")


class Clock:
    """Wall and CPU ms per named step, summed over one run (the engine's ``exec``
    stage is two steps: the module, the entry), one figure per run."""

    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}
        self._run: dict[str, list[float]] = {}
        self.engine_steps_cpu = 0.0

    def time(self, name: str, step: Callable[[], T]) -> T:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return step()
        finally:
            used = (time.process_time() - cpu) * 1000
            sums = self._run.setdefault(name, [0.0, 0.0])
            sums[0] += (time.perf_counter() - wall) * 1000
            sums[1] += used
            if name.startswith("engine "):
                self.engine_steps_cpu += used

    def end_run(self) -> None:
        for name, (wall, cpu) in self._run.items():
            self.wall.setdefault(name, []).append(wall)
            self.cpu.setdefault(name, []).append(cpu)
        self._run.clear()
        self.engine_steps_cpu = 0.0


def instrument(clocks: list[Clock]) -> None:
    """Time the engine's stages (``Run.staged``) and its outputs' makers on the
    last clock of ``clocks`` (the case's)."""
    import dataclasses

    from sandbox.engine.core import registry, run

    row = registry.row

    def timed_row(name: str) -> Any:
        output = row(name)
        make = output.make
        if make is None:
            return output

        def timed(r: Any, make: Any = make) -> Any:
            return clocks[-1].time(f"engine out:{name}", lambda: make(r))

        return dataclasses.replace(output, make=timed)

    registry.row = timed_row  # type: ignore[assignment]
    staged = run.Run.staged

    def timed_stage(self: Any, stage: str, fn: Any, *, report: bool = True) -> Any:
        return staged(self, stage, lambda: clocks[-1].time(f"engine {stage}", fn), report=report)

    run.Run.staged = timed_stage  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="flax nnx grad", help="cases (comma-separated)")
    parser.add_argument(
        "--repeat", type=int, default=10, help="edits per case, after two warm-up runs"
    )
    args = parser.parse_args()
    cases = [c.strip() for c in args.only.split(",")]
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"no such case: {', '.join(sorted(unknown))} (cases: {', '.join(CASES)})")
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    from sandbox.engine import worker
    from sandbox.protocol import RunRequest

    devnull = os.open(os.devnull, os.O_WRONLY)
    loads = [os.getloadavg()[0]]
    clocks: list[Clock] = []
    instrument(clocks)
    for case in cases:
        clock = Clock()
        clocks.append(clock)

        def engine(edit: int, case: str = case) -> None:
            body = {k: v for k, v in request(case, edit).items() if k != "cache"}
            message = {
                "protocol": 1,
                "run_id": "stages",
                "request": RunRequest(**body).model_dump(),
            }
            worker.run_message(message, devnull)

        def plain(edit: int, case: str = case, clock: Clock = clock) -> None:
            plain_jax.plain_cell(request(case, edit), lambda n, s: clock.time(f"plain {n}", s))

        for edit in range(2):  # the first runs: the cell's eager compiles, JAX's caches
            engine(edit)
            plain(edit + 5000)
        clock.end_run()
        clock.wall.clear()
        clock.cpu.clear()
        outside: list[float] = []
        for edit in range(2, 2 + args.repeat):
            clock.time("ENGINE run", lambda edit=edit: engine(edit))  # type: ignore[misc]
            outside.append(clock._run["ENGINE run"][1] - clock.engine_steps_cpu)
            clock.end_run()
            clock.time("PLAIN cell", lambda edit=edit: plain(edit + 5000))  # type: ignore[misc]
            clock.end_run()
        sys.stdout = sys.__stdout__
        loads.append(os.getloadavg()[0])
        print(f"{case}: {args.repeat} edits, one CPU; medians in ms, wall / CPU")
        order = sorted(
            clock.cpu, key=lambda n: (n.split()[0].lower(), -statistics.median(clock.cpu[n]))
        )
        for name in order:
            wall, cpu = statistics.median(clock.wall[name]), statistics.median(clock.cpu[name])
            print(f"  {name:<26}{wall:9.1f} /{cpu:7.1f}")
        print(f"  {'ENGINE outside stages':<26}{'':9} /{statistics.median(outside):7.1f}")
        engine_cpu = statistics.median(clock.cpu["ENGINE run"])
        plain_cpu = statistics.median(clock.cpu["PLAIN cell"])
        print(f"  engine / plain JAX, CPU time: {engine_cpu / plain_cpu:.2f}")
    print(f"load average (1 min): {' -> '.join(f'{x:.1f}' for x in loads)}")


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
