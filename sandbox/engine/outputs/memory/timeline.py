"""The memory timeline of a compiled module: the bytes live at each step of XLA's
schedule, split into bands by the code line that made them, and XLA's peak with the
values live there (from ``live_ranges.py``'s parse of its dump)."""

from __future__ import annotations

from typing import Any

import numpy as np

from sandbox.engine.outputs.memory.live_ranges import LiveRanges
from sandbox.protocol.limits import MAX_BUFFERS, MAX_MEMORY_BANDS, MAX_MEMORY_POINTS


def timeline(
    live: LiveRanges,
    sizes: dict[str, int],
    lines_of: dict[str, set[int]],
    kinds: dict[str, str],
    notes: list[str],
) -> dict[str, Any]:
    """The ``timeline`` of the memory event: ``points`` (bytes live, one per
    ``stride`` steps: a stride's most), ``bands`` (the same per code line), XLA's
    peak (its step, bytes, instruction, line) and the values live at it."""
    steps = max(live.end, len(live.schedule))
    peak_sizes = dict(live.peak_values)
    missing = [r.value for r in live.ranges if r.value not in sizes and r.value not in peak_sizes]
    if missing:
        notes.append(
            f"{len(missing)} values of XLA's live ranges have no size in its buffer "
            f"assignment ({', '.join(missing[:4])}): counted as 0 bytes"
        )

    def size(value: str) -> int:
        return sizes.get(value, peak_sizes.get(value, 0))

    def line(instruction: str) -> int | None:
        found = sorted(lines_of.get(instruction, ()))
        return found[0] if found else None

    # bytes live at each step per band (a code line, or a kind without one): each
    # value adds its bytes at its start and takes them off after its end, summed along
    # the schedule (linear in values + bands × steps, not in the values' lengths)
    def band(instruction: str) -> tuple[int | None, str]:
        code_line = line(instruction)
        return (code_line, "line" if code_line is not None else kinds.get(instruction, "temp"))

    keys: dict[tuple[int | None, str], int] = {}
    for r in live.ranges:
        keys.setdefault(band(r.instruction), len(keys))
    changes = np.zeros((max(1, len(keys)), steps + 1), dtype=np.int64)
    for r in live.ranges:
        start, end = max(0, r.start), min(r.end, steps - 1)
        if start <= end:
            changes[keys[band(r.instruction)], start] += size(r.value)
            changes[keys[band(r.instruction)], end + 1] -= size(r.value)
    live_bytes = np.cumsum(changes, axis=1)[:, :steps]
    per_band = {key: live_bytes[row] for key, row in keys.items()}
    total = [int(b) for b in live_bytes.sum(axis=0)] if keys else [0] * steps

    stride = max(1, -(-steps // MAX_MEMORY_POINTS))
    # each point is its stride's busiest step, the bands taken at that same step so
    # they stack to the point
    at = [
        max(range(s, min(s + stride, steps)), key=lambda t: (total[t], -t))
        for s in range(0, steps, stride)
    ]
    ranked = sorted(per_band, key=lambda k: (-int(per_band[k].max(initial=0)), k[0] or 0, k[1]))
    shown, rest = ranked[: MAX_MEMORY_BANDS - 1], ranked[MAX_MEMORY_BANDS - 1 :]
    if len(rest) == 1:
        shown, rest = shown + rest, []
    bands = [
        {
            "line": k[0],
            "label": f"line {k[0]}" if k[0] is not None else k[1],
            "points": [int(per_band[k][t]) for t in at],
        }
        for k in shown
    ]
    if rest:
        bands.append(
            {
                "line": None,
                "label": f"{len(rest)} more",
                "points": [int(sum(per_band[k][t] for k in rest)) for t in at],
            }
        )

    peak_step = live.peak_step
    peak_instruction = live.schedule[peak_step] if peak_step < len(live.schedule) else None
    live_at_peak = [r for r in live.ranges if r.start <= peak_step <= r.end]
    at_peak: list[dict[str, Any]] = sorted(
        (
            {
                "name": r.instruction if r.index == "{}" else r.value,
                "bytes": size(r.value),
                "line": line(r.instruction),
                "kind": kinds.get(r.instruction, "temp"),
            }
            for r in live_at_peak
        ),
        key=lambda v: (-int(v["bytes"]), str(v["name"])),
    )
    if len(at_peak) > MAX_BUFFERS:
        notes.append(f"{len(at_peak) - MAX_BUFFERS} smaller values live at the peak are not listed")
        at_peak = at_peak[:MAX_BUFFERS]
    busiest = max(range(steps), key=lambda t: (total[t], -t)) if steps else 0
    if steps and total[busiest] > live.peak_bytes:
        notes.append(
            f"XLA names step {peak_step} the peak ({live.peak_bytes:,} bytes live there); the "
            f"values live at once add up to more at step {busiest} ({total[busiest]:,} bytes): "
            "XLA picks its step by a sweep of its own, which keeps a value one step past its "
            "last use and counts a tuple's element as the tuple's pointers"
        )
    return {
        "steps": steps,
        "stride": stride,
        "points": [total[t] for t in at],
        "bands": bands,
        "peak_step": peak_step,
        "peak_bytes": live.peak_bytes,
        "peak_instruction": peak_instruction,
        "peak_line": line(peak_instruction) if peak_instruction else None,
        "at_peak": at_peak,
    }
