"""The page's examples through jaxplay's engine on this machine's accelerator, beside
the same requests on its CPU: what a TPU or GPU worker (docs/deploy.md) shows.

CI has no accelerator; this is run by hand on a machine with one. Every example of
the menu that needs one device (benchmarks/support/menu.py; a mesh's and ``pmap``'s entries
need several) is run with the outputs a run can give without naming them (IR texts,
value, cost, timing, memory, passes, asm, remarks, shapes) plus the entry's own
(profile, kernels, export...), twice: on the default backend (``backend: auto``: the
accelerator where there is one) and on the CPU (``backend: cpu``). Both in ONE process
each, the engine's ``run_message`` as a warm worker calls it: a TPU chip is opened
once (~15 s a process) and one process at a time may hold it.

Prints per example the status on each backend, the outputs that came, the error and
notes the accelerator's run gave, the largest difference of its value from the CPU's
(relative to the CPU's largest magnitude), and its compiled pipeline's median time
on each. Exits 1 when an example ends ``ok`` on the CPU and not on the accelerator,
an output that came on the CPU did not come on the accelerator, or a backend's
process died (the examples after it did not run there).

    python benchmarks/engine/on_accelerator.py [--only ID ...] [--json OUT]

The libraries' examples need the libraries there: on a machine without a registry,
bring the wheels of the JAX version's library lock (docs/deploy.md, "Again, with the
libraries": ``pip download --no-deps --only-binary=:all: --require-hashes``, then
``pip install --no-index --no-deps --target DIR`` there, DIR after JAX on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.support.menu import menu_requests, one_device  # noqa: E402

#: what every run asks for besides its entry's own outputs
ASKED = [
    "jaxpr", "stablehlo", "hlo", "value", "cost", "timing",
    "memory", "passes", "asm", "remarks", "shapes",
]  # fmt: skip


def requests(only: list[str]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(the examples to run, the examples left out and why)."""
    run, left = {}, {}
    for name, request in menu_requests().items():
        if only and name not in only:
            continue
        if not one_device(request):
            left[name] = f"needs {request.get('devices', 1)} devices"
            continue
        outputs = list(dict.fromkeys([*ASKED, *request.get("outputs", [])]))
        run[name] = {**request, "outputs": outputs, "timeout_s": 300}
    return run, left


# --- one backend's runs, in a process of its own --------------------------------------


def backend_main(backend: str, names: list[str], out_path: str) -> None:
    """Runs the examples on ``backend`` in this process; writes what each showed."""
    from sandbox.engine import worker
    from sandbox.protocol import RunRequest

    todo, _ = requests(names)
    results = {}
    for name, body in todo.items():
        message = {
            "protocol": 1,
            "run_id": f"accel-{name}",
            "request": RunRequest(**{**body, "backend": backend}).model_dump(),
        }
        saved = sys.stdout, sys.stderr, sys.stdin
        started = time.perf_counter()
        with tempfile.TemporaryFile() as sink:
            try:
                worker.run_message(message, sink.fileno())
            finally:
                sys.stdout, sys.stderr, sys.stdin = saved
            sink.seek(0)
            events = [json.loads(line) for line in sink.read().decode().splitlines()]
        results[name] = summary(events, (time.perf_counter() - started) * 1000)
        Path(out_path).write_text(json.dumps(results))  # what is done survives a crash


#: the events of a run that are not an output
NOT_OUTPUTS = {"accepted", "done", "stage", "stdout", "stderr"}


def summary(events: list[dict[str, Any]], wall_ms: float) -> dict[str, Any]:
    done = next((e for e in events if e["type"] == "done"), {})
    accepted = next((e for e in events if e["type"] == "accepted"), {})
    notes: list[str] = []
    for event in events:
        found = event.get("notes") or []
        notes += [n if isinstance(n, str) else json.dumps(n) for n in found]
    value = next(
        (e for e in events if e["type"] == "value" and e.get("pipeline") in (None, "main")), None
    )
    timing = next((e for e in events if e["type"] == "timing"), None)
    return {
        "status": done.get("status"),
        "reason": done.get("reason", ""),
        "wall_ms": wall_ms,
        "worker": accepted.get("worker"),
        "outputs": sorted({e["type"] for e in events} - NOT_OUTPUTS),
        "errors": [
            f"{e.get('stage')}: {e.get('kind')}: {e.get('message', '')[:300]}"
            for e in events
            if e["type"] == "error"
        ],
        "notes": notes,
        "leaves": [leaf.get("data") for leaf in (value or {}).get("tree", [])],
        "timing": [
            (r.get("label"), r.get("median_ms"), r.get("pipeline"))
            for r in (timing or {}).get("rows", [])
        ],
    }


