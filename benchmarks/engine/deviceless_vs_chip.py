"""What a deviceless TPU compile predicts (the page's ``tpu_topology``: the sharding
studio's and the memory view's figures without a TPU), against the same program
compiled and run on a real TPU, both through jaxplay's engine.

Run by hand on a machine with a TPU (CI has none). For the page's one-device examples
(benchmarks/engine/on_accelerator.py's list) and the 6-block Flax NNX transformer
(benchmarks/support/scale_programs.py), two processes:

- predicted: ``JAX_PLATFORMS=cpu``, each request with ``tpu_topology`` (a v5e
  topology's compile-only device, under a one-device mesh) and the outputs
  ``memory``, ``cost``, ``profile`` — what a CPU worker with libtpu shows;
- measured: the same requests on the chip (``backend: auto``): the chip's own
  compile (its ``memory_analysis`` and buffer assignment), the profile's measured
  per-instruction times, and the device allocator's peak (``memory_stats``) around
  a run that executes the program once (``value``, no profiler: a profiled run
  takes ~34 MB of trace buffers on the chip first). The allocator's peak is the
  process's, never reset: those runs go in the order of their predicted peak, and a
  run that does not raise it says so.

Prints one row per example; ``--json`` keeps both sides' figures.

    python benchmarks/engine/deviceless_vs_chip.py [--only ID ...] [--json OUT] [--topology v5e:2x2]
                                            [--chip-mesh]

``--chip-mesh`` compiles the chip's side under the same one-device mesh as the
prediction (the page's deviceless request has one): the two are then the same
program, and what differs is the missing device alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.engine.on_accelerator import requests as example_requests  # noqa: E402
from benchmarks.support.scale_programs import request as scale_request  # noqa: E402

OUTPUTS = ["memory", "cost", "profile", "hlo"]
#: the allocator's pass: the program run once, no profiler
ALLOCATOR_OUTPUTS = ["value"]
#: HLO texts kept in --json up to this size (to read why two compiles differ)
MAX_HLO_CHARS = 200_000
#: what each request keeps of the page's: the program (no compare, no export fields)
KEPT = ("code", "args", "transforms", "entry")
ONE_DEVICE_MESH = {"shape": [1], "axis_names": ["x"]}
#: set before libtpu loads (sandbox/engine/core/tpu_topology.py's LIBTPU_ENV): no
#: metadata server is asked, and the chip's lock file is not taken
DEVICELESS_ENV = {"TPU_SKIP_MDS_QUERY": "1", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}


def programs(only: list[str]) -> dict[str, dict[str, Any]]:
    todo, _ = example_requests(only)
    found = {name: {k: v for k, v in body.items() if k in KEPT} for name, body in todo.items()}
    if not only or "transformer-6" in only:
        found["transformer-6"] = {
            k: v for k, v in scale_request("transformer 6").items() if k in KEPT
        }
    return found


# --- one side, in a process of its own ------------------------------------------------


def side_main(side: str, names: list[str], topology: str, out_path: str, mesh: bool) -> None:
    from sandbox.engine import worker
    from sandbox.protocol import RunRequest

    device = None
    if side == "predicted":
        from sandbox.engine.core import tpu_topology

        # libtpu is the one installed beside this JAX (jax[tpu]), not jaxplay's extra
        tpu_topology._load_library = lambda: os.environ.update(DEVICELESS_ENV)
    else:
        import jax

        device = jax.devices()[0]
    todo = programs(names)
    results: dict[str, Any] = {}
    allocator: dict[str, Any] = {}
    if device is not None:  # first, before any profiler's buffers raise the peak
        for name in names:
            body = {**todo[name], "outputs": ALLOCATOR_OUTPUTS, "timeout_s": 300}
            before = device.memory_stats() or {}
            done = run(worker, RunRequest(**body), name)[-1]
            after = device.memory_stats() or {}
            allocator[name] = {
                "status": done.get("status"),
                "peak_before": before.get("peak_bytes_in_use"),
                "peak_after": after.get("peak_bytes_in_use"),
                "in_use_before": before.get("bytes_in_use"),
                "kind": device.device_kind,
            }
    for name in names:
        body = {**todo[name], "outputs": OUTPUTS, "timeout_s": 300}
        if side == "predicted":
            body.update(tpu_topology=topology, mesh=ONE_DEVICE_MESH)
        elif mesh:
            body.update(mesh=ONE_DEVICE_MESH)
        results[name] = summary(run(worker, RunRequest(**body), name))
        if name in allocator:
            results[name]["allocator"] = allocator[name]
        Path(out_path).write_text(json.dumps(results))  # what is done survives a crash


def run(worker: Any, request: Any, name: str) -> list[dict[str, Any]]:
    message = {"protocol": 1, "run_id": f"dvc-{name}", "request": request.model_dump()}
    saved = sys.stdout, sys.stderr, sys.stdin
    with tempfile.TemporaryFile() as sink:
        try:
            worker.run_message(message, sink.fileno())
        finally:
            sys.stdout, sys.stderr, sys.stdin = saved
        sink.seek(0)
        return [json.loads(line) for line in sink.read().decode().splitlines()]


def summary(events: list[dict[str, Any]]) -> dict[str, Any]:
    done = next((e for e in events if e["type"] == "done"), {})
    memory = next((e for e in events if e["type"] == "memory"), {})
    cost = next((e for e in events if e["type"] == "cost"), {})
    profile = next((e for e in events if e["type"] == "profile"), {})
    hlo = next((e for e in events if e["type"] == "hlo"), {})
    hlo_text = "" if hlo.get("parts") else str(hlo.get("text") or "")  # a big one: in parts
    timeline = memory.get("timeline") or {}
    peaks = profile.get("peaks") or {}
    rows = profile.get("rows") or []
    return {
        "status": done.get("status"),
        "reason": done.get("reason", "")[:300],
        "errors": [
            f"{e.get('stage')}: {e.get('message', '')[:300]}"
            for e in events
            if e["type"] == "error"
        ],
        "peak_bytes": memory.get("peak_bytes"),
        "analysis": memory.get("analysis") or {},
        "live_range_peak": timeline.get("peak_bytes"),
        "live_range_steps": timeline.get("steps"),
        "live_range_points": timeline.get("points"),
        "peak_instruction": timeline.get("peak_instruction"),
        "device_kind": memory.get("device_kind") or peaks.get("device_kind"),
        "flops": cost.get("flops"),
        "bytes_accessed": cost.get("bytes_accessed"),
        "profile_calls": profile.get("calls"),
        "profile_wall_us": profile.get("wall_us"),
        "rows": [
            {k: r.get(k) for k in ("name", "opcode", "calls", "total_us", "flops", "bytes")}
            for r in rows
        ],
        "peaks": peaks,
        "hlo": hlo_text if len(hlo_text) <= MAX_HLO_CHARS else None,
        "notes": [n for e in events for n in (e.get("notes") or []) if isinstance(n, str)][:20],
    }


def run_side(
    side: str, names: list[str], topology: str, env: dict[str, str], mesh: bool = False
) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        argv = [sys.executable, __file__, "--side", side, "--out", out.name]
        argv += ["--topology", topology, *(["--chip-mesh"] if mesh else []), "--only", *names]
        proc = subprocess.run(argv, env=env, check=False)
        text = Path(out.name).read_text()
    results = json.loads(text) if text else {}
    if proc.returncode != 0:
        for name in names:
            results.setdefault(name, {"status": f"died {proc.returncode}"})
    return results


# --- comparing ------------------------------------------------------------------------


def roofline_us(row: dict[str, Any], peaks: dict[str, Any]) -> float | None:
    """The least time one call of an instruction can take at the published peaks."""
    flops, moved = row.get("flops"), row.get("bytes")
    if not peaks or not isinstance(flops, (int, float)) or not isinstance(moved, (int, float)):
        return None
    return max(flops / peaks["flops_per_s"], moved / peaks["bytes_per_s"]) * 1e6


def predicted_us(side: dict[str, Any]) -> float | None:
    """The roofline's time of one call: every instruction at the published peaks."""
    times = [roofline_us(r, side.get("peaks") or {}) for r in side.get("rows") or []]
    known = [t for t in times if t is not None]
    return sum(known) if known else None


