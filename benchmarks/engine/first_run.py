"""Where a new tenant's first run spends its time beyond a later run, outside the jail.

For each edit-loop case (benchmarks/engine/edit_loop.py), as a zygote does: one process
imports JAX and calls ``prepare(thorough=True)``, turns JAX's persistent compilation
cache on (an empty directory per case, as a new jail's tmpfs is), then forks a warm
child per case that runs the worker's warm-ups (``warm_backend()`` and every step it
returns, as the zygote's ``_warm_up`` does while no run has come), then the case's
first run (edit 0) and, in the same process, a later run (edit 1), as a kept process
serves a tenant's next run. Prints, per case, each run's wall time and its ``stage``
events (ms), and the warm child's warm-up CPU seconds. Pinned to one CPU (a jail has
one).

    .venv/bin/python benchmarks/engine/first_run.py [--later 2] [--profile CASE] [--examples]
        [--seeded] [--no-cache] [--no-steps] [--extra MODULE:FUNCTION]

``--profile CASE`` prints a cProfile of that case's first run (cumulative, top 40).
``--examples``: the page's examples (examples/menu.json, one-device ones) instead.
``--seeded``: a first process runs the case and fills the cache, then the measured one
starts: what a trusted seed holding exactly the right entries could give at most.
``--extra``: a further warm-up to try, run after the worker's own (experiments).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.engine.edit_loop import CASES, request  # noqa: E402
from benchmarks.support.menu import menu_requests, one_device  # noqa: E402

STAGES = ["exec", "args", "trace", "lower", "compile", "execute"]


def example_cases() -> dict[str, dict[str, Any]]:
    """The page's examples (benchmarks/support/menu.py) that run on one CPU device: no mesh,
    no pmap. Their code, args and steps; body_of asks edit_loop's outputs."""
    return {
        f"example {name}": {
            k: request[k] for k in ("code", "args", "transforms", "entry") if k in request
        }
        for name, request in menu_requests().items()
        if one_device(request)
    }


def body_of(case: str, edit: int) -> dict[str, Any]:
    """The request of ``case``'s ``edit``-th run (edit_loop's, or an example's with a
    comment that changes from run to run, as an edit does)."""
    if case in CASES:
        return {k: v for k, v in request(case, edit).items() if k != "cache"}
    spec = example_cases()[case]
    return {
        "code": spec["code"] + f"# edit {edit}\n",
        "args": spec["args"],
        "transforms": spec["transforms"],
        **({"entry": spec["entry"]} if "entry" in spec else {}),
        "outputs": ["jaxpr", "stablehlo", "hlo", "value", "cost"],
    }


def run_case(worker: Any, case: str, edit: int, profile: bool = False) -> dict[str, Any]:
    from sandbox.protocol import RunRequest

    body = body_of(case, edit)
    message = {"protocol": 1, "run_id": "first", "request": RunRequest(**body).model_dump()}
    with tempfile.TemporaryFile() as sink:
        saved = sys.stdout, sys.stderr, sys.stdin
        profiler = cProfile.Profile() if profile else None
        started = time.perf_counter()
        cpu = time.process_time()
        try:
            if profiler:
                profiler.enable()
            worker.run_message(message, sink.fileno())
            if profiler:
                profiler.disable()
        finally:
            sys.stdout, sys.stderr, sys.stdin = saved
        wall = (time.perf_counter() - started) * 1000
        cpu = time.process_time() - cpu
        sink.seek(0)
        events = [json.loads(line) for line in sink.read().decode().splitlines()]
    stages: dict[str, float] = {}
    for event in events:
        if event.get("type") == "stage":
            stages[event["stage"]] = stages.get(event["stage"], 0.0) + event["ms"]
        # an example may end in an error on purpose (the sharp bits): the same each run
        if event.get("type") == "done" and event.get("status") != "ok" and case in CASES:
            raise SystemExit(f"{case}: {event}")
    if profiler:
        stats = pstats.Stats(profiler, stream=sys.stderr)
        stats.sort_stats("cumulative").print_stats(40)
        stats.sort_stats("tottime").print_stats(25)
    return {"wall": wall, "cpu": cpu, "stages": stages}


