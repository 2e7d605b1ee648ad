"""The ``memory`` output: the buffers XLA assigned, read from XLA's dump of the
compile (core/xla_dump.py), each value with the user's line that made it, and
``memory_analysis()``'s figures."""

from __future__ import annotations

import re
from typing import Any

from sandbox.engine.core import gpu_target, tpu_topology
from sandbox.engine.core.output import Output, Results
from sandbox.engine.core.xla_dump import Dump, instruction_lines, no_dump_note, too_big
from sandbox.protocol.limits import MAX_BUFFERS

_DTYPE_SHAPE = re.compile(r"^([a-z]+[0-9]*)\[([0-9,]*)\]")
_KINDS = (("parameter", "argument"), ("constant", "constant"), ("live-out", "output"))


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
    name = "cpu_after_optimizations-buffer-assignment.txt"
    if name not in files:
        name = next(
            (n for n in files if n.endswith("after_optimizations-buffer-assignment.txt")), ""
        )
    if not name:
        event["notes"].append(no_dump_note() + "; only memory_analysis()'s figures are shown")
        return event
    lines_of = instruction_lines(compiled.as_text())
    buffers = _buffers(dump.read(files[name]), lines_of)
    if len(buffers) > MAX_BUFFERS:
        event["notes"].append(f"{len(buffers) - MAX_BUFFERS} smaller buffers are not shown")
        buffers = sorted(buffers, key=lambda b: -b["bytes"])[:MAX_BUFFERS]
    event["buffers"] = buffers
    return event


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


def _buffers(text: str, lines_of: dict[str, set[int]]) -> list[dict[str, Any]]:
    buffers: list[dict[str, Any]] = []
    kind = "temp"
    for line in text.splitlines():
        if line.startswith("allocation "):
            kind = next((k for word, k in _KINDS if word in line), "temp")
            continue
        value = re.match(
            r"^ value: <\d+ ([\w.-]+)(?: \{[\d,]*\})? @\d+> \(size=(\d+),offset=\d+\): (.+)$", line
        )
        if not value:
            continue
        name, size, shape_text = value.group(1), int(value.group(2)), value.group(3)
        shape = _DTYPE_SHAPE.match(shape_text)
        lines = sorted(lines_of.get(name, ()))
        buffers.append(
            {
                "bytes": size,
                "shape": [int(d) for d in shape.group(2).split(",") if d] if shape else [],
                "dtype": shape.group(1) if shape else shape_text[:256],
                "kind": kind,
                "line": lines[0] if lines else None,
                "name": name[:1024],
            }
        )
    return buffers


def memory_events(r: Results) -> dict[str, Any]:
    assert r.dump is not None, "the row asks for a dump"
    event = memory_event(r.dump, r.compiled)
    return gpu_target.with_capacity(tpu_topology.with_capacity(event, r.compiled), r.compiled)


OUTPUT = Output("compiled", "reading XLA's buffer assignment", memory_events, dumps=("module",))
