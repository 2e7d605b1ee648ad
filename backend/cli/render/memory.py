"""``jaxplay run --output memory``'s text: the peak, the timeline of bytes live over
XLA's schedule (a bar per point, drawn in characters), the values live at XLA's peak,
and the buffers XLA assigned."""

from __future__ import annotations

from typing import Any

#: the width of the timeline's bars, in characters; at most this many rows are drawn
BAR_WIDTH = 40
MAX_ROWS = 64


def memory_text(event: dict[str, Any], tag: str, notes: list[str]) -> str:
    lines = [f"── memory{tag}: peak {_bytes(event.get('peak_bytes'))} (memory_analysis()) ──"]
    timeline = event.get("timeline")
    if timeline:
        lines += _timeline(timeline)
        lines.append("  buffers XLA assigned:")
    for b in event.get("buffers", []):
        where = f"line {b['line']}" if b.get("line") else ""
        shape = f"{b['dtype']}[{','.join(map(str, b['shape']))}]"
        lines.append(
            f"  {b['bytes']:>12,} B  {b['kind']:<8} {shape:<24} {b.get('name', '')}  {where}"
        )
    return "\n".join(lines + notes)


def _bytes(value: Any) -> str:
    return "-" if value is None else f"{value:,} B"


def _timeline(timeline: dict[str, Any]) -> list[str]:
    stride, points = timeline["stride"], timeline["points"]
    peak_at = timeline["peak_instruction"] or "?"
    where = f", line {timeline['peak_line']}" if timeline.get("peak_line") else ""
    lines = [
        f"  timeline: {timeline['steps']} steps of XLA's schedule"
        + (f" ({stride} per row, each its busiest)" if stride > 1 else ""),
        f"  XLA's peak: step {timeline['peak_step']} ({peak_at}{where}), "
        f"{timeline['peak_bytes']:,} B live",
    ]
    # a long timeline draws every n-th point, the peak's always
    every = max(1, -(-len(points) // MAX_ROWS))
    peak_point = timeline["peak_step"] // stride
    top = max(points, default=0) or 1
    for i, total in enumerate(points):
        if i % every and i != peak_point:
            continue
        bar = "█" * round(BAR_WIDTH * total / top)
        mark = "  ◀ peak" if i == peak_point else ""
        lines.append(f"  {i * stride:>6} {bar:<{BAR_WIDTH}} {total:>12,} B{mark}")
    lines.append("  bands: " + " · ".join(_band(b, timeline) for b in timeline["bands"]))
    lines.append("  live at the peak:")
    for value in timeline["at_peak"]:
        at = f"line {value['line']}" if value.get("line") else ""
        lines.append(f"  {value['bytes']:>12,} B  {value['kind']:<8} {value['name']}  {at}")
    return lines


def _band(band: dict[str, Any], timeline: dict[str, Any]) -> str:
    at_peak = band["points"][timeline["peak_step"] // timeline["stride"]]
    return f"{band['label']} {at_peak:,} B"
