"""The output table: every output a request may name, what it is and what makes it."""

from __future__ import annotations

from dataclasses import dataclass

from sandbox.protocol.events import (
    EVENT_MODELS,
    AsmEvent,
    AutodiffEvent,
    ChecksEvent,
    CostEvent,
    ExportEvent,
    HloEvent,
    JaxprEvent,
    KernelsEvent,
    MemoryEvent,
    NumericsEvent,
    PassesEvent,
    ProfileEvent,
    RecompilesEvent,
    RemarksEvent,
    ShapesEvent,
    ShardingEvent,
    StablehloEvent,
    StageName,
    TimingEvent,
    TraceValuesEvent,
    ValueEvent,
    _Event,
)
from sandbox.protocol.vocabulary import OUTPUTS, Output


@dataclass(frozen=True)
class OutputSpec:
    """What this layer knows of one output. The other layers each keep one table
    keyed by the same names (the engine's outputs, one module each in
    sandbox/engine/outputs/ named as the output; the CLI's renderers,
    backend/cli/render/events.py; the page's panes, frontend/src/model/registry.ts), and tests
    check every table names every output."""

    #: its event type (the output's name is the event's ``type``)
    event: type[_Event]
    #: the stages a run reports when it makes this output (checked by the EventGate)
    stages: tuple[StageName, ...]
    #: made once per pipeline (else once per run, in the main pipeline)
    per_pipeline: bool = True
    #: in a request's outputs when it names none
    default: bool = True
    #: the result cache may keep it: it is what the request and worker determine
    #: (``timing`` is a measurement: never kept)
    cached: bool = True


_COMPILED: tuple[StageName, ...] = ("lower", "compile")
OUTPUT_TABLE: dict[str, OutputSpec] = {
    "jaxpr": OutputSpec(JaxprEvent, ("trace",)),
    "stablehlo": OutputSpec(StablehloEvent, _COMPILED),
    "hlo": OutputSpec(HloEvent, _COMPILED),
    "value": OutputSpec(ValueEvent, ("execute",)),
    "cost": OutputSpec(CostEvent, _COMPILED),
    "timing": OutputSpec(TimingEvent, (*_COMPILED, "timing"), per_pipeline=False, cached=False),
    "passes": OutputSpec(PassesEvent, _COMPILED, default=False),
    "asm": OutputSpec(AsmEvent, _COMPILED, default=False),
    "memory": OutputSpec(MemoryEvent, _COMPILED, default=False),
    "remarks": OutputSpec(RemarksEvent, (), per_pipeline=False, default=False),
    "sharding": OutputSpec(ShardingEvent, _COMPILED, default=False),
    "shapes": OutputSpec(ShapesEvent, ("trace",)),
    # a measurement (the profiled calls' times): never cached
    "profile": OutputSpec(ProfileEvent, _COMPILED, default=False, cached=False),
    "kernels": OutputSpec(KernelsEvent, ("trace",), default=False),
    "autodiff": OutputSpec(AutodiffEvent, ("trace",), default=False),
    # the jaxpr stepped on the arguments (sandbox/engine/outputs/trace_values/), after the run
    "trace_values": OutputSpec(TraceValuesEvent, ("execute",), default=False),
    # made when the request names `checks` (requests.py adds it to the outputs)
    "checks": OutputSpec(ChecksEvent, ("execute",), default=False),
    # JAX's cache misses of the snippet's run and one call of the entry: times, never cached
    "recompiles": OutputSpec(RecompilesEvent, (), per_pipeline=False, default=False, cached=False),
    # jax.export of each pipeline, its artifact called back in a fresh process
    "export": OutputSpec(ExportEvent, ("trace",), default=False),
    # the jaxpr against a float64 shadow, op by op (sandbox/engine/outputs/numerics/)
    # ... and the shadow's time (a measurement): never cached
    "numerics": OutputSpec(NumericsEvent, ("execute",), default=False, cached=False),
}
DEFAULT_OUTPUTS: tuple[Output, ...] = tuple(o for o in OUTPUTS if OUTPUT_TABLE[o].default)
assert tuple(OUTPUT_TABLE) == OUTPUTS, "OUTPUT_TABLE and Output name the same outputs"
assert all(EVENT_MODELS[name] is spec.event for name, spec in OUTPUT_TABLE.items())