def run_backend(backend: str, names: list[str], env: dict[str, str]) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--backend-run",
                backend,
                "--out",
                out.name,
                "--only",
                *names,
            ],
            env=env,
            check=False,
        )
        text = Path(out.name).read_text()
    results = json.loads(text) if text else {}
    if proc.returncode != 0:  # the process died (a crash in XLA): the rest did not run
        for name in names:
            results.setdefault(name, {"status": f"died {proc.returncode}", "outputs": []})
    return results


# --- comparing the two ------------------------------------------------------------------


def flat(data: Any) -> list[float]:
    if isinstance(data, list):
        return [x for item in data for x in flat(item)]
    if data is None:
        return []
    if isinstance(data, (bool, int, float)):
        return [float(data)]
    if isinstance(data, str):  # "nan", "inf", "-inf"
        return [float(data)] if data in ("nan", "inf", "-inf") else []
    if isinstance(data, dict):  # a complex number
        return flat([data.get("re"), data.get("im")])
    return []


def value_difference(accel: dict[str, Any], cpu: dict[str, Any]) -> str:
    a_leaves, c_leaves = accel.get("leaves") or [], cpu.get("leaves") or []
    if not a_leaves and not c_leaves:
        return ""
    if len(a_leaves) != len(c_leaves):
        return f"{len(a_leaves)} leaves vs {len(c_leaves)}"
    worst, scale = 0.0, 0.0  # the largest difference; the CPU's largest finite magnitude
    for a, c in zip(a_leaves, c_leaves, strict=True):
        av, cv = flat(a), flat(c)
        if len(av) != len(cv):
            return "shapes differ"
        for x, y in zip(av, cv, strict=True):
            if math.isnan(x) or math.isnan(y):
                if math.isnan(x) != math.isnan(y):
                    return "NaN on one side"
                continue
            if math.isfinite(y):
                scale = max(scale, abs(y))
            if x != y:
                worst = max(worst, abs(x - y))
    return f"{worst / scale:.1e}" if scale else ("0" if worst == 0 else f"{worst:.1e} abs")


def main_ms(got: dict[str, Any]) -> float | None:
    """The main pipeline's median time: its last timing row (the first is the function
    run eagerly; a compare pipeline's come after it)."""
    rows = [r for r in got.get("timing", []) if len(r) < 3 or r[2] in (None, "main")]
    return rows[-1][1] if rows else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=[], help="these examples (menu ids)")
    parser.add_argument("--json", help="write every run's summary here")
    parser.add_argument("--backend-run", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.backend_run:
        backend_main(args.backend_run, args.only, args.out)
        return
    todo, left = requests(args.only)
    names = list(todo)
    started = time.perf_counter()
    accel = run_backend("auto", names, dict(os.environ))
    cpu_env = {**os.environ, "JAX_PLATFORMS": "cpu"}  # the CPU run never opens the chip
    cpu = run_backend("cpu", names, cpu_env)
    workers = [r.get("worker") or {} for r in accel.values()]
    kinds = sorted({str(w.get("device_kind") or w.get("platform")) for w in workers})
    print(
        f"jaxplay's engine on this machine's default backend ({', '.join(kinds)}) and on "
        f"its CPU; {time.perf_counter() - started:.0f} s"
    )
    print(
        f"{'example':<22}{'accel':>10}{'cpu':>10}{'value diff':>12}{'accel ms':>10}"
        f"{'cpu ms':>10}  outputs missing on the accelerator"
    )
    failures = []
    for name in names:
        a, c = accel.get(name, {}), cpu.get(name, {})
        missing = sorted(set(c.get("outputs", [])) - set(a.get("outputs", [])))
        a_time, c_time = main_ms(a), main_ms(c)
        print(
            f"{name:<22}{a.get('status')!s:>10}{c.get('status')!s:>10}"
            f"{value_difference(a, c):>12}"
            f"{(f'{a_time:.3f}' if a_time is not None else '-'):>10}"
            f"{(f'{c_time:.3f}' if c_time is not None else '-'):>10}  {', '.join(missing)}"
        )
        for error in a.get("errors", []):
            print(f"    error: {error}")
        for note in dict.fromkeys(a.get("notes", [])):
            print(f"    note: {note[:200]}")
        for backend, got in (("the accelerator", a), ("the CPU", c)):
            if str(got.get("status")).startswith("died"):
                failures.append(f"{name}: its process on {backend} {got['status']} before it ran")
        if c.get("status") == "ok" and a.get("status") != "ok":
            failures.append(
                f"{name}: ok on the CPU, {a.get('status')} here ({a.get('reason', '')[:200]})"
            )
        if missing:
            failures.append(f"{name}: {', '.join(missing)} came on the CPU, not here")
    for name, why in left.items():
        print(f"{name:<22} left out: {why}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"accelerator": accel, "cpu": cpu, "left": left}, indent=1)
        )
    if failures:
        print("\n".join(["", "FAILED:", *failures]))
        raise SystemExit(1)


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
