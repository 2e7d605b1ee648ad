"""Big programs through jaxplay's engine against plain JAX, stage by stage (issue 32).

The programs of benchmarks/support/scale_programs.py (an unrolled MLP of 10 to 1,000 layers,
a Flax NNX transformer of 6 blocks, the same under ``jax.checkpoint`` and as a
``lax.scan``), each under grad then jit with the page's default outputs, in ONE warm
process pinned to ``--cpus`` CPUs (one, as a jail has, by default), interleaved edit by
edit (each edit a new comment: the cell re-run, its IR the same):

- plain JAX as a notebook user re-runs the cell to see the same things: ``exec`` of the
  code (its eager set-up), ``make_jaxpr`` and ``str`` of it, ``jit(g).lower`` and
  ``as_text``, ``compile`` and ``as_text``, ``cost_analysis``, and one call of the
  compiled executable (the least plain JAX can do for these outputs; it has no
  source maps, shapes or timing);
- plain JAX doing the same work, as a user who wants what jaxplay shows types it in
  the same cell (``same``): besides the above, the cost before optimisation
  (``lowered.cost_analysis()``), the StableHLO with its locations
  (``as_text(debug_info=True)``: which line made each op), the forward's jaxpr (each
  line's shapes) and the timing's calls (``f`` eager and the compiled executable, each
  called as many times as the engine's ``timing`` rows say it did, plus a warm-up);
- jaxplay's engine (``run_message``: every output with its source maps, the events),
  its ``stage`` events and its time to ``done``.

Per program: the medians of each stage side by side, the run's other time (outputs,
source maps, events: ``outputs+``; for ``same``, its extra steps but the timing), to
done, and jaxplay's ratio to each floor; then the CPU time of the
whole (``time.process_time``), the figure to read on a loaded machine, and its ratio. It checks that each run
ended ``ok`` with every IR text whole (``text_part`` events joined) and says the
texts' sizes. The page's columns (longest task, DOM nodes, JS heap) are measured by
the page's own benchmark; ``--page FILE`` (JSON ``{program: {"longest_task_ms",
"dom_nodes", "heap_mb"}}``) prints them beside these.

    .venv/bin/python benchmarks/engine/scale.py [--only "mlp L=10,mlp L=100"] [--repeat 3]
    .venv/bin/python benchmarks/engine/scale.py --only "mlp L=1000" --repeat 1   # minutes
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.support.scale_programs import PROGRAMS, request  # noqa: E402

#: the columns, in the order a run goes through them
STAGES = ["exec", "trace", "lower", "compile", "execute", "timing"]
PLAIN_STEPS = {  # plain JAX's steps, under the engine's stage they stand for
    "exec": ["exec", "args"],
    "trace": ["trace", "str(jaxpr)"],
    "lower": ["lower", "stablehlo text"],
    "compile": ["compile", "hlo text", "cost"],
    "execute": ["execute"],
    "timing": ["timing"],
}
#: the steps the same work adds (``plain_cell(..., timing_runs=...)``)
SAME_WORK_STEPS = ("cost before", "stablehlo locations", "forward jaxpr", "timing")


def plain_cell(
    body: dict[str, Any],
    timing_runs: dict[str, int] | None = None,
    cost_before: bool = False,
    cpu_steps: dict[str, float] | None = None,
) -> dict[str, float]:
    """The cell as a user re-runs it; ms per step (and CPU ms per step into
    ``cpu_steps``). With ``timing_runs`` (the engine's timing rows: label -> calls),
    the same work as the engine's outputs too, the cost before optimisation only where
    the engine made it (``cost_before``)."""
    import jax

    steps: dict[str, float] = {}
    cpus = {} if cpu_steps is None else cpu_steps

    def step(name: str, fn: Callable[[], Any]) -> Any:
        start, cpu = time.perf_counter(), time.process_time()
        out = fn()
        steps[name] = (time.perf_counter() - start) * 1000
        cpus[name] = (time.process_time() - cpu) * 1000
        return out

    namespace: dict[str, Any] = {}
    step("exec", lambda: exec(compile(body["code"], "<cell>", "exec"), namespace))
    args = step("args", lambda: eval(body["args"], namespace))
    f = namespace["f"]
    g = jax.jit(jax.grad(f))
    closed = step("trace", lambda: jax.make_jaxpr(g)(*args))
    step("str(jaxpr)", lambda: str(closed))
    lowered = step("lower", lambda: g.lower(*args))
    step("stablehlo text", lowered.as_text)
    compiled = step("compile", lowered.compile)
    step("hlo text", compiled.as_text)
    step("cost", compiled.cost_analysis)
    step("execute", lambda: jax.block_until_ready(compiled(*args)))
    if timing_runs is None:
        return steps
    if cost_before:
        step("cost before", lowered.cost_analysis)
    step("stablehlo locations", lambda: lowered.as_text(debug_info=True))
    step("forward jaxpr", lambda: str(jax.make_jaxpr(f)(*args)))

    def timing() -> None:
        for label, runs in timing_runs.items():
            fn = f if label.endswith("(eager)") else compiled
            for _ in range(runs + 1):  # and a warm-up
                jax.block_until_ready(fn(*args))

    step("timing", timing)
    return steps


#: what an output's own work is in plain JAX, where plain JAX does part of it
OWN_COST_PLAIN = {
    "jaxpr": "str(jaxpr)",
    "stablehlo": "stablehlo text",
    "hlo": "hlo text",
    "cost": "cost",
}


@contextlib.contextmanager
def own_costs(into: dict[str, float]) -> Iterator[None]:
    """Each output's making and emitting (CPU ms by output name, the figure a loaded
    machine leaves) while held: the engine's ``Run.render`` timed per output, and the
    timing output's hook (it is made after every pipeline)."""
    from sandbox.engine.core import registry
    from sandbox.engine.core import run as runs
    from sandbox.engine.outputs import timing

    names = {registry.row(name).what: name for name in registry.NAMES}
    render, finish = runs.Run.render, timing.TimingHooks.finish

    def add(name: str, start: float) -> None:
        into[name] = into.get(name, 0.0) + (time.process_time() - start) * 1000

    def timed(self: Any, what: str, fn: Callable[[], Any]) -> None:
        start = time.process_time()
        render(self, what, fn)
        add(names.get(what, what), start)

    def timed_finish(self: Any) -> None:
        start = time.process_time()
        finish(self)
        add("timing", start)

    runs.Run.render = timed  # type: ignore[method-assign]
    timing.TimingHooks.finish = timed_finish  # type: ignore[method-assign]
    try:
        yield
    finally:
        runs.Run.render = render  # type: ignore[method-assign]
        timing.TimingHooks.finish = finish  # type: ignore[method-assign]


