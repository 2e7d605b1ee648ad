"""The benchmarks' first floor: plain JAX as a notebook user types it, no jaxplay code.

Given jaxplay requests, runs for each what a person would type in a notebook cell to
see the same outputs: the cell (``exec`` of the code, the args), then, for what the
request asks, ``jax.make_jaxpr(g)(*args)`` printed (jaxpr), ``jax.jit(g).lower(*args).as_text()``
(stablehlo), ``.compile().as_text()`` (hlo), the lowered and the compiled
``.cost_analysis()`` (cost: jaxplay's shows both, before and after XLA's optimisation),
and ``jax.block_until_ready(g(*args))`` printed (value), where ``g`` is ``f`` under the request's
transforms (``jax.grad``, ``jax.vmap``, ``jax.jit``...). One warm process (JAX's
caches kept, as a kernel keeps them) with the machine's CPUs.

Run as a child of a benchmark (so that the benchmark itself never imports JAX)::

    python benchmarks/support/plain_jax.py < rounds.json   # [[[case, request], ...], ...]

prints ``{"first": {case: ms}, "later": {case: [ms, ...]}}``: the first round (the
kernel's first run of each cell) apart from the rest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: the outputs plain JAX is asked for, in the order a user would get them
TEXT_STAGES = ("jaxpr", "stablehlo", "hlo", "cost", "value")


def _untimed(name: str, step: Callable[[], T]) -> T:
    return step()


def plain_cell(
    body: dict[str, Any], stage: Callable[[str, Callable[[], Any]], Any] = _untimed
) -> None:
    """The cell as a user runs it: define f and the args, then each requested output
    the way JAX offers it. ``stage(name, step)`` runs each step (a timer may wrap
    them: benchmarks/engine/engine_stages.py), named as the engine names its stages
    (``exec``, ``args``, ``trace``, ``lower``, ``compile``, ``execute``) or outputs."""
    import jax
    import jax.numpy as jnp

    transforms: dict[str, Any] = {"grad": jax.grad, "vmap": jax.vmap, "hessian": jax.hessian,
                  "jacrev": jax.jacrev, "jacfwd": jax.jacfwd, "jit": jax.jit}  # fmt: skip
    outputs = set(body.get("outputs") or TEXT_STAGES)
    namespace: dict[str, Any] = {}
    stage("exec", lambda: exec(compile(body["code"], "<cell>", "exec"), namespace))
    g = namespace["f"]
    for t in body.get("transforms", []):
        g = transforms[t["name"]](g, **{k: v for k, v in t.items() if k != "name"})
    # the args may name the cell's own globals (a model's params), as jaxplay's may
    args = stage(
        "args", lambda: eval(body.get("args") or "()", {**namespace, "jax": jax, "jnp": jnp})
    )
    if "jaxpr" in outputs:
        closed = stage("trace", lambda: jax.make_jaxpr(g)(*args))
        stage("out:jaxpr", lambda: str(closed))  # the cell shows it: printed
    if outputs & {"stablehlo", "hlo", "cost"}:
        lowered = stage("lower", lambda: jax.jit(g).lower(*args))
        if "stablehlo" in outputs:
            stage("out:stablehlo", lowered.as_text)
        if outputs & {"hlo", "cost"}:
            compiled = stage("compile", lowered.compile)
            if "hlo" in outputs:
                stage("out:hlo", compiled.as_text)
            if "cost" in outputs:
                # jaxplay's cost is before and after XLA's optimisation
                stage("out:cost", lambda: (lowered.cost_analysis(), compiled.cost_analysis()))
    if "value" in outputs:
        value = stage("execute", lambda: jax.block_until_ready(g(*args)))
        stage("out:value", lambda: repr(value))  # the cell shows it: printed


def main() -> None:
    rounds: list[list[tuple[str, dict[str, Any]]]] = json.load(sys.stdin)
    pause_s = float(sys.argv[sys.argv.index("--pause") + 1]) if "--pause" in sys.argv else 0.0
    first: dict[str, float] = {}
    later: dict[str, list[float]] = {}
    for i, runs in enumerate(rounds):
        for case, body in runs:
            time.sleep(pause_s)
            started = time.perf_counter()
            plain_cell(body)
            took = (time.perf_counter() - started) * 1000
            if i:
                later.setdefault(case, []).append(took)
            else:
                first[case] = took
    print(json.dumps({"first": first, "later": later}))


def measure(
    rounds: list[list[tuple[str, dict[str, Any]]]], one_cpu: bool = False, pause_s: float = 0.0
) -> dict[str, Any]:
    """Run ``rounds`` in a child process of plain JAX; its timings (see the module).
    ``one_cpu``: the child on one CPU (as a jail is, by default), not the machine's;
    ``pause_s``: idle this long before each run (a person reading the last result)."""
    cpus = sorted(os.sched_getaffinity(0))
    out = subprocess.run(
        [sys.executable, __file__, "--pause", str(pause_s)],
        input=json.dumps(rounds),
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus[:1])) if one_cpu else None,
    )
    if out.returncode != 0:
        raise SystemExit(f"plain JAX failed: {out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


if __name__ == "__main__":
    main()
