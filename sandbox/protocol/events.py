"""The events of a run: one model per event type, every field typed and bounded.

A worker's line is checked on its raw bytes first (size, JSON values, depth:
``sandbox.protocol.lines``), so that a line of a million ``{}`` costs nothing, then
validated against these models; undeclared fields are dropped. The JSON Schema of
the union (``event_json_schema``) is committed as docs/events.schema.json, and the
page's types are generated from it (scripts/gen_event_types.py). ``done_event`` is
the one maker of a run's last event, ``done``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from sandbox.protocol.checks import (
    MAX_CHECK_RESULTS,
    MAX_GRAD_ORDER,
    CheckName,
    CheckStatus,
    GradMode,
)
from sandbox.protocol.limits import (
    MAX_AUTODIFF_CHARS,
    MAX_AUTODIFF_SOURCES,
    MAX_AUTODIFF_STAGES,
    MAX_BUFFERS,
    MAX_COLLECTIVES,
    MAX_COMPARE,
    MAX_EXPORT_ARTIFACT_BYTES,
    MAX_EXPORT_CALLS,
    MAX_GRID_POINTS,
    MAX_KERNELS,
    MAX_LABEL_CHARS,
    MAX_LEAF_DATA,
    MAX_LEAVES,
    MAX_MEMORY_BANDS,
    MAX_MEMORY_POINTS,
    MAX_MESSAGE_CHARS,
    MAX_NOTES,
    MAX_NUMERICS_ROWS,
    MAX_PASS_ITEMS,
    MAX_PASSES_CHARS,
    MAX_POLICIES,
    MAX_PROFILE_PASSES,
    MAX_PROFILE_ROWS,
    MAX_RECOMPILE_MISSES,
    MAX_RECOMPILE_SITES,
    MAX_REMARKS,
    MAX_REMATS,
    MAX_REPR_CHARS,
    MAX_RESIDUALS,
    MAX_SHAPE_SPANS,
    MAX_SHARD_BLOCKS,
    MAX_SOURCES,
    MAX_STREAM_CHARS,
    MAX_TEXT_CHARS,
    MAX_TEXT_PARTS,
    MAX_TIMELINE_EVENTS,
    MAX_TIMING_ROWS,
    MAX_TRACE_GZ_BYTES,
    MAX_TRACE_ROW_VALUES,
    MAX_TRACE_ROWS,
    MAX_TRACE_VALUES,
    MAX_VALUE_DATA,
    PROTOCOL_VERSION,
)
from sandbox.protocol.vocabulary import (
    DOC_URL_PREFIXES,
    DONE_STATUSES,
    ERROR_STAGES,
    STAGES,
)

_EVENT_CONFIG = ConfigDict(extra="ignore", allow_inf_nan=False, frozen=True)
_RUN_ID = r"^[A-Za-z0-9_-]{1,64}$"
_DOC_URL = "^(" + "|".join(re.escape(p) for p in DOC_URL_PREFIXES) + r")[^\s\"'<>\\]*$"

PipelineId = Literal["main", "0", "1", "2", "3"]
assert PipelineId.__args__ == ("main", *map(str, range(MAX_COMPARE)))  # type: ignore[attr-defined]
StageName = Literal["exec", "args", "trace", "lower", "compile", "execute", "timing"]
ErrorStage = Literal[
    "request", "config", "exec", "args", "transform", "trace", "lower", "compile", "execute",
    "timing", "engine",
]  # fmt: skip
DoneStatus = Literal["ok", "error", "timeout", "killed", "cancelled", "tampered"]
Ms = Annotated[float, Field(ge=0, le=1e9)]
#: counts and sizes: what a JavaScript number holds exactly
Count = Annotated[int, Field(ge=0, le=2**53 - 1)]
Line = Annotated[int, Field(ge=1, le=10_000_000)]
#: A measured number: finite, or named when it is not (the engine writes NaN and
#: infinities as these strings: they are not JSON)
NonFinite = Literal["nan", "inf", "-inf"]
Measure = Annotated[float, Field(allow_inf_nan=False)] | NonFinite
Short = Annotated[str, Field(max_length=256)]


def _text(limit: int, description: str = "") -> Any:
    return Field(max_length=limit, description=description or None)


class _Event(BaseModel):
    model_config = _EVENT_CONFIG


class _PipelineEvent(_Event):
    pipeline: PipelineId = Field(
        "main", description='The pipeline: "main", or the index of a `compare` entry.'
    )


class WorkerIdentity(_Event):
    backend: Short
    platform: Short
    device_kind: Short
    devices: Annotated[int, Field(ge=1, le=65_536)]
    jax_version: Annotated[str, Field(max_length=64)]
    jaxlib_version: Annotated[str, Field(max_length=64)]
    libraries: Annotated[dict[str, Short], Field(max_length=64)] | None = Field(
        None,
        description="The curated libraries installed beside this JAX (name -> version: "
        "sandbox/environments/libraries.py); the result cache's key covers them.",
    )
    matmul_precision: Short | None = Field(
        None,
        description="`jax_default_matmul_precision` as the worker runs (`default`: the "
        "platform's own; on a TPU float32 matrix products pass through bfloat16, about 3 "
        "significant digits, where a CPU computes float32's 7). A request's `config` that "
        "sets it decides its run's.",
    )


class AcceptedEvent(_PipelineEvent):
    """A worker took the run. Made by jaxplay before user code runs; the server
    adds ``cached``, ``cached_at`` and ``age_s`` when the result cache answered."""

    type: Literal["accepted"]
    run_id: Annotated[str, Field(pattern=_RUN_ID)]
    worker: WorkerIdentity
    cached: Literal[True] | None = None
    cached_at: Annotated[str, Field(max_length=32, pattern=r"^[0-9T:+Z-]+$")] | None = Field(
        None, description="When the cached answer was made (ISO 8601, UTC)."
    )
    age_s: Ms | None = Field(None, description="How old the cached answer is, in seconds.")


class StdoutEvent(_PipelineEvent):
    type: Literal["stdout"]
    text: str = _text(MAX_STREAM_CHARS)
    stage: ErrorStage | None = None


class StderrEvent(_PipelineEvent):
    type: Literal["stderr"]
    text: str = _text(MAX_STREAM_CHARS)
    stage: ErrorStage | None = None


class StageEvent(_PipelineEvent):
    type: Literal["stage"]
    stage: StageName
    ms: Ms


class SourceLine(_Event):
    out_line: Line
    line: Line
    eqn: Count | None = None


Sources = Annotated[list[SourceLine], Field(max_length=MAX_SOURCES)]


class _IrTextEvent(_PipelineEvent):
    """An IR text and its source map. A text over one event's bound (MAX_TEXT_CHARS)
    comes in parts: this event holds its first lines and ``parts`` says how many
    ``text_part`` events follow with the rest, in order."""

    text: str = _text(MAX_TEXT_CHARS)
    sources: Sources = Field(default_factory=list)
    parts: Annotated[int, Field(ge=1, le=MAX_TEXT_PARTS - 1)] | None = Field(
        None,
        description="Set when the text is over one event's bound: the `text_part` events "
        "that follow with the rest of it.",
    )
    shown_chars: Count | None = Field(
        None,
        description="With `parts`: the characters of `text` that are the IR; the rest of "
        "`text` is one line saying how much follows (what a client that does not join "
        "parts shows).",
    )
    full_chars: Count | None = Field(
        None, description="With `parts`: the whole text's length in characters."
    )


class JaxprEvent(_IrTextEvent):
    type: Literal["jaxpr"]


class StablehloEvent(_IrTextEvent):
    type: Literal["stablehlo"]


class HloEvent(_IrTextEvent):
    type: Literal["hlo"]


IrOutput = Literal["jaxpr", "stablehlo", "hlo"]


class TextPartEvent(_PipelineEvent):
    """The next part of an IR text announced by its event's ``parts``: its lines and
    their source map (``out_line`` counted from the whole text's first line)."""

    type: Literal["text_part"]
    output: IrOutput
    part: Annotated[int, Field(ge=1, le=MAX_TEXT_PARTS - 1)]
    text: str = _text(MAX_TEXT_CHARS)
    sources: Sources = Field(default_factory=list)


class Summary(_Event):
    min: Measure
    max: Measure
    mean: Measure
    nan_count: Count
    inf_count: Count


#: One element of a leaf's data: a number (a complex one as ``[re, im]``), a bool,
#: NaN or an infinity by name, or the text of an exotic dtype's element
Scalar = (
    bool
    | Annotated[int, Field(ge=-(2**64), le=2**64)]
    | Measure
    | Annotated[list[Measure], Field(min_length=2, max_length=2)]
    | Short
)


class Leaf(_Event):
    path: str = _text(MAX_LABEL_CHARS)
    shape: Annotated[list[Count], Field(max_length=64)]
    dtype: Short
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None
    summary: Summary | None = None
    data: Annotated[list[Scalar], Field(max_length=MAX_LEAF_DATA)] | None = None


class ValueEvent(_PipelineEvent):
    type: Literal["value"]
    repr: str = _text(MAX_REPR_CHARS)
    tree: Annotated[list[Leaf], Field(max_length=MAX_LEAVES)]
    first_leaf: Count | None = Field(
        None,
        description="The index (flatten order) of `tree`'s first leaf: the request's "
        "`value_from`. `tree` holds the leaves [first_leaf, first_leaf + len(tree)).",
    )
    total_leaves: Count | None = Field(
        None, description="The value's leaves in all; more than the page holds: ask from further."
    )
    data_stops_at: Count | None = Field(
        None,
        description="The index of the first leaf the data budget left without `data` (it "
        "and the page's later leaves have `data: null`); null: the budget lasted the page.",
    )

    @model_validator(mode="after")
    def _data_budget(self) -> ValueEvent:
        if sum(len(leaf.data or ()) for leaf in self.tree) > MAX_VALUE_DATA:
            raise ValueError(f"over {MAX_VALUE_DATA} elements of data")
        return self


Notes = Annotated[list[Annotated[str, Field(max_length=MAX_MESSAGE_CHARS)]], Field(max_length=MAX_NOTES)]  # fmt: skip


class CostFigures(_Event):
    flops: Measure | None = None
    transcendentals: Measure | None = None
    bytes_accessed: Measure | None = None


class CostEvent(_PipelineEvent):
    """XLA's cost analysis of the optimised module (``flops``...), the same figures
    of the module before optimisation when the request asks (``before``,
    ``Lowered.cost_analysis``; the request's ``cost_before``), and ``notes`` where
    XLA's figures are known to be partial."""

    type: Literal["cost"]
    flops: Measure | None = None
    transcendentals: Measure | None = None
    bytes_accessed: Measure | None = None
    memory: Annotated[
        dict[Annotated[str, Field(pattern=r"^[a-z_]{1,32}$")], Count | None], Field(max_length=16)
    ] = Field(default_factory=dict)
    before: CostFigures | None = Field(
        None,
        description="The same figures before optimisation: null unless the request asks "
        "(`cost_before`), or where JAX has none.",
    )
    notes: Notes = Field(default_factory=list)


class TimingRow(_Event):
    label: str = _text(MAX_LABEL_CHARS)
    pipeline: PipelineId
    compile_ms: Ms | None = None
    runs: Count
    batches: Count
    median_ms: Ms
    min_ms: Ms
    iqr_ms: Ms


class TimingEvent(_PipelineEvent):
    type: Literal["timing"]
    rows: Annotated[list[TimingRow], Field(max_length=MAX_TIMING_ROWS)]
    notes: Notes = Field(default_factory=list)


HloName = Annotated[str, Field(max_length=MAX_LABEL_CHARS)]


class PassItem(_Event):
    """The module after one HLO pass that changed it: its whole ``text``, or a
    unified ``diff`` from the item before (the first and last items carry text)."""

    model_config = ConfigDict(**_EVENT_CONFIG, populate_by_name=True)

    pipeline: HloName = Field(description="XLA's pass pipeline (not the run's pipeline).")
    pass_: HloName = Field(alias="pass")
    text: Annotated[str, Field(max_length=MAX_TEXT_CHARS)] | None = None
    diff: Annotated[str, Field(max_length=MAX_TEXT_CHARS)] | None = None
    sources: Sources = Field(
        default_factory=list, description="The user's lines of ``text``'s lines (as ``hlo``'s)."
    )


class PassesEvent(_PipelineEvent):
    """Every HLO pass that changed the module, in order: first the module before
    optimisation, last exactly the ``hlo`` output's text."""

    type: Literal["passes"]
    items: Annotated[list[PassItem], Field(max_length=MAX_PASS_ITEMS)]
    notes: Notes = Field(default_factory=list)

    @model_validator(mode="after")
    def _chars_budget(self) -> PassesEvent:
        if sum(len(i.text or "") + len(i.diff or "") for i in self.items) > MAX_PASSES_CHARS:
            raise ValueError(f"over {MAX_PASSES_CHARS} characters of pass text")
        return self


class Kernel(_Event):
    name: HloName
    fusion: HloName | None = Field(None, description="The HLO instruction it computes.")
    llvm_ir: Annotated[str, Field(max_length=MAX_TEXT_CHARS)] | None = Field(
        None, description="Its LLVM IR after LLVM's optimisation (null where XLA dumps none)."
    )
    llvm_ir_before: Annotated[str, Field(max_length=MAX_TEXT_CHARS)] | None = Field(
        None, description="Its LLVM IR as XLA emitted it, before LLVM's optimisation."
    )
    asm: str = _text(MAX_TEXT_CHARS)
    lines: Annotated[list[Line], Field(max_length=256)] = Field(default_factory=list)


class AsmEvent(_PipelineEvent):
    type: Literal["asm"]
    kernels: Annotated[list[Kernel], Field(max_length=MAX_KERNELS)]
    notes: Notes = Field(default_factory=list)


class Buffer(_Event):
    bytes: Count
    shape: Annotated[list[Count], Field(max_length=64)]
    dtype: Short
    kind: Literal["argument", "output", "temp", "constant"]
    line: Line | None = None
    name: HloName = ""


class PeakValue(_Event):
    """An HLO value live at the peak of the schedule."""

    name: HloName
    bytes: Count
    line: Line | None = None
    kind: Literal["argument", "output", "temp", "constant"]


class MemoryBand(_Event):
    """The bytes live at each point of the timeline that one code line made (or, for
    values without one, their kind; or the smaller bands together, ``line`` None)."""

    line: Line | None = None
    label: Short
    points: Annotated[list[Count], Field(max_length=MAX_MEMORY_POINTS)]


class MemoryTimeline(_Event):
    """The bytes live at each step of XLA's schedule of the module, from XLA's
    live-range dump (`*-live-range.txt`); a value is live from the step that defines it
    to its last use, both counted."""

    steps: Count = Field(description="Steps of XLA's schedule (its instructions in order).")
    stride: Count = Field(
        description="Steps per point: 1 up to 512 steps; past that each point is the busiest "
        "step of its stride of steps."
    )
    points: Annotated[list[Count], Field(max_length=MAX_MEMORY_POINTS)] = Field(
        description="Bytes live at each point."
    )
    bands: Annotated[list[MemoryBand], Field(max_length=MAX_MEMORY_BANDS)] = Field(
        description="`points` split by code line: they stack to `points`."
    )
    peak_step: Count = Field(description='XLA\'s "Live ranges at N (peak)": its step.')
    peak_bytes: Count = Field(description="The bytes of the values XLA lists live at its peak.")
    peak_instruction: HloName | None = Field(None, description="The instruction at the peak step.")
    peak_line: Line | None = Field(None, description="The code line of that instruction.")
    at_peak: Annotated[list[PeakValue], Field(max_length=MAX_BUFFERS)] = Field(
        description="The values live at the peak, biggest first."
    )


class MemoryEvent(_PipelineEvent):
    """A static memory view of the compiled module: its peak, the buffers XLA
    assigned, and the figures of ``Compiled.memory_analysis()``."""

    type: Literal["memory"]
    peak_bytes: Count | None = None
    buffers: Annotated[list[Buffer], Field(max_length=MAX_BUFFERS)]
    analysis: Annotated[
        dict[Annotated[str, Field(pattern=r"^[a-z_]{1,48}$")], Count | None], Field(max_length=32)
    ] = Field(default_factory=dict)
    notes: Notes = Field(default_factory=list)
    device_kind: Short | None = Field(
        None,
        description="A `tpu_topology` or `gpu_target` compile's device (`TPU v5 lite`, "
        "`NVIDIA H100 80GB HBM3`).",
    )
    capacity_bytes: Count | None = Field(
        None,
        description="A `tpu_topology` compile's HBM per device, as libtpu's compiler counts "
        "it: the program compiled, so `peak_bytes` fit under it. A `gpu_target` compile's "
        "GPU memory as its target file states it: XLA compiles a program over it all the "
        "same, and a note says so.",
    )
    timeline: MemoryTimeline | None = Field(
        None,
        description="Bytes live over XLA's schedule and its peak; None where XLA wrote no "
        "live-range dump (a note says so).",
    )


class Remark(_Event):
    kind: Short
    line: Line | None = None
    message: str = _text(MAX_MESSAGE_CHARS)


class RemarksEvent(_PipelineEvent):
    type: Literal["remarks"]
    items: Annotated[list[Remark], Field(max_length=MAX_REMARKS)]


class ShardBlock(_Event):
    """One block of an array: its index range per dimension and who holds it."""

    start: Annotated[list[Count], Field(max_length=64)]
    stop: Annotated[list[Count], Field(max_length=64)]
    devices: Annotated[list[Annotated[int, Field(ge=0, le=2**31)]], Field(max_length=65_536)]


class ShardedArray(_Event):
    path: str = _text(MAX_LABEL_CHARS)
    shape: Annotated[list[Count], Field(max_length=64)]
    dtype: Short
    spec: Annotated[list[Short | Annotated[list[Short], Field(max_length=8)] | None], Field(max_length=64)] | None = Field(
        None, description="Its PartitionSpec (null: not a NamedSharding)."
    )  # fmt: skip
    sharding: Short = Field(description="The sharding's class (NamedSharding, ...).")
    grid: Annotated[list[ShardBlock], Field(max_length=MAX_SHARD_BLOCKS)]


class ShardingOrigin(_Event):
    """A user sharding Shardy traces a value's sharding back to."""

    kind: Literal["argument", "constraint", "output", "unknown"]
    name: Short = Field(description="The argument's or output's path; with_sharding_constraint.")
    line: Line | None = Field(None, description="Its line (an argument's, output's: the def).")
    sharding: Short = Field("", description="Its sharding as a PartitionSpec.")
    axes: Annotated[list[Short], Field(max_length=64)] = Field(
        default_factory=list, description="The mesh axes whose sharding came from it here."
    )


class CollectiveOrigin(_Event):
    """The two sides of the reshard a collective does."""

    from_: Annotated[list[ShardingOrigin], Field(max_length=64)] = Field(
        alias="from", description="The origins of the shardings the data had."
    )
    to: Annotated[list[ShardingOrigin], Field(max_length=64)] = Field(
        description="The origins of the sharding it is taken to."
    )
    written: bool = Field(
        False,
        description="The code's own collective (lax.psum in a shard_map): no sharding "
        "forced it; from and to are empty.",
    )


CollectiveKind = Literal[
    "all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute"
]  # fmt: skip


class Collective(_Event):
    kind: CollectiveKind
    bytes: Count = Field(description="Bytes of its result on one device.")
    shape: Short
    replica_groups: Annotated[list[Annotated[list[int], Field(max_length=65_536)]], Field(max_length=65_536)] | None = Field(
        None,
        description="Groups of device ids (logical, in the mesh's order) that take part "
        "together; a collective-permute's [source, target] pairs; null: not parsed.",
    )  # fmt: skip
    groups_text: Short = Field(description="The groups as the HLO spells them.")
    line: Line | None = Field(None, description="The user's line that caused it.")
    hlo_line: Line = Field(description="Its line in the per-device HLO text.")
    origin: CollectiveOrigin | None = Field(
        None,
        description="The shardings that meet where it is (Shardy's sharding origins); "
        "null where they are not reported (the event's origins_note says why).",
    )


class Rematerialization(_Event):
    """XLA's "involuntary full rematerialization": no collective takes the value from
    one sharding to the other, so every device holds all of it, then slices it."""

    line: Line | None = Field(None, description="The user's line of the HLO operation.")
    from_sharding: Short = Field(description="The sharding it had, as XLA prints it.")
    to_sharding: Short = Field(description="The sharding it needed, as XLA prints it.")
    op_name: Short = Field(description="The HLO operation's op_name (JAX's name for it).")
    instruction: str = _text(MAX_MESSAGE_CHARS)
    message: str = _text(MAX_MESSAGE_CHARS)


class ShardingEvent(_PipelineEvent):
    """How the compiled program is laid out over the devices (sandbox/engine/outputs/sharding.py)."""

    type: Literal["sharding"]
    devices: Annotated[int, Field(ge=1, le=65_536)]
    arguments: Annotated[list[ShardedArray], Field(max_length=MAX_LEAVES)]
    outputs: Annotated[list[ShardedArray], Field(max_length=MAX_LEAVES)]
    collectives: Annotated[list[Collective], Field(max_length=MAX_COLLECTIVES)]
    rematerializations: Annotated[list[Rematerialization], Field(max_length=MAX_REMATS)] = Field(
        default_factory=list,
        description="XLA's involuntary full rematerializations, as its log said them.",
    )
    origins_note: str | None = Field(
        None, description="Why collectives' origins are null, where they are."
    )


Dims = Annotated[list[Count], Field(max_length=64)]


class ShapeOut(_Event):
    shape: Dims
    dtype: Short


class ShapeSpan(_Event):
    """One expression of the user's code: its span (lines from 1; columns in characters
    from 0, the end exclusive) and the shape and dtype of its value, as traced."""

    line: Line
    col: Count
    end_line: Line
    end_col: Count
    shape: Dims
    dtype: Short
    primitive: Short = Field("", description="The equation that made the value.")
    sharding: Short | None = Field(
        None, description="Its PartitionSpec, traced under a mesh (`P('x', None)`)."
    )
    more: Annotated[list[ShapeOut], Field(max_length=16)] | None = Field(
        None, description="The equation's other outputs (a `scan`'s, an `eigh`'s)."
    )
    batched_shape: Dims | None = Field(
        None, description="Under `vmap`: the value's shape in the pipeline's (batched) jaxpr."
    )
    batch_dims: Annotated[list[Count], Field(max_length=16)] | None = Field(
        None,
        description="Under `vmap`: the positions of `batched_shape` that are batch dimensions.",
    )


class ShapesEvent(_PipelineEvent):
    """The shape of each expression of the user's code (sandbox/engine/outputs/shapes.py)."""

    type: Literal["shapes"]
    source: Literal["entry", "pipeline"] = Field(
        description="`entry`: the entry function traced on the arguments it receives in the "
        "pipeline (per example under `vmap`); `pipeline`: the pipeline's jaxpr, forward equations."
    )
    spans: Annotated[list[ShapeSpan], Field(max_length=MAX_SHAPE_SPANS)]
    notes: Notes = Field(default_factory=list)
    spans_left_out: Count | None = Field(
        None,
        description="Spans traced but not in `spans` (past MAX_SHAPE_SPANS or the event's "
        "size bound; the last spans in code order); a note says so too.",
    )


class ProfileRow(_Event):
    """One executed HLO instruction (a fusion, a dot...): its time over the profiled
    calls, its line in the ``hlo`` text, the user's line, and its roofline figures."""

    name: HloName
    opcode: Short
    calls: Count
    total_us: Ms
    hlo_line: Line = Field(description="Its line in the `hlo` output's text.")
    line: Line | None = Field(None, description="The user's line that made it.")
    flops: Measure | None = Field(None, description="FLOPs per call (XLA's cost rules).")
    bytes: Measure | None = Field(None, description="Bytes it reads and writes per call.")
    flops_per_s: Measure | None = None
    bytes_per_s: Measure | None = None
    bound: Literal["compute", "memory"] | None = Field(
        None, description="Its arithmetic intensity against the peaks' ridge point."
    )


class TimelineEvent(_Event):
    name: HloName
    start_us: Ms
    dur_us: Ms


class PassTime(_Event):
    model_config = ConfigDict(**_EVENT_CONFIG, populate_by_name=True)

    pipeline: HloName = Field(description="XLA's pass pipeline (not the run's pipeline).")
    pass_: HloName = Field(alias="pass")
    calls: Count
    total_us: Ms


class Peaks(_Event):
    device_kind: Short
    flops_per_s: Measure
    bytes_per_s: Measure
    source: str = _text(MAX_MESSAGE_CHARS)


class ProfileEvent(_PipelineEvent):
    """Where the compiled program's time goes (sandbox/engine/outputs/profile/): its calls
    run again under JAX's profiler."""

    type: Literal["profile"]
    calls: Count = Field(description="How many calls were profiled.")
    wall_us: Ms = Field(description="Their wall time, together (µs).")
    rows: Annotated[list[ProfileRow], Field(max_length=MAX_PROFILE_ROWS)]
    timeline: Annotated[list[TimelineEvent], Field(max_length=MAX_TIMELINE_EVENTS)]
    trace_gz: Annotated[str, Field(max_length=(MAX_TRACE_GZ_BYTES + 2) // 3 * 4, pattern=r"^[A-Za-z0-9+/=]*$")] | None = Field(
        None, description="The trace: gzipped Chrome trace JSON, base64."
    )  # fmt: skip
    passes: Annotated[list[PassTime], Field(max_length=MAX_PROFILE_PASSES)] | None = Field(
        None, description="The compile's leaf HLO passes and their times (null: not measured)."
    )
    peaks: Peaks | None = None
    notes: Notes = Field(default_factory=list)


class GridOperand(_Event):
    """One operand of a pallas_call (an input, an output or a scratch buffer) and the
    block of it each grid point reads or writes."""

    origin: Short = Field(description="Which operand (`args[0]`, `outputs`).")
    kind: Literal["in", "out", "scratch"]
    shape: Annotated[list[Count], Field(max_length=64)]
    dtype: Short
    block_shape: Annotated[list[Count], Field(max_length=64)]
    starts: Annotated[list[Annotated[list[Count], Field(max_length=64)]], Field(max_length=MAX_GRID_POINTS)] = Field(
        default_factory=list,
        description="Per grid point (row-major): the element offset of its block, per "
        "dimension (its index map's block index times the block size).",
    )  # fmt: skip


class PallasKernel(_Event):
    name: Short = Field(description="The kernel function and where it is defined.")
    line: Line | None = None
    jaxpr: str = _text(MAX_TEXT_CHARS)
    jaxpr_sources: Sources = Field(default_factory=list)
    mosaic: Annotated[str, Field(max_length=MAX_TEXT_CHARS)] | None = Field(
        None, description="Its Mosaic-TPU module, as JAX prints it lowered for `tpu`."
    )
    mosaic_target: Short | None = Field(None, description="The TPU it is lowered for.")
    mosaic_sources: Sources = Field(default_factory=list)
    triton: Annotated[str, Field(max_length=MAX_TEXT_CHARS)] | None = Field(
        None, description="Its Triton IR, as JAX prints it lowered for `triton_target`."
    )
    triton_target: Short | None = None
    triton_sources: Sources = Field(default_factory=list)
    grid: Annotated[list[Count], Field(max_length=16)]
    points: Count = Field(description="Grid points in the map (`starts` per operand).")
    operands: Annotated[list[GridOperand], Field(max_length=256)]
    grid_notes: Notes = Field(default_factory=list)
    notes: Notes = Field(default_factory=list)


class KernelsEvent(_PipelineEvent):
    """Each pallas_call of the traced program (sandbox/engine/outputs/kernels.py)."""

    type: Literal["kernels"]
    kernels: Annotated[list[PallasKernel], Field(max_length=MAX_KERNELS)]
    notes: Notes = Field(default_factory=list)


AutodiffPathName = Literal["direct", "classic"]


class AutodiffStage(_Event):
    """One stage of differentiation, as its own jaxpr (sandbox/engine/outputs/autodiff.py)."""

    path: AutodiffPathName
    stage: Literal["jvp", "forward", "known", "linear", "transpose"]
    title: Short
    text: str = _text(MAX_TEXT_CHARS)
    sources: Sources = Field(default_factory=list)


class Residual(_Event):
    """A value the forward pass saves for the backward pass."""

    name: Short | None = Field(None, description="Its name in the forward stage's jaxpr.")
    shape: Annotated[list[Count], Field(max_length=64)]
    dtype: Short
    bytes: Count
    line: Line | None = Field(None, description="The user's line that computed it.")
    source: Short = Field(
        description="The primitive that made it, or `input NAME`: an argument's leaf, saved as it is."
    )


class AutodiffPath(_Event):
    path: AutodiffPathName
    status: Literal["ok", "unavailable", "failed"]
    default: bool = Field(description="The path this JAX version takes by default.")
    note: Annotated[str, Field(max_length=MAX_MESSAGE_CHARS)] | None = None
    residuals: Annotated[list[Residual], Field(max_length=MAX_RESIDUALS)]
    residual_bytes: Count


class PolicyRow(_Event):
    """The residuals under one of ``jax.checkpoint_policies``."""

    policy: Short
    current: bool = Field(description="The pipeline's own checkpoint policy.")
    residuals: Count
    residual_bytes: Count
    flops_backward: Measure | None = None
    flops_recomputed: Measure | None = None
    note: Short | None = None


class AutodiffEvent(_PipelineEvent):
    """How JAX differentiates the pipeline: each stage's jaxpr, per path, the residuals
    each path saves and, with a ``checkpoint`` step, each policy's."""

    type: Literal["autodiff"]
    transform: Short | None = Field(None, description="The differentiating step (null: none).")
    function: str = _text(MAX_LABEL_CHARS, "The function differentiated (the pipeline before it).")
    wrt: Annotated[list[Annotated[str, Field(max_length=MAX_LABEL_CHARS)]], Field(max_length=MAX_RESIDUALS)] = Field(default_factory=list)  # fmt: skip
    stages: Annotated[list[AutodiffStage], Field(max_length=MAX_AUTODIFF_STAGES)]
    paths: Annotated[list[AutodiffPath], Field(max_length=2)]
    policies: Annotated[list[PolicyRow], Field(max_length=MAX_POLICIES)] = Field(default_factory=list)  # fmt: skip
    flops_source: Annotated[str, Field(max_length=MAX_MESSAGE_CHARS)] | None = None
    notes: Notes = Field(default_factory=list)

    @model_validator(mode="after")
    def _budget(self) -> AutodiffEvent:
        if sum(len(s.text) for s in self.stages) > MAX_AUTODIFF_CHARS:
            raise ValueError(f"over {MAX_AUTODIFF_CHARS} characters of stage text")
        if sum(len(s.sources) for s in self.stages) > MAX_AUTODIFF_SOURCES:
            raise ValueError(f"over {MAX_AUTODIFF_SOURCES} source lines")
        return self


class ValueStats(_Event):
    """One output of an equation: min, max and mean over its finite elements (a complex
    value's by magnitude, a bool's as 0 and 1; null: none, or no numbers), and its NaN
    and Inf counts (null: not an inexact dtype)."""

    shape: Annotated[list[Count], Field(max_length=64)]
    dtype: Short
    min: Measure | None = None
    max: Measure | None = None
    mean: Measure | None = None
    nan_count: Count | None = None
    inf_count: Count | None = None


class TraceValuesRow(_Event):
    """One equation stepped (or one loop iteration of it, or every iteration summarised)."""

    eqn: Short = Field(description="Its place: `3` the 4th equation, `3.0` the first in its body.")
    primitive: Short
    depth: Count = Field(description="How deep in bodies (0: the jaxpr's own equations).")
    line: Line | None = Field(None, description="The user's line that made it.")
    phase: Literal["forward", "backward"] | None = Field(
        None, description="From JAX's name stack (`jvp`, `transpose`); null: neither named."
    )
    iteration: Count | None = Field(None, description="The loop iteration it is of (from 0).")
    iterations: Count | None = Field(
        None,
        description="Iterations this row summarises (min of minima, max of maxima, mean of means, counts summed).",
    )
    outputs: Annotated[list[ValueStats], Field(max_length=MAX_TRACE_ROW_VALUES)]
    outputs_total: Count = Field(description="Its outputs (`outputs` describes the first ones).")
    inputs: Annotated[list[Count | None], Field(max_length=MAX_TRACE_ROW_VALUES)] = Field(
        default_factory=list,
        description="Per input (the first ones), the row that made it (null: an argument, a literal, a constant).",
    )
    made: Annotated[list[Literal["nan", "inf"]], Field(max_length=2)] = Field(
        default_factory=list, description="What its outputs hold that its inputs did not."
    )


class TraceValuesEvent(_PipelineEvent):
    """The pipeline's jaxpr stepped equation by equation on the run's arguments
    (sandbox/engine/outputs/trace_values/): rows in the order they were evaluated."""

    type: Literal["trace_values"]
    rows: Annotated[list[TraceValuesRow], Field(max_length=MAX_TRACE_ROWS)]
    first_bad: Count | None = Field(
        None, description="The first row whose outputs hold a NaN or an Inf."
    )
    first_nan: Count | None = None
    first_inf: Count | None = None
    cut: Literal["rows", "bytes", "steps", "error"] | None = Field(
        None, description="Why stepping stopped early (the notes say where); null: it did not."
    )
    evaluated_bytes: Count
    evaluated_steps: Count
    notes: Notes = Field(default_factory=list)

    @model_validator(mode="after")
    def _rows_refer_back(self) -> TraceValuesEvent:
        n = len(self.rows)
        if sum(len(r.outputs) for r in self.rows) > MAX_TRACE_VALUES:
            raise ValueError(f"over {MAX_TRACE_VALUES} values described")
        for first in (self.first_bad, self.first_nan, self.first_inf):
            if first is not None and first >= n:
                raise ValueError("a first bad value past the rows")
        if any(i is not None and i >= n for r in self.rows for i in r.inputs):
            raise ValueError("an input made by no row")
        return self


class CheckResult(_Event):
    """One check's finding (sandbox/protocol/checks.py lists the checks)."""

    name: CheckName
    status: CheckStatus = Field(
        description="`failed`: the check found a problem; `error`: it could not run (the "
        "pipeline raised something else under it); `skipped`: not on this JAX version, or "
        "nothing to check."
    )
    message: str = _text(MAX_MESSAGE_CHARS, "JAX's own words, or what passed.")
    line: Line | None = Field(
        None,
        description="The user's line: the operation that made the NaN/Inf, the key's second "
        "use, the checkify error's; for `grad`, the custom_jvp/custom_vjp rule's.",
    )
    hint: Annotated[str, Field(max_length=MAX_MESSAGE_CHARS)] | None = None
    order: Annotated[int, Field(ge=1, le=MAX_GRAD_ORDER)] | None = Field(
        None, description="`grad`: the derivative order checked (check_grads' `order`)."
    )
    mode: GradMode | None = Field(None, description="`grad`: `fwd` (JVP) or `rev` (VJP).")
    max_abs_error: Measure | None = Field(
        None, description="`grad` failed: the max absolute difference JAX reports."
    )
    max_rel_error: Measure | None = Field(
        None, description="`grad` failed: the max relative difference JAX reports."
    )


class ChecksEvent(_PipelineEvent):
    """The request's ``checks``, run on the pipeline (sandbox/engine/outputs/checks.py)."""

    type: Literal["checks"]
    results: Annotated[list[CheckResult], Field(max_length=MAX_CHECK_RESULTS)]


class RecompileMiss(_Event):
    """One trace (and its lowering and compile) at a call site."""

    explanation: str | None = Field(
        None,
        max_length=MAX_MESSAGE_CHARS,
        description="JAX's own explanation (`jax_explain_cache_misses`), as it logged it; "
        "null where JAX said nothing (a jit whose target is itself jitted).",
    )
    reason: Short = Field(description="The explanation in a few words (`x: f32[3] → f32[4]`).")
    trace_ms: Ms | None = None
    lower_ms: Ms | None = None
    compile_ms: Ms | None = None
    from_disk: bool = Field(
        False, description="The executable came from JAX's persistent compilation cache."
    )


class RecompileSite(_Event):
    """A call site: a line of the snippet and the function JAX traced or called there."""

    line: Line
    function: Short
    caller: Short = Field(description="The snippet's function the line is in (`<module>`).")
    jitted: bool = Field(
        description="A jitted function is called here (false: an eager operation compiled)."
    )
    calls: Count | None = Field(None, description="Calls seen (null: not countable here).")
    hits: Count | None = None
    miss_count: Count
    misses: Annotated[list[RecompileMiss], Field(max_length=MAX_RECOMPILE_MISSES)]
    trace_ms: Ms
    lower_ms: Ms
    compile_ms: Ms
    summary: Short = Field(description="`2 compiles, 1 hit — x: f32[3] → f32[4]`.")
    silent: Short | None = Field(None, description="Why JAX explained none of these misses.")


class RecompilesEvent(_PipelineEvent):
    """JAX's cache misses at each call site of the snippet's top-level code and one call
    of the entry (sandbox/engine/outputs/recompiles.py)."""

    type: Literal["recompiles"]
    sites: Annotated[list[RecompileSite], Field(max_length=MAX_RECOMPILE_SITES)]
    counts_calls: bool = Field(description="Calls (and so hits) could be counted.")
    notes: Notes = Field(default_factory=list)


class ExportCall(_Event):
    """One call of the deserialized artifact in a fresh process of the same jail."""

    source: Literal["arguments", "fitted"] = Field(
        description="`arguments`: the request's; `fitted`: other sizes of the symbolic "
        "dimensions, arrays of ones."
    )
    inputs: Annotated[list[Short], Field(max_length=256)]
    outputs: Annotated[list[Short], Field(max_length=256)]
    equal: bool | None = Field(
        None, description="Its outputs equal the entry's jit called in the run's process."
    )
    max_abs_diff: Measure | None = None
    error: str | None = Field(None, max_length=MAX_MESSAGE_CHARS)


class ExportEvent(_PipelineEvent):
    """`jax.export` of the pipeline (sandbox/engine/outputs/export.py)."""

    type: Literal["export"]
    function: Short
    shapes: Annotated[list[Short | None], Field(max_length=256)] = Field(
        description="The symbolic shape asked per argument (null: its own shape)."
    )
    in_avals: Annotated[list[Short], Field(max_length=4096)]
    out_avals: Annotated[list[Short], Field(max_length=4096)]
    platforms: Annotated[list[Short], Field(max_length=8)]
    calling_convention_version: Count
    stablehlo: str = _text(MAX_TEXT_CHARS)
    artifact: str | None = Field(
        None,
        max_length=(MAX_EXPORT_ARTIFACT_BYTES * 4) // 3 + 4,
        description="`Exported.serialize()`, base64 (null: over the bound, or not serializable).",
    )
    artifact_bytes: Count | None = None
    roundtrip: Annotated[list[ExportCall], Field(max_length=MAX_EXPORT_CALLS)]
    notes: Notes = Field(default_factory=list)


class NumericsErrors(_Event):
    """A value's error against its float64 shadow: relative (``|y - y*| / max(|y*|,
    tiny)``, tiny the dtype's smallest normal) and in ulps of its dtype; the maximum and
    the median over its elements (a loop's row: the largest per-iteration median)."""

    max: Measure
    median: Measure
    max_ulp: Measure
    median_ulp: Measure
    norm: Measure = Field(
        description="Normwise: the largest difference over the shadow's largest magnitude."
    )


class NumericsHint(_Event):
    kind: Literal["expm1", "log1p", "subtract_max", "logsumexp", "cancellation", "sum_order"]
    text: str = _text(MAX_MESSAGE_CHARS)


class NumericsRow(_Event):
    """One equation evaluated in the program's dtypes and in float64 (a loop body's
    equation: every iteration, folded)."""

    eqn: Short = Field(description="Its place: `3` the 4th equation, `3.0` the first in its body.")
    primitive: Short
    depth: Count
    line: Line | None = None
    phase: Literal["forward", "backward"] | None = None
    iterations: Count | None = Field(
        None, description="A loop body's row: the iterations it folds."
    )
    dtype: Short | None = None
    shape: Annotated[list[Count], Field(max_length=64)]
    error: NumericsErrors | None = Field(
        None,
        description="Its (first floating) output against the shadow's: where the value stands.",
    )
    born: NumericsErrors | None = Field(
        None,
        description="The same primitive in the program's dtypes on the shadow's inputs "
        "rounded to them, against the shadow: the error this equation adds itself (null: "
        "no floating output, or an input the dtype cannot hold).",
    )
    shadowed: bool = True
    unshadowed: str | None = Field(
        None, max_length=MAX_MESSAGE_CHARS, description="Why the shadow took the program's value."
    )
    diverged: Count = Field(
        0,
        description="Integer/boolean elements the shadow computed otherwise (a flipped comparison).",
    )
    hint: NumericsHint | None = None


class NumericsLine(_Event):
    """One source line: the most ulps born there and the largest error of a value made there."""

    line: Line
    born_ulp: Measure
    error: Measure
    hint: Short | None = None


class NumericsOutput(_Event):
    """One output leaf of the pipeline against the shadow: as the run computed it
    (compiled) and as the program's equations give it one by one."""

    path: Short
    dtype: Short
    shape: Annotated[list[Count], Field(max_length=64)]
    run: NumericsErrors | None = None
    eager: NumericsErrors | None = None


class NumericsOption(_Event):
    """One XLA option the jit comparison recompiled with."""

    option: Short
    value: Short
    removes: bool | None = Field(
        None, description="The recompiled program gives the eager value (null: it did not compile)."
    )
    error: str | None = Field(None, max_length=MAX_MESSAGE_CHARS)


class NumericsJit(_Event):
    """The program compiled whole (jit) against the same equations one by one (eager)."""

    differs: bool
    closer: Literal["jit", "eager", "same"] = Field(
        description="Which is nearer the float64 shadow (by the largest relative error)."
    )
    first_eqn: Short | None = Field(
        None, description="The first equation whose compiled value differs, found by bisection."
    )
    first_row: Count | None = None
    line: Line | None = None
    primitive: Short | None = None
    compiles: Count = Field(0, description="Cut programs compiled by the bisection.")
    options: Annotated[list[NumericsOption], Field(max_length=16)] = Field(default_factory=list)
    cause: str | None = Field(None, max_length=MAX_MESSAGE_CHARS)


class NumericsSetting(_Event):
    """The pipeline run under one precision setting, against the shadow."""

    setting: Short
    label: Short
    emulated: bool = Field(
        False, description="Emulated on this backend (bfloat16 operands, float32 accumulation)."
    )
    outputs: Annotated[list[NumericsErrors | None], Field(max_length=256)]
    lines: Annotated[list[NumericsLine], Field(max_length=MAX_NUMERICS_ROWS)] = Field(
        default_factory=list
    )
    error: str | None = Field(None, max_length=MAX_MESSAGE_CHARS)


class NumericsEvent(_PipelineEvent):
    """The pipeline's jaxpr against a float64 shadow (sandbox/engine/outputs/numerics/)."""

    type: Literal["numerics"]
    backend: Short
    rows: Annotated[list[NumericsRow], Field(max_length=MAX_NUMERICS_ROWS)]
    lines: Annotated[list[NumericsLine], Field(max_length=MAX_NUMERICS_ROWS)]
    outputs: Annotated[list[NumericsOutput], Field(max_length=256)]
    worst_born: Count | None = Field(None, description="The row that adds the most ulps.")
    cut: Literal["rows", "steps"] | None = None
    refused: str | None = Field(
        None,
        max_length=MAX_MESSAGE_CHARS,
        description="Why nothing was shadowed (the program's size).",
    )
    shadow_ms: Ms
    jit: NumericsJit | None = None
    precision: Annotated[list[NumericsSetting], Field(max_length=16)] = Field(default_factory=list)
    precision_note: str | None = Field(None, max_length=MAX_MESSAGE_CHARS)
    notes: Notes = Field(default_factory=list)

    @model_validator(mode="after")
    def _rows_exist(self) -> NumericsEvent:
        n = len(self.rows)
        for at in (self.worst_born, self.jit.first_row if self.jit else None):
            if at is not None and at >= n:
                raise ValueError("a row past the rows")
        return self


class ErrorEvent(_PipelineEvent):
    type: Literal["error"]
    stage: ErrorStage
    kind: Short
    message: str = _text(MAX_MESSAGE_CHARS)
    line: Line | None = None
    hint: Annotated[str, Field(max_length=MAX_MESSAGE_CHARS)] | None = None
    doc_url: Annotated[str, Field(max_length=512, pattern=_DOC_URL)] | None = Field(
        None, description="A page of JAX's (or Python's) documentation; no other host."
    )


class DoneEvent(_Event):
    """Always last. ``dropped``: event lines of the run's worker that were refused
    (malformed, or not events jaxplay would send; a run that would have ended ``ok`` or
    ``error`` with any ends ``tampered``); ``cached``: the cache answered."""

    type: Literal["done"]
    status: DoneStatus
    ms: Ms
    reason: str = _text(2000)
    dropped: Count | None = None
    cached: Literal[True] | None = None
    timeout_stage: StageName | None = Field(
        None,
        description="With `timeout`: the stage the run was in when its wall clock ran out "
        "(the one after the last `stage` event; `reason` says it in words). A client may "
        "offer the run again with a longer `timeout_s`, up to the server's "
        "`max_timeout_s`.",
    )


EVENT_MODELS: dict[str, type[_Event]] = {
    "accepted": AcceptedEvent,
    "stdout": StdoutEvent,
    "stderr": StderrEvent,
    "stage": StageEvent,
    "jaxpr": JaxprEvent,
    "stablehlo": StablehloEvent,
    "hlo": HloEvent,
    "text_part": TextPartEvent,
    "value": ValueEvent,
    "cost": CostEvent,
    "timing": TimingEvent,
    "passes": PassesEvent,
    "asm": AsmEvent,
    "memory": MemoryEvent,
    "remarks": RemarksEvent,
    "sharding": ShardingEvent,
    "shapes": ShapesEvent,
    "profile": ProfileEvent,
    "kernels": KernelsEvent,
    "autodiff": AutodiffEvent,
    "trace_values": TraceValuesEvent,
    "checks": ChecksEvent,
    "recompiles": RecompilesEvent,
    "export": ExportEvent,
    "numerics": NumericsEvent,
    "error": ErrorEvent,
    "done": DoneEvent,
}
AnyEvent = Annotated[
    AcceptedEvent | StdoutEvent | StderrEvent | StageEvent | JaxprEvent | StablehloEvent
    | HloEvent | TextPartEvent | ValueEvent | CostEvent | TimingEvent | PassesEvent | AsmEvent | MemoryEvent
    | RemarksEvent | ShardingEvent | ShapesEvent | ProfileEvent | ErrorEvent
    | KernelsEvent | AutodiffEvent | TraceValuesEvent | ChecksEvent | RecompilesEvent
    | ExportEvent | NumericsEvent | DoneEvent,
    Field(discriminator="type"),
]  # fmt: skip


EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(AnyEvent)

#: Every event type and the fields it carries besides ``type`` and ``pipeline``
#: (SPEC §2). docs/api.md is checked against this table by a test.
EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    kind: tuple(name for name in model.model_fields if name not in ("type", "pipeline"))
    for kind, model in EVENT_MODELS.items()
}
assert StageName.__args__ == STAGES and ErrorStage.__args__ == ERROR_STAGES  # type: ignore[attr-defined]
assert DoneStatus.__args__ == DONE_STATUSES  # type: ignore[attr-defined]


def event_json_schema() -> dict[str, Any]:
    """The JSON Schema of every event (docs/events.schema.json is this, committed)."""
    schema = EVENT_ADAPTER.json_schema(ref_template="#/$defs/{model}")
    schema["title"] = "jaxplay event"
    schema["description"] = (
        f"One event of a run (protocol {PROTOCOL_VERSION}); generated from "
        "sandbox/protocol/events.py by scripts/gen_event_types.py."
    )
    return schema


def done_event(
    status: DoneStatus,
    ms: float,
    reason: str = "",
    dropped: int = 0,
    *,
    cached: bool = False,
    timeout_stage: str | None = None,
) -> dict[str, Any]:
    """A run's last event, ``done``: this is the only maker of one, whoever ends the run
    (the engine, the supervisor, a pool, the queue's worker, the server, a cached
    answer), so every ``done`` has the same fields, set the same way."""
    assert status in DONE_STATUSES, status
    event: dict[str, Any] = {"type": "done", "status": status, "ms": round(ms, 3), "reason": reason}
    if dropped:
        event["dropped"] = dropped
    if cached:
        event["cached"] = True
    if timeout_stage is not None:
        event["timeout_stage"] = timeout_stage
    return event
