"""The ``cost`` output: XLA's own cost and memory analysis of the compiled program,
and the same cost figures of the module before optimisation."""

from __future__ import annotations

from typing import Any

from sandbox.engine.core.compat import cost_analysis
from sandbox.engine.core.output import Output, Results


def _figures(cost: dict[str, Any]) -> dict[str, Any]:
    return {
        "flops": cost.get("flops"),
        "transcendentals": cost.get("transcendentals"),
        "bytes_accessed": cost.get("bytes accessed"),
    }


def _partial_notes(hlo_text: str) -> list[str]:
    notes = []
    if " custom-call(" in hlo_text:
        notes.append("XLA counts no flops for custom calls (library kernels), which this has")
    if " while(" in hlo_text:
        notes.append("XLA counts a loop's body once, not once per iteration; this has a loop")
    return notes


def cost_event(compiled: Any, lowered: Any = None) -> dict[str, Any]:
    """XLA's own cost and memory analysis of a compiled executable, and the same
    cost figures of the module before optimisation (``Lowered.cost_analysis``)."""
    cost = cost_analysis(compiled)
    before = None
    if lowered is not None:
        try:
            before = _figures(cost_analysis(lowered))
        except Exception:  # a lowering XLA cannot analyse before compiling: none
            before = None
    memory = compiled.memory_analysis()

    def mem(name: str) -> int | None:
        value = getattr(memory, f"{name}_size_in_bytes", None)
        return int(value) if value is not None else None

    return {
        "type": "cost",
        **_figures(cost),
        "before": before,
        "notes": _partial_notes(compiled.as_text()),
        "memory": {
            "argument": mem("argument"),
            "output": mem("output"),
            "temp": mem("temp"),
            "generated_code": mem("generated_code"),
            "alias": mem("alias"),
            "peak": getattr(memory, "peak_memory_in_bytes", None),
        },
    }


def cost_events(r: Results) -> dict[str, Any]:
    return cost_event(r.compiled, r.lowered)


OUTPUT = Output("compiled", "reading XLA's cost analysis", cost_events)
