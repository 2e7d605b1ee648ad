"""The ``cost`` output: XLA's own cost and memory analysis of the compiled program,
and, when the request asks (``cost_before``), the same cost figures of the module
before optimisation.

``before`` is asked for, not made by default: ``Lowered.cost_analysis`` converts the
lowered module to HLO a second time (the compile converted it once, inside XLA), 15-45 %
of the compile's own time on every program of benchmarks/engine/scale.py, a cost no other
default output comes near."""

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


def cost_event(compiled: Any, lowered: Any = None, hlo_text: str | None = None) -> dict[str, Any]:
    """XLA's own cost and memory analysis of a compiled executable, and with
    ``lowered`` the same cost figures of the module before optimisation
    (``Lowered.cost_analysis``). ``hlo_text``: the compiled module's text, when it
    was printed already."""
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
        "notes": _partial_notes(compiled.as_text() if hlo_text is None else hlo_text),
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
    before = r.lowered if r.pipeline.run.request.cost_before else None
    return cost_event(r.compiled, before, r.hlo_text())


OUTPUT = Output("compiled", "reading XLA's cost analysis", cost_events)