def child(
    case: str, later: int, steps_on: bool, profile: bool, extra: str | None, out: int
) -> None:
    import importlib

    from sandbox.engine import worker

    cpu = time.process_time()
    started = time.perf_counter()
    steps = worker.warm_backend()
    if steps_on:
        for step in steps:
            step()
    if extra:  # an experiment: MODULE:FUNCTION, run after the worker's own warm-ups
        module, _, name = extra.partition(":")
        getattr(importlib.import_module(module), name)(case)
    import gc

    gc.collect()
    gc.freeze()
    warm = {"cpu": time.process_time() - cpu, "wall": (time.perf_counter() - started) * 1000}
    first = run_case(worker, case, 0, profile)
    laters = [run_case(worker, case, edit) for edit in range(1, later + 1)]
    os.write(out, json.dumps({"warm": warm, "first": first, "later": laters}).encode())


def fork_child(
    case: str, cache: str, args: argparse.Namespace, out: int, wait: bool = False
) -> int:
    """A warm child with the cache at ``cache`` runs ``case``, results to ``out``."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            from sandbox.engine.core import persistent_cache

            if not args.no_cache:
                persistent_cache.enable(cache)
            child(case, args.later, not args.no_steps, args.profile == case, args.extra, out)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        os._exit(code)
    if wait:
        os.waitpid(pid, 0)
        os.close(out)
    return pid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--later", type=int, default=2, help="later runs per case")
    parser.add_argument("--profile", default=None, help="cProfile this case's first run")
    parser.add_argument("--no-steps", action="store_true", help="skip warm_backend's steps")
    parser.add_argument("--case", action="append", help="only these cases")
    parser.add_argument(
        "--seeded",
        action="store_true",
        help="first fill the cache with the same case (the most any seed could give)",
    )
    parser.add_argument("--no-cache", action="store_true", help="no persistent cache")
    parser.add_argument(
        "--examples", action="store_true", help="the page's examples instead of edit_loop's cases"
    )
    parser.add_argument(
        "--extra", help="MODULE:FUNCTION(case), a further warm-up to try (experiments)"
    )
    args = parser.parse_args()
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    from sandbox.engine import worker

    worker.prepare(thorough=True)
    cases = args.case or list(example_cases() if args.examples else CASES)
    print(f"load average {os.getloadavg()[0]:.1f}; ms, first run / later run (median)")
    print(f"{'case':<20}{'warm cpu s':>11}" + "".join(f"{s:>15}" for s in ["total", *STAGES]))
    with tempfile.TemporaryDirectory(prefix="jaxplay-first-") as tmp:
        for case in cases:
            cache = os.path.join(tmp, case.replace(" ", "_"))
            os.mkdir(cache, 0o700)
            if args.seeded:  # a process before it fills the cache: what a perfect seed gives
                fork_child(case, cache, args, os.open(os.devnull, os.O_WRONLY), wait=True)
            read, write = os.pipe()
            pid = fork_child(case, cache, args, write)
            chunks = []
            os.close(write)
            while chunk := os.read(read, 1 << 16):
                chunks.append(chunk)
            os.close(read)
            os.waitpid(pid, 0)
            if not chunks:
                print(f"{case}: the child failed")
                continue
            result = json.loads(b"".join(chunks))
            first, laters = result["first"], result["later"]

            def med(values: list[float]) -> float:
                values = sorted(values)
                return values[len(values) // 2] if values else 0.0

            cells = [f"{first['wall']:.0f}/{med([r['wall'] for r in laters]):.0f}"]
            for stage in STAGES:
                a = first["stages"].get(stage, 0.0)
                b = med([r["stages"].get(stage, 0.0) for r in laters])
                cells.append(f"{a:.0f}/{b:.0f}")
            entries = len(os.listdir(cache))
            print(
                f"{case:<20}{result['warm']['cpu']:>11.2f}"
                + "".join(f"{c:>15}" for c in cells)
                + f"  (cache entries {entries}; cpu s first {first['cpu']:.2f},"
                f" later {med([r['cpu'] for r in laters]):.2f})"
            )


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