def engine_run(
    body: dict[str, Any], costs: dict[str, float] | None = None
) -> tuple[float, list[dict[str, Any]]]:
    """jaxplay's engine on the request: ms to ``done`` and its events; each output's
    own making into ``costs`` (``own_costs``)."""
    from sandbox.engine import worker
    from sandbox.protocol import RunRequest

    with tempfile.TemporaryFile() as out, own_costs({} if costs is None else costs):
        message = {
            "protocol": 1,
            "run_id": "scale",
            "request": RunRequest(**{**body, "timeout_s": 600}).model_dump(),
        }
        start = time.perf_counter()
        worker.run_message(message, out.fileno())
        took = (time.perf_counter() - start) * 1000
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__  # the run captured them
        out.seek(0)
        events = [json.loads(line) for line in out.read().decode().splitlines() if line]
    return took, events


def whole_texts(events: list[dict[str, Any]]) -> dict[str, int]:
    """Characters of each IR text, its parts joined; fails on a text left cut."""
    from sandbox.protocol.text_parts import joined

    sizes = {}
    for kind in ("jaxpr", "stablehlo", "hlo"):
        ir = [e for e in events if e["type"] == kind or e.get("output") == kind]
        text, _ = joined(ir)
        assert "more characters not shown" not in text, f"{kind} was cut"
        sizes[kind] = len(text)
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(p for p in PROGRAMS if p != "mlp L=1000"))
    parser.add_argument("--repeat", type=int, default=3, help="edits after one warm-up run")
    parser.add_argument("--cpus", type=int, default=1, help="CPUs of the process (a jail: 1)")
    parser.add_argument("--page", type=Path, help="the page's figures (JSON), printed beside")
    parser.add_argument(
        "--cost-before",
        action="store_true",
        help="ask for the cost before optimisation too (the request's cost_before)",
    )
    args = parser.parse_args()
    names = [n.strip() for n in args.only.split(",")]
    unknown = set(names) - set(PROGRAMS)
    if unknown:
        parser.error(f"no such program: {', '.join(sorted(unknown))} (have: {', '.join(PROGRAMS)})")
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[: args.cpus]))
    page = json.loads(args.page.read_text()) if args.page else {}
    loads = [os.getloadavg()[0]]
    rows = []
    for name in names:
        plain: list[dict[str, float]] = []
        same: list[dict[str, float]] = []
        engine: list[tuple[float, dict[str, float]]] = []
        own: list[dict[str, float]] = []
        sizes: dict[str, int] = {}
        for edit in range(args.repeat + 1):  # the first: the cell's first run, not counted
            body = {**request(name, edit), "cost_before": args.cost_before}
            cpu = time.process_time()
            plain_cpu: dict[str, float] = {}
            steps = plain_cell(body, cpu_steps=plain_cpu)
            steps["cpu"] = (time.process_time() - cpu) * 1000
            cpu = time.process_time()
            costs: dict[str, float] = {}
            took, events = engine_run(body, costs)
            engine_cpu = (time.process_time() - cpu) * 1000
            done = events[-1]
            assert done["type"] == "done" and done["status"] == "ok", (name, done)
            sizes = whole_texts(events)
            stages: dict[str, float] = {}
            for e in events:
                if e["type"] == "stage":
                    key = "exec" if e["stage"] == "args" else e["stage"]
                    stages[key] = stages.get(key, 0.0) + e["ms"]
            stages["cpu"] = engine_cpu
            (timing,) = [e for e in events if e["type"] == "timing"]
            (cost,) = [e for e in events if e["type"] == "cost"]
            runs = {r["label"]: r["runs"] for r in timing["rows"]}
            cpu = time.process_time()
            same_steps = plain_cell(body, runs, cost_before=cost["before"] is not None)
            same_steps["cpu"] = (time.process_time() - cpu) * 1000
            if edit:
                plain.append(steps)
                same.append(same_steps)
                engine.append((took, stages))
                own.append(
                    {k: v - plain_cpu.get(OWN_COST_PLAIN.get(k, ""), 0.0) for k, v in costs.items()}
                )
        rows.append((name, plain, engine, sizes))
        loads.append(os.getloadavg()[0])
        print_row(name, plain, same, engine, sizes, page.get(name, {}))
        print_own(own, plain)
    print(
        f"{args.cpus} CPU(s) for the process; medians of {args.repeat} edits in ms; "
        f"load average (1 min) {' -> '.join(f'{x:.1f}' for x in loads)}"
    )


