"""The ``profile`` output: where a compiled program's time goes, per HLO instruction.

The pipeline's compiled call (the one ``timing`` measures) runs once more, a few
times, under ``jax.profiler.trace`` into a private folder under the run's ``/tmp``
(deleted afterwards). JAX writes a Perfetto/Chrome trace (``perfetto_trace.json.gz``,
plain JSON: no TensorFlow or TensorBoard needed to read it); on CPU each executed
thunk is one event with ``args.hlo_op``, the HLO instruction (a fusion, a dot...) it
runs; on a TPU each instruction the chip ran is an event named after it on the
device's own ``XLA Ops`` line (process ``/device:TPU:0``, times by the chip's clock;
``executed`` reads both). Those events become rows (calls, total time) joined to the
instruction's line in the ``hlo`` output and to the user's line (core/sources.py),
with the roofline figures of roofline.py; the first events become a timeline;
the execution trace itself (without the Python tracer's events) is handed back
gzipped, for download or Perfetto.

A compile that makes ``profile`` runs under the profiler too (its row's
``traces_compile``, core/profiler.py): XLA
marks each pass pipeline and each pass in it, so the leaf passes' times are read
from that trace (``pass_times``).
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from sandbox.engine.core.output import Output, Results
from sandbox.engine.core.profiler import Trace, tracing
from sandbox.engine.core.sources import hlo_sources
from sandbox.engine.outputs.profile import roofline
from sandbox.protocol.limits import (
    MAX_MESSAGE_CHARS,
    MAX_NOTES,
    MAX_PROFILE_PASSES,
    MAX_PROFILE_ROWS,
    MAX_TIMELINE_EVENTS,
    MAX_TRACE_GZ_BYTES,
)

#: the profiled calls: at least one, until this long has passed, at most MAX_CALLS
PROFILE_BUDGET_S = 0.05
MAX_CALLS = 10
_PIPELINE_SRC = "hlo_pass_pipeline.cc"


def _spans(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e
        for e in events
        if e.get("ph") == "X"
        and isinstance(e.get("ts"), int | float)
        and isinstance(e.get("dur"), int | float)
    ]


#: the line of a device's trace (process ``/device:...``) where each event is one HLO
#: instruction the device ran, named as in the compiled module (seen on TPU v5e,
#: JAX 0.10.2: ``fusion.3``, ``convolution_tanh_fusion``, ``copy-start``)
_DEVICE_OPS_LINE = "XLA Ops"


def executed(events: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(instruction name, event) of each executed HLO instruction in the trace: the
    host's thunk events that name theirs (``args.hlo_op``: CPU), and the events of a
    device's ``XLA Ops`` line (TPU), in the trace's order."""
    processes = {
        e.get("pid"): str((e.get("args") or {}).get("name", ""))
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    device_ops = {
        (e.get("pid"), e.get("tid"))
        for e in events
        if e.get("ph") == "M"
        and e.get("name") == "thread_name"
        and (e.get("args") or {}).get("name") == _DEVICE_OPS_LINE
        and processes.get(e.get("pid"), "").startswith("/device:")
    }
    out = []
    for e in _spans(events):
        args = e.get("args")
        if isinstance(args, dict) and "hlo_op" in args:
            out.append((str(args["hlo_op"]), e))
        elif (e.get("pid"), e.get("tid")) in device_ops:
            out.append((str(e.get("name", "")), e))
    return out


def pass_times(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each leaf HLO pass's time in one compile: a span directly inside a pass
    pipeline's span (XLA marks those from hlo_pass_pipeline.cc) that holds no
    pipeline itself, grouped by (pipeline, pass), in order of first run. Leaves do
    not overlap, so their sum is at most the compile's time."""
    spans = _spans(events)
    by_thread: dict[Any, list[dict[str, Any]]] = {}
    for e in spans:
        by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for thread in by_thread.values():
        thread.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[dict[str, Any]] = []
        for e in thread:
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
                stack.pop()
            e["_parent"] = stack[-1] if stack else None
            stack.append(e)
        for e in thread:
            parent = e["_parent"]
            if parent is not None and _is_pipeline(parent) and not _is_pipeline(e):
                e["_leaf"] = True
        for e in thread:  # a leaf holding a pipeline is not a leaf
            if _is_pipeline(e):
                up = e["_parent"]
                while up is not None:
                    up.pop("_leaf", None)
                    up = up["_parent"]
        for e in thread:
            if e.pop("_leaf", False) and e["name"] != "RunInvariantCheckers":
                pipeline = str(e["_parent"]["name"]).rsplit(" (", 1)[0]
                row = rows.setdefault(
                    (pipeline, str(e["name"])),
                    {
                        "pipeline": pipeline[:256],
                        "pass": str(e["name"])[:256],
                        "calls": 0,
                        "total_us": 0.0,
                    },
                )
                row["calls"] += 1
                row["total_us"] += float(e["dur"])
        for e in thread:
            e.pop("_parent", None)
    return list(rows.values())[:MAX_PROFILE_PASSES]


def _is_pipeline(e: dict[str, Any]) -> bool:
    args = e.get("args")
    return isinstance(args, dict) and str(args.get("_src", "")).endswith(_PIPELINE_SRC)


def profiled_calls(
    fn: Callable[..., Any], args: Callable[[], tuple[Any, ...]]
) -> tuple[Trace, float, int, int]:
    """Call ``fn`` under the profiler, its output muted (counted): the trace, the
    calls' wall time (µs, each call's own; fresh arguments are made outside the
    clock), how many calls, how many lines they printed."""
    import jax

    saved = sys.stdout, sys.stderr
    sink = io.StringIO()
    sys.stdout = sys.stderr = sink
    wall, calls = 0.0, 0
    try:
        jax.block_until_ready(fn(*args()))  # warm: the profile is of steady calls
        with tracing() as trace:
            deadline = time.perf_counter() + PROFILE_BUDGET_S
            while calls < 1 or (calls < MAX_CALLS and time.perf_counter() < deadline):
                call_args = args()
                start = time.perf_counter()
                jax.block_until_ready(fn(*call_args))
                wall += time.perf_counter() - start
                calls += 1
    finally:
        sys.stdout, sys.stderr = saved
    assert trace is not None
    return trace, wall * 1e6, calls, sink.getvalue().count("\n")


def profile_results(results: Results) -> dict[str, Any]:
    """The pipeline's profile event, from its ``Results``: the compiled program, the
    compile's trace, the pipeline and its arguments."""
    import jax

    from sandbox.engine.core.pipeline import copy_args

    compiled = results.compiled
    compile_trace = results.compile_trace
    passes = pass_times(compile_trace.events) if compile_trace and compile_trace.events else None
    notes = [compile_trace.note] if compile_trace and compile_trace.note else []
    if compile_trace is not None:
        notes.append(
            "the compile ran under JAX's profiler: its stage time includes the profiler's cost"
        )
    if not passes:
        # libtpu's compiler (a tpu_topology compile) marks no pass in this trace
        notes.append("the profiler's trace of the compile marks no HLO pass: no pass times")
        passes = None
    args, pipe = results.pipeline.run.args, results.pipeline.pipe
    leaves = jax.tree_util.tree_leaves(args)
    if any(isinstance(leaf, jax.ShapeDtypeStruct) for leaf in leaves):
        return _static_event(compiled, passes, notes)
    dynamic = pipe.dynamic_args(args)
    fresh = (lambda: copy_args(dynamic)) if pipe.donates else (lambda: dynamic)
    trace, wall_us, calls, printed = profiled_calls(compiled, fresh)
    if trace.note:
        notes.append(trace.note)
    if printed:
        notes.append(f"{printed} lines printed during the profiled calls are not shown")
    return profile_event(compiled, trace.events, wall_us, calls, passes, notes)


def _static_event(
    compiled: Any, passes: list[dict[str, Any]] | None, notes: list[str]
) -> dict[str, Any]:
    """A compile for devices this worker does not have (a TPU topology, a GPU target):
    nothing runs, so no times; the roofline's side is each instruction's arithmetic
    intensity against the device's published peaks."""
    hlo = compiled.as_text()
    module = roofline.parse_module(hlo)
    user_lines = {s["out_line"]: s["line"] for s in hlo_sources(hlo)}
    kind = _compiled_device_kind(compiled)
    peaks = roofline.published_peaks(kind) if kind else None
    if peaks is None:
        notes.append(
            f"no published peaks of {kind or 'this device'} in jaxplay's table: no roofline"
        )
    entry = list(module.computations)[-1] if module.computations else ""
    rows = []
    for inst in module.computations.get(entry, []):
        if inst.opcode in _NOT_RUN:
            continue
        row = _row(module, inst.name, user_lines)
        row.update(flops_per_s=None, bytes_per_s=None)
        row["bound"] = (
            roofline.bound(row["flops"] or 0, row["bytes"] or 0, peaks) if peaks else None
        )
        rows.append(row)
    notes.append("compiled for devices this worker does not have: nothing ran, so no times")
    return {
        "type": "profile", "calls": 0, "wall_us": 0.0, "rows": rows[:MAX_PROFILE_ROWS],
        "timeline": [], "trace_gz": None, "passes": passes, "peaks": peaks,
        "notes": [n[:MAX_MESSAGE_CHARS] for n in notes][:MAX_NOTES],
    }  # fmt: skip


_NOT_RUN = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}


def _compiled_device_kind(compiled: Any) -> str:
    """The device kind the program was compiled for, from its first argument's
    sharding: a leaf of the arguments' pytrees (a model's parameters are a dict of
    them; the first argument's own sharding is then a dict, not a sharding)."""
    import jax

    shardings = jax.tree_util.tree_leaves(
        compiled.input_shardings, is_leaf=lambda s: hasattr(s, "device_set")
    )
    for sharding in shardings:
        for device in getattr(sharding, "device_set", ()):
            return str(device.device_kind)
    return ""


def profile_event(
    compiled: Any,
    events: list[dict[str, Any]],
    wall_us: float,
    calls: int,
    passes: list[dict[str, Any]] | None,
    notes: list[str] | None = None,
) -> dict[str, Any]:
    hlo = compiled.as_text()
    module = roofline.parse_module(hlo)
    user_lines = {s["out_line"]: s["line"] for s in hlo_sources(hlo)}
    notes = list(notes or [])
    ran = executed(events)
    rows: dict[str, dict[str, Any]] = {}
    unknown = 0
    for name, e in ran:
        if name not in module.instructions:
            unknown += 1  # not an instruction of this module's text (another program's)
            continue
        row = rows.get(name)
        if row is None:
            row = rows[name] = _row(module, name, user_lines)
        row["calls"] += 1
        row["total_us"] += float(e["dur"])
    if unknown:
        notes.append(f"{unknown} traced events named no instruction of this HLO: not shown")
    peaks = _peaks()
    for row in rows.values():
        _roofline(row, peaks)
    ordered = sorted(rows.values(), key=lambda r: -r["total_us"])
    if len(ordered) > MAX_PROFILE_ROWS:
        notes.append(f"{len(ordered) - MAX_PROFILE_ROWS} more instructions not shown")
    shown = sorted(((n, e) for n, e in ran if n in rows), key=lambda ne: float(ne[1]["ts"]))
    origin = float(shown[0][1]["ts"]) if shown else 0.0
    timeline = [
        {
            "name": name,
            "start_us": round(float(e["ts"]) - origin, 3),
            "dur_us": round(float(e["dur"]), 3),
        }
        for name, e in shown[:MAX_TIMELINE_EVENTS]
    ]
    if len(shown) > MAX_TIMELINE_EVENTS:
        notes.append(
            f"the timeline shows the first {MAX_TIMELINE_EVENTS} of {len(shown)} kernel events"
        )
    if not ran:
        notes.append("the profiler recorded no executed HLO instruction (this JAX version's "
                     "trace may not name them)")  # fmt: skip
    trace, why = _trace_gz(events, {id(e) for _, e in ran})
    if why:
        notes.append(why)
    xla = _xla_totals(compiled)
    if xla:
        flops = sum(r["flops"] or 0 for r in rows.values())
        moved = sum(r["bytes"] or 0 for r in rows.values())
        notes.append(
            f"FLOPs and bytes per instruction are counted from the HLO by XLA's cost rules: the "
            f"executed ones sum to {flops:,.0f} FLOPs and {moved:,.0f} bytes per call; XLA's "
            f"cost_analysis() of the whole program: {xla['flops']:,.0f} FLOPs, {xla['bytes']:,.0f} bytes"
        )
    return {
        "type": "profile",
        "calls": calls,
        "wall_us": round(wall_us, 3),
        "rows": ordered[:MAX_PROFILE_ROWS],
        "timeline": timeline,
        "trace_gz": trace,
        "passes": passes,
        "peaks": peaks,
        "notes": [n[:MAX_MESSAGE_CHARS] for n in notes][:MAX_NOTES],
    }


def _row(module: roofline.Module, name: str, user_lines: dict[int, int]) -> dict[str, Any]:
    inst = module.instructions[name]
    line = user_lines.get(inst.line)
    if line is None and inst.opcode == "fusion":  # a fusion's line: its fused ops'
        called = roofline._CALLS.search(inst.attrs)
        for inner in module.computations.get(called.group(1) if called else "", []):
            if (line := user_lines.get(inner.line)) is not None:
                break
    cost = roofline.instruction_cost(module, name)
    return {
        "name": name,
        "opcode": inst.opcode[:256],
        "calls": 0,
        "total_us": 0.0,
        "hlo_line": inst.line,
        "line": line,
        "flops": cost.flops if cost else None,
        "bytes": cost.bytes if cost else None,
    }


def _roofline(row: dict[str, Any], peaks: dict[str, Any] | None) -> None:
    row["total_us"] = round(row["total_us"], 3)
    per_call_s = row["total_us"] / 1e6 / max(row["calls"], 1)
    flops, moved = row["flops"] or 0, row["bytes"] or 0
    row["flops_per_s"] = flops / per_call_s if per_call_s > 0 and flops else None
    row["bytes_per_s"] = moved / per_call_s if per_call_s > 0 and moved else None
    row["bound"] = roofline.bound(flops, moved, peaks) if peaks else None


def _peaks() -> dict[str, Any] | None:
    try:
        return roofline.measured_peaks()
    except Exception:  # a device that cannot run the microbenchmark: no roofline
        return None


def _xla_totals(compiled: Any) -> dict[str, float]:
    try:
        cost = compiled.cost_analysis()
    except Exception:
        return {}
    if isinstance(cost, list):  # older JAX: one dict per program
        cost = cost[0] if cost else {}
    if not isinstance(cost, dict):
        return {}
    return {"flops": float(cost.get("flops", 0)), "bytes": float(cost.get("bytes accessed", 0))}


def _trace_gz(events: list[dict[str, Any]], kernels: set[int]) -> tuple[str | None, str]:
    """The execution trace as gzipped Chrome trace JSON, base64: the profiler's own
    events, less the Python tracer's (``$file:line`` frames); thinned to the kernels'
    events (``kernels``: the ``id`` of each, as ``executed`` found them), then to the
    first ones, when over MAX_TRACE_GZ_BYTES."""
    kept = [e for e in events if not str(e.get("name", "")).startswith("$")]
    for stage in ("all", "kernels", "cut"):
        if stage == "kernels":
            kept = [e for e in kept if e.get("ph") == "M" or id(e) in kernels]
        if stage == "cut":
            kept = kept[: len(kept) // 4]
        blob = gzip.compress(json.dumps({"traceEvents": kept, "displayTimeUnit": "ns"}).encode(), 6)
        if len(blob) <= MAX_TRACE_GZ_BYTES:
            why = (
                ""
                if stage == "all"
                else f"the trace is thinned to fit {MAX_TRACE_GZ_BYTES // 1024} KiB ({stage})"
            )
            return base64.b64encode(blob).decode(), why
    return None, f"the trace is over {MAX_TRACE_GZ_BYTES // 1024} KiB gzipped: not included"


OUTPUT = Output("compiled", "profiling the compiled calls", profile_results, traces_compile=True)