def measured_us(side: dict[str, Any]) -> float | None:
    """One call's device time: the profiled instructions' times over the calls."""
    calls = side.get("profile_calls") or 0
    rows = side.get("rows") or []
    if not calls or not rows:
        return None
    return sum(r.get("total_us") or 0 for r in rows) / calls


def ratio(a: Any, b: Any) -> str:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or not b:
        return "-"
    return f"{a / b:.3f}"


def fmt(x: Any) -> str:
    return f"{x:,.0f}" if isinstance(x, (int, float)) else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--json")
    parser.add_argument("--topology", default="v5e:2x2")
    parser.add_argument(
        "--chip-mesh", action="store_true", help="the chip's side under the mesh too"
    )
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        side_main(args.side, args.only, args.topology, args.out, args.chip_mesh)
        return
    names = list(programs(args.only))
    started = time.perf_counter()
    cpu_env = {**os.environ, "JAX_PLATFORMS": "cpu", **DEVICELESS_ENV}
    predicted = run_side("predicted", names, args.topology, cpu_env)
    # the allocator's peak only rises: the runs go from the smallest predicted peak up
    # (those with no predicted peak last: they may be large)
    order = sorted(names, key=lambda n: predicted.get(n, {}).get("peak_bytes") or 2**62)
    measured = run_side("measured", order, args.topology, dict(os.environ), args.chip_mesh)
    under = " (both under a one-device mesh)" if args.chip_mesh else ""
    print(f"deviceless ({args.topology}) vs the chip{under}; {time.perf_counter() - started:.0f} s")
    print(
        f"{'example':<22}{'pred peak':>12}{'chip peak':>12}{'alloc peak':>12}"
        f"{'live pred':>11}{'live chip':>11}{'flops p/c':>10}{'bytes p/c':>10}"
        f"{'roofl us':>10}{'chip us':>10}  status"
    )
    for name in order:
        p, m = predicted.get(name, {}), measured.get(name, {})
        alloc = m.get("allocator") or {}
        raised = (alloc.get("peak_after") or 0) > (alloc.get("peak_before") or 0)
        alloc_peak = (alloc["peak_after"] - (alloc.get("in_use_before") or 0)) if raised else None
        print(
            f"{name:<22}{fmt(p.get('peak_bytes')):>12}{fmt(m.get('peak_bytes')):>12}"
            f"{(fmt(alloc_peak) if raised else '<= earlier'):>12}"
            f"{fmt(p.get('live_range_peak')):>11}{fmt(m.get('live_range_peak')):>11}"
            f"{ratio(p.get('flops'), m.get('flops')):>10}"
            f"{ratio(p.get('bytes_accessed'), m.get('bytes_accessed')):>10}"
            f"{(f'{predicted_us(p):.2f}' if predicted_us(p) is not None else '-'):>10}"
            f"{(f'{measured_us(m):.2f}' if measured_us(m) is not None else '-'):>10}"
            f"  {p.get('status')}/{m.get('status')}"
        )
        for side, got in (("predicted", p), ("chip", m)):
            for error in got.get("errors", []):
                print(f"    {side} error: {error}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"predicted": predicted, "measured": measured}, indent=1)
        )


if __name__ == "__main__":
    from benchmarks.support.reproduce import announce

    announce()
    main()
