"""What the understanding outputs add to a run (issue 23's target: at most 2x the run
without them, on the golden corpus): ``autodiff``, ``trace_values``, ``shapes`` and the
``checks`` (all five at once), each added alone to a case's own request; with
``--variants check_grad ...``, one check alone (``check_<name>`` for each check);
``--variants recompiles export``, those outputs (issue 36).

The cases: every golden case (tests/golden/cases) that ends ``ok`` on the installed
JAX, and every example of the page's menu (examples/menu.json, with its compare
pipeline) that does. Each run is a fork of one warm engine (JAX imported once, a
child per run behind the real supervisor: tests/support/warm_engine.py, what the
golden tests use), timed from the request to its ``done`` (wall clock). ``timing`` is
taken out of every variant's outputs (it runs for a fixed budget: it would only
shrink the ratios); an example asks the page's default outputs less timing.

Variants of one case are run in turn, ``--repeats`` rounds of them (the machine is
shared: rounds spread the noise); each variant's time is the median of its rounds,
its ratio that median over the plain run's median. Prints per case, per variant the
median and worst ratio, and the load average before and after.

    .venv/bin/python benchmarks/engine/understanding_cost.py [--repeats 3] [--only NAME ...]
        [--variants trace_values checks check_checkify check_grad] [--checks nans infs]
        [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.support.menu import menu_requests  # noqa: E402
from sandbox.protocol.checks import CHECK_NAMES  # noqa: E402
from tests.golden import case_names, load_case, request_of  # noqa: E402
from tests.support.warm_engine import WarmEngine  # noqa: E402

DEFAULT_OUTPUTS = ["jaxpr", "stablehlo", "hlo", "value", "cost"]
#: the variants run by default: each output alone, the checks all at once
DEFAULT_VARIANTS = ("autodiff", "trace_values", "shapes", "checks")
#: and, when named: ``recompiles`` and ``export`` (the export on the arguments' own
#: shapes, its round trip included), and each check alone (``check_grad``: the
#: request's check ``grad`` only)
VARIANTS = (
    *DEFAULT_VARIANTS,
    "recompiles",
    "export",
    *(f"check_{name}" for name in CHECK_NAMES),
)
#: the checks the ``checks`` variant asks (``--checks``; default: all five at once)
CHECKS_ASKED: list[str] = list(CHECK_NAMES)


def example_cases() -> dict[str, dict[str, Any]]:
    """The page's examples (benchmarks/support/menu.py) with the default outputs less timing,
    each with the fields its menu entry sets (a mesh's entries are left out)."""
    cases = {}
    for name, request in menu_requests().items():
        cases[f"example:{name}"] = {
            **{k: v for k, v in request.items() if k != "outputs"},
            "outputs": list(DEFAULT_OUTPUTS),
            "timeout_s": 120,
        }
    return cases


def golden_cases() -> dict[str, dict[str, Any]]:
    cases = {}
    for name in case_names():
        request = request_of(load_case(name))
        if any(request.get(k) for k in ("lowering_platforms", "gpu_target", "tpu_topology")):
            continue  # nothing runs: checks are refused, the stepper has nothing to step
        request["outputs"] = [o for o in request.get("outputs", DEFAULT_OUTPUTS) if o != "timing"]
        request["timeout_s"] = 120
        cases[f"golden:{name}"] = request
    return cases


def variant(request: dict[str, Any], name: str) -> dict[str, Any]:
    if name == "plain":
        return request
    if name == "checks":
        return {**request, "checks": list(CHECKS_ASKED)}
    if name.startswith("check_"):
        return {**request, "checks": [name.removeprefix("check_")]}
    return {**request, "outputs": [*request["outputs"], name]}


def timed(engine: WarmEngine, request: dict[str, Any]) -> tuple[float, str, list[Any]]:
    start = time.perf_counter()
    events = engine.run(request)
    wall = time.perf_counter() - start
    status = events[-1].get("status", "?") if events else "?"
    return wall, status, events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="*", help="case names containing any of these")
    parser.add_argument("--variants", nargs="*", default=list(DEFAULT_VARIANTS), choices=VARIANTS)
    parser.add_argument(
        "--checks",
        nargs="*",
        default=list(CHECK_NAMES),
        choices=CHECK_NAMES,
        help="the checks the checks variant asks (default: all five)",
    )
    parser.add_argument("--json", help="write the per-case medians here")
    opts = parser.parse_args()
    CHECKS_ASKED[:] = opts.checks

    cases = {**golden_cases(), **example_cases()}
    if opts.only:
        cases = {k: v for k, v in cases.items() if any(o in k for o in opts.only)}
    load_before = os.getloadavg()
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}")
    print(f"{len(cases)} cases, {opts.repeats} rounds, variants: {' '.join(opts.variants)}")
    print(f"checks asked by the checks variant: {' '.join(CHECKS_ASKED)}")
    engine = WarmEngine().start()
    names = ["plain", *opts.variants]
    ratios: dict[str, dict[str, float]] = {v: {} for v in opts.variants}
    medians: dict[str, dict[str, float]] = {}
    try:
        for case, request in cases.items():
            # a first plain run: a case that does not end ok is not a run to add to
            _, status, events = timed(engine, request)
            if status != "ok":
                errors = [e.get("message", "")[:80] for e in events if e["type"] == "error"]
                print(f"{case:44s} skipped: ends {status} {errors[:1]}")
                continue
            times: dict[str, list[float]] = {n: [] for n in names}
            notes = []
            for _ in range(opts.repeats):
                for name in names:
                    wall, status, events = timed(engine, variant(request, name))
                    times[name].append(wall)
                    if status != "ok" and not name.startswith("check"):
                        notes.append(f"{name} ended {status}")
            medians[case] = {n: statistics.median(t) for n, t in times.items()}
            base = medians[case]["plain"]
            line = f"{case:44s} plain {base:6.2f}s"
            for name in opts.variants:
                ratios[name][case] = medians[case][name] / base
                line += f"  {name} {ratios[name][case]:4.2f}x"
            print(line + (f"  ({'; '.join(sorted(set(notes)))})" if notes else ""), flush=True)
    finally:
        engine.stop()
    print()
    for name in opts.variants:
        got = ratios[name]
        if not got:
            continue
        worst = max(got, key=lambda c: got[c])
        over = sorted(c for c, r in got.items() if r > 2.0)
        print(
            f"{name:13s} median {statistics.median(got.values()):4.2f}x  "
            f"worst {got[worst]:4.2f}x ({worst})  over 2x: {len(over)} {over}"
        )
    load_after = os.getloadavg()
    print(f"load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    if opts.json:
        Path(opts.json).write_text(json.dumps({"medians": medians, "ratios": ratios}, indent=1))


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
