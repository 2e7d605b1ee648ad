"""The ``memory`` output: the buffers XLA assigned, read from XLA's dump of the
compile (core/xla_dump.py), each value with the user's line that made it,
``memory_analysis()``'s figures, and the timeline of bytes live over XLA's schedule
with its peak (XLA's live-range dump: ``live_ranges.py``, ``timeline.py``)."""

from __future__ import annotations

from typing import Any

from sandbox.engine.core import gpu_target, tpu_topology
from sandbox.engine.core.output import Output, Results
from sandbox.engine.core.xla_dump import Dump, instruction_lines, no_dump_note, too_big
from sandbox.engine.outputs.memory import live_ranges
from sandbox.engine.outputs.memory.buffers import buffers_of
from sandbox.engine.outputs.memory.shape_sizes import byte_size, instruction_shapes
from sandbox.engine.outputs.memory.timeline import timeline
from sandbox.protocol.limits import MAX_BUFFERS


def memory_event(dump: Dump, compiled: Any) -> dict[str, Any]:
    """The buffers XLA assigned (argument, output, temporary, constant), each value
    with the user's line that made it, and ``memory_analysis()``'s figures; the
    peak is what the executable holds at once: arguments, outputs and temporaries
    (less what outputs alias)."""
    analysis = _memory_analysis(compiled)
    event: dict[str, Any] = {
        "type": "memory",
        "peak_bytes": _peak(analysis),
        "buffers": [],
        "analysis": analysis,
        "notes": [],
    }
    files = dump.files()
    if note := too_big(dump):
        event["notes"].append(note + "; only memory_analysis()'s figures are shown")
        return event
    name = _file(files, "after_optimizations-buffer-assignment.txt")
    if not name:
        event["notes"].append(no_dump_note() + "; only memory_analysis()'s figures are shown")
        return event
    hlo_text = compiled.as_text()
    lines_of = instruction_lines(hlo_text)
    assignment = dump.read(files[name])
    buffers = buffers_of(assignment, lines_of)
    event["timeline"] = _timeline(
        dump, files, hlo_text, assignment, lines_of, buffers, event["notes"]
    )
    if len(buffers) > MAX_BUFFERS:
        event["notes"].append(f"{len(buffers) - MAX_BUFFERS} smaller buffers are not shown")
        buffers = sorted(buffers, key=lambda b: -b["bytes"])[:MAX_BUFFERS]
    event["buffers"] = buffers
    return event


def _file(files: dict[str, Any], suffix: str) -> str:
    """The dump's file of the module's optimised form ending in ``suffix`` (on CPU
    ``cpu_after_optimizations-…``; a GPU's name its own prefix)."""
    if "cpu_" + suffix in files:
        return "cpu_" + suffix
    return next((n for n in files if n.endswith(suffix)), "")


def _timeline(
    dump: Dump,
    files: dict[str, Any],
    hlo_text: str,
    assignment: str,
    lines_of: dict[str, set[int]],
    buffers: list[dict[str, Any]],
    notes: list[str],
) -> dict[str, Any] | None:
    """The timeline from XLA's live-range dump, or None with a note saying why not."""
    name = _file(files, "after_optimizations-live-range.txt")
    if not name:
        notes.append(
            "XLA wrote no live-range dump of this module, so no timeline: this JAX's XLA may "
            "not write one (jax 0.4.38's and 0.6.2's do not; 0.10.2's and 0.12.0.1's do)"
        )
        return None
    try:
        live = live_ranges.parse(dump.read(files[name]))
    except live_ranges.LiveRangeError as exc:
        notes.append(f"XLA's live-range dump is not in a form jaxplay reads ({exc}): no timeline")
        return None
    kinds = {b["name"]: b["kind"] for b in buffers}
    sizes = live_ranges.value_sizes(assignment)
    # the values the buffer assignment lists no size of (a while loop's parameter
    # tuples share its buffers): their shapes' bytes, as XLA's analysis counts them
    shapes = instruction_shapes(hlo_text)
    for r in live.ranges:
        shape = shapes.get(r.instruction) if r.value not in sizes else None
        if shape and (nbytes := byte_size(shape, r.index)) is not None:
            sizes[r.value] = nbytes
    return timeline(live, sizes, lines_of, kinds, notes)


def _memory_analysis(compiled: Any) -> dict[str, int | None]:
    stats = compiled.memory_analysis()
    figures: dict[str, int | None] = {}
    for field in dir(stats):
        if field.endswith("_in_bytes") and not field.startswith("_"):
            value = getattr(stats, field)
            figures[field.removesuffix("_in_bytes")[:48]] = (
                int(value) if value is not None else None
            )
    return dict(sorted(figures.items())[:32])


def _peak(analysis: dict[str, int | None]) -> int | None:
    if analysis.get("peak_memory") is not None:
        return analysis["peak_memory"]
    parts = [analysis.get(k) for k in ("argument_size", "output_size", "temp_size")]
    if any(p is None for p in parts):
        return None
    return max(0, sum(p or 0 for p in parts) - (analysis.get("alias_size") or 0))


def memory_events(r: Results) -> dict[str, Any]:
    assert r.dump is not None, "the row asks for a dump"
    event = memory_event(r.dump, r.compiled)
    return gpu_target.with_capacity(tpu_topology.with_capacity(event, r.compiled), r.compiled)


OUTPUT = Output("compiled", "reading XLA's buffer assignment", memory_events, dumps=("module",))