def print_row(
    name: str,
    plain: list[dict[str, float]],
    same: list[dict[str, float]],
    engine: list[tuple[float, dict[str, float]]],
    sizes: dict[str, int],
    page: dict[str, Any],
) -> None:
    """Plain JAX's least work (``plain``) and the same work (``same``: its extra steps
    under ``outputs+``, but its timing under ``timing``), jaxplay's engine, and the
    engine's ratios to each (wall, then CPU)."""

    def med(values: list[float]) -> float:
        return statistics.median(values)

    def plain_cells(runs: list[dict[str, float]]) -> tuple[list[float | None], float, float]:
        stage = {
            stage: med([sum(p.get(s, 0.0) for s in steps) for p in runs])
            for stage, steps in PLAIN_STEPS.items()
        }
        extra = med([sum(p.get(s, 0.0) for s in SAME_WORK_STEPS if s != "timing") for p in runs])
        total = med([sum(v for k, v in p.items() if k != "cpu") for p in runs])
        cpu = med([p["cpu"] for p in runs])
        cells = [stage.get(s) or None for s in STAGES] + [extra or None, total, None, cpu]
        return cells, total, cpu

    engine_stage = {s: med([st.get(s, 0.0) for _, st in engine]) for s in STAGES}
    engine_total = med([t for t, _ in engine])
    engine_cpu = med([st["cpu"] for _, st in engine])
    outputs = med([t - sum(v for k, v in st.items() if k != "cpu") for t, st in engine])
    texts = ", ".join(f"{k} {v / 1000:,.0f} k" for k, v in sizes.items())
    print(f"{name}  ({texts} characters, whole)")
    header = "".join(
        f"{s:>10}" for s in [*STAGES, "outputs+", "to done", "ratio", "CPU ms", "ratio"]
    )
    print(f"  {'':<8}{header}")
    floors = []
    for label, runs in (("plain", plain), ("same", same)):
        cells, total, cpu = plain_cells(runs)
        floors.append((label, total, cpu))
        print(f"  {label:<8}" + "".join(_cell(c) for c in cells))
    engine_cells: list[float | None] = [*(engine_stage[s] for s in STAGES), outputs, engine_total]
    ratios = "  ".join(
        f"{label} {engine_total / total:.2f}x / {engine_cpu / cpu:.2f}x"
        for label, total, cpu in floors
    )
    print(
        f"  {'jaxplay':<8}"
        + "".join(_cell(c) for c in engine_cells)
        + f"{'':>10}{engine_cpu:>10.0f}"
    )
    print(f"  jaxplay / plain JAX (wall / CPU): {ratios}")
    if page:
        print(
            f"  page: longest task {page.get('longest_task_ms', '?')} ms, "
            f"DOM {page.get('dom_nodes', '?')} nodes, heap {page.get('heap_mb', '?')} MB"
        )
    sys.stdout.flush()


def print_own(own: list[dict[str, float]], plain: list[dict[str, float]]) -> None:
    """Each output's own cost: its making and emitting, less what plain JAX's cell
    spends on the same (the jaxpr's ``str``, the texts, ``cost_analysis``), CPU ms,
    medians, and as a share of plain JAX's whole cell (CPU)."""
    floor = statistics.median([p["cpu"] for p in plain])
    names = sorted(
        {k for o in own for k in o}, key=lambda k: -statistics.median([o.get(k, 0.0) for o in own])
    )
    cells = []
    for name in names:
        ms = statistics.median([o.get(name, 0.0) for o in own])
        cells.append(f"{name} {ms:.0f} ({ms / floor:.0%})")
    total = statistics.median([sum(o.values()) for o in own])
    print(
        f"  each output's own cost, CPU ms (of plain JAX's cell): {', '.join(cells)}; all {total:.0f} ({total / floor:.0%})"
    )
    sys.stdout.flush()


def _cell(value: float | None) -> str:
    return f"{'-':>10}" if value is None else f"{value:>10.0f}"


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
