"""What the engine makes for each output: one producer per name of
``sandbox.protocol.OUTPUT_TABLE``, in that table's order.

A producer says what it needs (the jaxpr, the lowering, the compiled module, the
value), what it is doing (said when making it fails: that failure is jaxplay's,
not the user's) and makes its event from a pipeline's ``Results``. ``timing`` and
``remarks`` are made by the run itself, once, after every pipeline (``make`` is
None): they need all of them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sandbox.engine import sources
from sandbox.engine.compat import stablehlo_with_locations
from sandbox.engine.sources import mlir_sources
from sandbox.engine.text_parts import ir_events

Needs = Literal["traced", "lowered", "compiled", "executed", "run"]


@dataclass
class Results:
    """What one pipeline has made so far."""

    closed: Any = None
    lowered: Any = None
    compiled: Any = None
    value: Any = None
    #: XLA's dump folder of this compile (sandbox/engine/xla_dump.py), when an
    #: output asked for one
    dump: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Producer:
    needs: Needs
    what: str
    #: its event, or (an IR text over one event's bound) its events in order
    make: Callable[[Results], dict[str, Any] | list[dict[str, Any]]] | None = None
    #: it reads XLA's dump of the compile (passes, asm, memory)
    dumps: bool = False


def _jaxpr(r: Results) -> list[dict[str, Any]]:
    text, spans = sources.printed_jaxpr(r.closed)  # printed once, with its spans
    return _text_event("jaxpr", text, sources.spans_sources, spans)


def _stablehlo(r: Results) -> list[dict[str, Any]]:
    return _stablehlo_event(r.lowered)


def _hlo(r: Results) -> list[dict[str, Any]]:
    return _text_event("hlo", r.compiled.as_text(), sources.hlo_sources)


def _value(r: Results) -> dict[str, Any]:
    from sandbox.engine import values

    return values.value_event(r.value)


def _cost(r: Results) -> dict[str, Any]:
    from sandbox.engine import values

    return values.cost_event(r.compiled, r.lowered)


def _passes(r: Results) -> dict[str, Any]:
    from sandbox.engine import xla_dump

    return xla_dump.passes_event(r.dump, r.compiled.as_text())


def _asm(r: Results) -> dict[str, Any]:
    from sandbox.engine import gpu_target, xla_dump

    event = xla_dump.asm_event(r.dump, r.compiled.as_text())
    return gpu_target.with_autotuning_note(event, r.compiled)


def _memory(r: Results) -> dict[str, Any]:
    from sandbox.engine import gpu_target, tpu_topology, xla_dump

    event = xla_dump.memory_event(r.dump, r.compiled)
    return gpu_target.with_capacity(tpu_topology.with_capacity(event, r.compiled), r.compiled)


def _sharding(r: Results) -> dict[str, Any]:
    from sandbox.engine import sharding

    return sharding.sharding_event(r.compiled, r.lowered)


def _shapes(r: Results) -> dict[str, Any]:
    from sandbox.engine import shapes

    return shapes.shapes_event(r)


def _profile(r: Results) -> dict[str, Any]:
    from sandbox.engine import profile

    return profile.profile_results(r)


def _kernels(r: Results) -> dict[str, Any]:
    from sandbox.engine import kernels

    return kernels.kernels_event(r.closed, r.extra.get("args", ()))


def _autodiff(r: Results) -> dict[str, Any]:
    from sandbox.engine import autodiff

    x = r.extra
    return autodiff.autodiff_event(
        x["function"], x["entry_name"], x["steps"], x["namespace"], x["arguments"], x["mesh"]
    )


def _trace_values(r: Results) -> dict[str, Any]:
    from sandbox.engine import trace_values

    return trace_values.trace_values_results(r)


def _checks(r: Results) -> dict[str, Any]:
    from sandbox.engine import checks

    return checks.checks_event(r)


def _text_event(
    kind: str, text: str, mapper: Callable[..., list[dict[str, int]]], *extra: Any
) -> list[dict[str, Any]]:
    return ir_events(kind, text, _safe_sources(mapper, *extra, text))


def _stablehlo_event(lowered: Any) -> list[dict[str, Any]]:
    text = lowered.as_text()

    def mapper(plain: str) -> list[dict[str, int]]:
        return mlir_sources(plain, stablehlo_with_locations(lowered))

    return ir_events("stablehlo", text, _safe_sources(mapper, text))


def _safe_sources(mapper: Callable[..., list[dict[str, int]]], *args: Any) -> list[dict[str, int]]:
    # A mapping that fails is left empty: the text itself is still exact. Every line
    # is mapped: a long text's map is split with it (text_parts.py).
    try:
        return mapper(*args)
    except Exception as exc:
        print(f"jaxplay: source mapping failed: {type(exc).__name__}: {exc}", file=sys.__stderr__)
        return []


#: One producer per output, in OUTPUT_TABLE's order (tests check both name the same).
PRODUCERS: dict[str, Producer] = {
    "jaxpr": Producer("traced", "printing the jaxpr", _jaxpr),
    "stablehlo": Producer("lowered", "printing the StableHLO", _stablehlo),
    "hlo": Producer("compiled", "printing the HLO", _hlo),
    "value": Producer("executed", "describing the value", _value),
    "cost": Producer("compiled", "reading XLA's cost analysis", _cost),
    "timing": Producer("run", "timing the pipelines"),
    "passes": Producer("compiled", "reading XLA's pass dumps", _passes, dumps=True),
    "asm": Producer("compiled", "disassembling the kernels", _asm, dumps=True),
    "memory": Producer("compiled", "reading XLA's buffer assignment", _memory, dumps=True),
    "remarks": Producer("run", "collecting JAX's remarks"),
    "sharding": Producer("compiled", "describing the shardings", _sharding),
    "shapes": Producer("traced", "finding the shape of each expression", _shapes),
    "profile": Producer("compiled", "profiling the compiled calls", _profile),
    "kernels": Producer("traced", "lowering the Pallas kernels", _kernels),
    "autodiff": Producer("traced", "showing how JAX differentiates", _autodiff),
    "trace_values": Producer("executed", "stepping the jaxpr", _trace_values),
    "checks": Producer("executed", "running the checks", _checks),
}


def wanted(outputs: Sequence[str], needs: Needs) -> list[tuple[str, Producer]]:
    """The requested outputs made at ``needs``, in the table's order."""
    return [(n, p) for n, p in PRODUCERS.items() if n in outputs and p.needs == needs]
