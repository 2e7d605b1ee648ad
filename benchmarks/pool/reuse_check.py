"""What keeping a process across runs costs per run: the check after each run.

In one warm process (no jail; the zygote's warm child does the same), the baseline of
sandbox/zygote/watch.py is taken once, then the edit-loop cases (benchmarks/engine/edit_loop.py)
run one after another through the engine, and after each: the engine's things put
back and the run's garbage collected (``Watch.reset``, ``gc.collect``, ``gc.freeze``),
the in-process check (``Watch.changes``) and the kernel's view from /proc (what the zygote
reads, ``kernel_view`` and ``busy_threads``). Prints medians and the largest, in ms,
and what the check found (it must be nothing: these runs change nothing).

Which implementation compared the namespaces is printed (``state_watch.IDENTITY_CHECK``: the
C extension sandbox/zygote/_identity.c, or Python where it is not built), and beside it,
after the same runs, that comparison alone by each implementation.

    .venv/bin/python benchmarks/pool/reuse_check.py [--rounds 3] [--python]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.engine.edit_loop import CASES, request  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="edits of every case")
    parser.add_argument(
        "--python", action="store_true", help="the check in Python, as where C is not built"
    )
    args = parser.parse_args()
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # as a jail: one CPU
    from sandbox.engine import worker
    from sandbox.protocol import RunRequest
    from sandbox.zygote import kernel_view
    from sandbox.zygote import watch as state_watch

    if args.python:
        state_watch._identity, state_watch.IDENTITY_CHECK = None, "python"  # type: ignore[assignment]
    load = os.getloadavg()[0]
    worker.prepare(thorough=True)
    for step in worker.warm_backend():
        step()
    gc.collect()
    gc.freeze()
    devnull = os.open(os.devnull, os.O_WRONLY)
    started = time.perf_counter()
    watch = state_watch.Watch()
    baseline_ms = (time.perf_counter() - started) * 1000
    kernel = kernel_view.kernel_view(os.getpid())
    parts: dict[str, list[float]] = {"reset+gc": [], "process check": [], "kernel view": []}
    # the namespaces' comparison alone, by each implementation, on the same state
    compare = ["python"] + (["c"] if state_watch._identity is not None else [])
    alone: dict[str, list[float]] = {implementation: [] for implementation in compare}
    found: list[str] = []
    for edit in range(args.rounds):
        for case in CASES:
            body = {k: v for k, v in request(case, edit).items() if k != "cache"}
            message = {"protocol": 1, "run_id": "x", "request": RunRequest(**body).model_dump()}
            worker.run_message(message, devnull)
            t0 = time.perf_counter()
            watch.reset()
            gc.collect()
            gc.freeze()
            t1 = time.perf_counter()
            found += watch.changes()
            t2 = time.perf_counter()
            found += kernel_view.kernel_changes(kernel, kernel_view.kernel_view(os.getpid()))
            kernel_view.busy_threads(os.getpid())
            t3 = time.perf_counter()
            for part, ms in zip(parts, (t1 - t0, t2 - t1, t3 - t2), strict=True):
                parts[part].append(ms * 1000)
            entries = [ns.entry for ns in watch.namespaces.values()]
            for implementation in compare:
                # the C one takes the modules and classes (all of them here), packed
                t4 = time.perf_counter()
                if implementation == "c":
                    assert state_watch._identity is not None and watch._native is not None
                    at = [
                        watch._native_at[i] for i in state_watch._identity.differing(watch._native)
                    ]
                else:
                    at = state_watch._differing(entries)
                alone[implementation].append((time.perf_counter() - t4) * 1000)
                found += [f"{implementation}: {watch._names[i]}" for i in at]
    sys.stdout = sys.__stdout__
    print(f"load average {load:.1f} at the start, one CPU, {args.rounds} rounds of {len(CASES)}")
    print(f"baseline (once per process, while it warms up): {baseline_ms:.1f} ms")
    print(
        f"namespaces compared by: {state_watch.IDENTITY_CHECK} ({len(watch.namespaces)} namespaces,"
        f" {sum(len(ns.keys) for ns in watch.namespaces.values())} attributes;"
        f" {len(watch._other)} of them compared in Python)"
    )
    total = [sum(p) for p in zip(*parts.values(), strict=True)]
    for part, values in [*parts.items(), ("per run, all", total)]:
        print(f"{part:<14} median {statistics.median(values):6.2f} ms, max {max(values):6.2f} ms")
    for implementation, values in alone.items():
        print(
            f"{'namespaces, ' + implementation:<14} median {statistics.median(values):6.2f} ms,"
            f" max {max(values):6.2f} ms (the comparison alone)"
        )
    print(f"changes found: {sorted(set(found)) or 'none'}")


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
