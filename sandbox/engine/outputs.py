"""What the engine makes for each output: one producer per name of
``sandbox.protocol.OUTPUT_TABLE``, in that table's order.

A producer says what it needs (the jaxpr, the lowering, the compiled module, the
value), what it is doing (said when making it fails: that failure is jaxplay's,
not the user's) and makes its event from a pipeline's ``Results``. ``timing`` and
``remarks`` are made by the run itself, once, after every pipeline (``make`` is
None): they need all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

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
    make: Callable[[Results], dict[str, Any]] | None = None
    #: it reads XLA's dump of the compile (passes, asm, memory)
    dumps: bool = False


def _jaxpr(r: Results) -> dict[str, Any]:
    from sandbox.engine import sources
    from sandbox.engine.worker import _text_event

    return _text_event("jaxpr", str(r.closed), sources.jaxpr_sources, r.closed)


def _stablehlo(r: Results) -> dict[str, Any]:
    from sandbox.engine.worker import _stablehlo_event

    return _stablehlo_event(r.lowered)


def _hlo(r: Results) -> dict[str, Any]:
    from sandbox.engine import sources
    from sandbox.engine.worker import _text_event

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
}


def wanted(outputs: Sequence[str], needs: Needs) -> list[tuple[str, Producer]]:
    """The requested outputs made at ``needs``, in the table's order."""
    return [(n, p) for n, p in PRODUCERS.items() if n in outputs and p.needs == needs]
