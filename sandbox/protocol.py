"""The worker protocol: what goes into a run and what comes out of it.

This is the one module that the server (``backend``) and the sandbox share, so it
must stay free of JAX and of anything server-side. A run request goes in; a stream
of JSON events comes out, one object per line, ending with ``done``.
See SPEC.md §1 (request) and §2 (events), mirrored in docs/api.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from sandbox.gpu_target_request import GPU_TARGETS, check_gpu_target
from sandbox.sharding_request import (
    TPU_TOPOLOGY_PATTERN,
    LoweringPlatform,
    MeshSpec,
    Shardings,
    check_lowering,
    check_shardings,
    check_topology,
    check_transform,
)

PROTOCOL_VERSION = 1

#: The file name user code is compiled under; it is what JAX's source locations,
#: tracebacks and HLO metadata show, and what the engine maps lines from.
SNIPPET_FILENAME = "snippet.py"

MAX_CODE_BYTES = 64 * 1024
MAX_EXPR_BYTES = 8 * 1024
MAX_TRANSFORMS = 16
MAX_COMPARE = 4
MAX_DEVICES = 64
#: how a JAX version is spelled in a request (``0.4.38``, ``0.12.0.1``)
JAX_VERSION_PATTERN = r"^\d+\.\d+\.\d+(\.\d+)?$"

#: Every output a request may name; what each one is (its event, the stages it
#: needs, whether a request gets it by default, whether the cache may keep it) is
#: ``OUTPUT_TABLE`` below, the one place an output is declared in this layer.
Output = Literal[
    "jaxpr", "stablehlo", "hlo", "value", "cost", "timing", "passes", "asm", "memory", "remarks",
    "sharding",
]  # fmt: skip
OUTPUTS: tuple[Output, ...] = Output.__args__  # type: ignore[attr-defined]
Backend = Literal["cpu", "gpu", "tpu", "auto"]
#: what ``stage`` events name, in the order they happen (SPEC §2's five, plus
#: ``args``, evaluating the example arguments, and ``timing``, the comparison)
STAGES = ("exec", "args", "trace", "lower", "compile", "execute", "timing")
#: what ``error`` events may name besides: before exec (``request``, ``config``),
#: building the pipeline from its options (``transform``), and jaxplay's own failure
ERROR_STAGES = ("request", "config", *STAGES[:2], "transform", *STAGES[2:], "engine")

#: Options each transform accepts, spelled as the JAX function of that name spells
#: them. ``jvp``'s ``tangents`` and ``vjp``'s ``cotangents`` are Python expressions.
TRANSFORM_OPTIONS: dict[str, frozenset[str]] = {
    "jit": frozenset({"static_argnums", "static_argnames", "donate_argnums"}),
    "grad": frozenset({"argnums", "has_aux", "holomorphic", "allow_int"}),
    "value_and_grad": frozenset({"argnums", "has_aux", "holomorphic", "allow_int"}),
    "vmap": frozenset({"in_axes", "out_axes", "axis_name", "axis_size"}),
    "pmap": frozenset({"axis_name", "in_axes", "out_axes", "static_broadcasted_argnums"}),
    "jacfwd": frozenset({"argnums", "has_aux", "holomorphic"}),
    "jacrev": frozenset({"argnums", "has_aux", "holomorphic"}),
    "hessian": frozenset({"argnums", "has_aux"}),
    "checkpoint": frozenset({"prevent_cse", "policy"}),
    "jvp": frozenset({"tangents"}),
    "vjp": frozenset({"cotangents"}),
    # sharding (sandbox/sharding_request.py checks their specs against the mesh)
    "shard_map": frozenset({"in_specs", "out_specs", "axis_names", "check_vma"}),
    "smap": frozenset({"in_axes", "out_axes", "axis_name"}),
    "reshard": frozenset({"out_specs"}),
    "linearize": frozenset({"tangents"}),
    "linear_transpose": frozenset({"cotangents"}),
    "checkify": frozenset({"errors"}),
}
TransformName = Literal[
    "jit",
    "grad",
    "value_and_grad",
    "vmap",
    "pmap",
    "jacfwd",
    "jacrev",
    "hessian",
    "checkpoint",
    "jvp",
    "vjp",
    "shard_map",
    "smap",
    "reshard",
    "linearize",
    "linear_transpose",
    "checkify",
]

#: JAX configuration a request may set (SPEC §1 ``config``): names outside get a 422.
#: Each maps to the Python types its value may have.
CONFIG_ALLOWED: dict[str, tuple[type, ...]] = {
    "jax_enable_x64": (bool,),
    "jax_numpy_dtype_promotion": (str,),
    "jax_numpy_rank_promotion": (str,),
    "jax_debug_nans": (bool,),
    "jax_debug_infs": (bool,),
    "jax_disable_jit": (bool,),
    "jax_enable_checks": (bool,),
    "jax_check_tracer_leaks": (bool,),
    "jax_default_matmul_precision": (str,),
    "jax_default_prng_impl": (str,),
    "jax_threefry_partitionable": (bool,),
    "jax_softmax_custom_jvp": (bool,),
    "jax_log_compiles": (bool,),
    "jax_traceback_filtering": (str,),
}

#: XLA options a request may set per run (``compiler_options``, passed to
#: ``Lowered.compile``): ones that only change how XLA optimises and generates code.
#: Anything else (``xla_dump_*`` writes files, ``xla_*_cache_dir``/profiles read or
#: write them, thread pools and allocators change the worker's process) is refused
#: with a 422 naming the option. Each maps to the Python types its value may have.
#: Each is known to XLA in the installed JAX versions (``xla_disable_hlo_passes`` and
#: ``xla_enable_hlo_passes_only`` not in 0.4.38); one a version does not know fails the
#: compile stage with XLA's own message.
COMPILER_OPTIONS_ALLOWED: dict[str, tuple[type, ...]] = {
    "xla_backend_optimization_level": (int,),
    "xla_llvm_disable_expensive_passes": (bool,),
    "xla_disable_hlo_passes": (str,),
    "xla_enable_hlo_passes_only": (str,),
    "xla_disable_all_hlo_passes": (bool,),
    "xla_allow_excess_precision": (bool,),
    "xla_cpu_enable_fast_math": (bool,),
    "xla_cpu_fast_math_honor_nans": (bool,),
    "xla_cpu_fast_math_honor_infs": (bool,),
    "xla_cpu_fast_math_honor_division": (bool,),
    "xla_cpu_fast_math_honor_functions": (bool,),
    "xla_cpu_enable_fast_min_max": (bool,),
    "xla_cpu_strict_dot_conv_math": (bool,),
    "xla_cpu_prefer_vector_width": (int,),
    "xla_cpu_max_isa": (str,),
    "xla_gpu_autotune_level": (int,),
    "xla_gpu_enable_triton_gemm": (bool,),
    "xla_gpu_enable_fast_min_max": (bool,),
    "xla_gpu_enable_latency_hiding_scheduler": (bool,),
}
MAX_COMPILER_OPTIONS = 16

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_OPTION_VALUE = (type(None), bool, int, float, str, list)


class Transform(BaseModel):
    """One step of a pipeline: ``{"name": ..., **options}``."""

    model_config = ConfigDict(extra="allow")

    name: TransformName

    @model_validator(mode="after")
    def _known_options(self) -> Transform:
        allowed = TRANSFORM_OPTIONS[self.name]
        for key, value in (self.model_extra or {}).items():
            if key not in allowed:
                raise ValueError(
                    f"{self.name} has no option {key!r}; it takes {sorted(allowed) or 'none'}"
                )
            if not isinstance(value, _OPTION_VALUE) or not _json_small(value):
                raise ValueError(f"{self.name} option {key!r} must be a small JSON value")
        if self.name == "checkpoint" and "policy" in self.options:
            policy = self.options["policy"]
            if policy is not None and (
                not isinstance(policy, str) or not _IDENTIFIER.match(policy)
            ):
                raise ValueError("checkpoint policy must be a name from jax.checkpoint_policies")
        return self

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def _json_small(value: Any) -> bool:
    return len(json.dumps(value)) <= MAX_EXPR_BYTES


Pipeline = Annotated[list[Transform], Field(max_length=MAX_TRANSFORMS)]
CompilerOptions = Annotated[
    dict[str, bool | int | float | str], Field(max_length=MAX_COMPILER_OPTIONS)
]


def check_compiler_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` if every one is allowed and of its type; else a ValueError naming it."""
    for name, value in options.items():
        if name not in COMPILER_OPTIONS_ALLOWED:
            raise ValueError(
                f"compiler option {name!r} is not allowed (options that write or read files or "
                f"change the process are refused); allowed: {sorted(COMPILER_OPTIONS_ALLOWED)}"
            )
        types = COMPILER_OPTIONS_ALLOWED[name]
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            raise ValueError(f"compiler option {name!r} must be {types[0].__name__}")
        if isinstance(value, str) and len(value) > MAX_LABEL_CHARS:
            raise ValueError(f"compiler option {name!r} is over {MAX_LABEL_CHARS} characters")
    return options


class RunRequest(BaseModel):
    """A run request (SPEC §1)."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(description="Python source, executed as a module. At most 64 KiB.")
    entry: str = Field("f", description="Name of the function in `code` to transform.")
    args: str = Field(
        "()",
        max_length=MAX_EXPR_BYTES,
        description="Python expression giving the example arguments (a tuple, or one value).",
    )
    transforms: Pipeline = Field(default_factory=list, description="Applied in list order.")
    outputs: list[Output] = Field(
        default_factory=lambda: list(DEFAULT_OUTPUTS),
        description="What to produce; default: jaxpr, stablehlo, hlo, value, cost, timing "
        "(passes, asm, memory and remarks only when named).",
    )
    backend: Backend = "auto"
    devices: int = Field(1, ge=1, le=MAX_DEVICES)
    config: dict[str, bool | int | float | str] = Field(default_factory=dict)
    timeout_s: float = Field(20.0, gt=0, le=600)
    compare: Annotated[list[Pipeline], Field(max_length=MAX_COMPARE)] = Field(default_factory=list)
    compiler_options: CompilerOptions = Field(
        default_factory=dict,
        description="XLA options for every pipeline's compile (an allow-list: "
        "`COMPILER_OPTIONS_ALLOWED`); others are refused.",
    )
    compare_compiler_options: Annotated[list[CompilerOptions], Field(max_length=MAX_COMPARE)] = (
        Field(
            default_factory=list,
            description="Per `compare` entry, XLA options replacing `compiler_options` for "
            "that pipeline: the same transforms with other flags compare flags A against B.",
        )
    )
    mesh: MeshSpec | None = Field(
        None, description="A device mesh over the run's devices (`jax.make_mesh`)."
    )
    in_shardings: Shardings | None = Field(
        None,
        description="One PartitionSpec per argument (`null`: replicated); the arguments are "
        "placed so, and jit gets them. Needs `mesh`.",
    )
    out_shardings: Shardings | None = Field(
        None,
        description="One PartitionSpec per output (one entry: for every output). Needs `mesh`.",
    )
    lowering_platforms: Annotated[list[LoweringPlatform], Field(min_length=1, max_length=4)] | None = Field(
        None,
        description='Lower for these platforms (["tpu"], ["cuda"]) without their hardware: '
        "the StableHLO is theirs; outputs may only be jaxpr and stablehlo.",
    )  # fmt: skip
    tpu_topology: str | None = Field(
        None,
        pattern=TPU_TOPOLOGY_PATTERN,
        description="Compile for this TPU topology (`v5e:2x2`) without a TPU: the `mesh` is "
        "over its devices, the arguments abstract, nothing runs. Only names the operator "
        "enabled (JAXPLAY_TPU_TOPOLOGIES; off by default).",
    )
    jax_version: str | None = Field(
        None,
        pattern=JAX_VERSION_PATTERN,
        description="The JAX version to run on (`0.10.2`); default: the server's default "
        "version. `GET /api/v1/backends` lists them.",
    )
    gpu_target: str | None = Field(
        None,
        description="Compile for this NVIDIA GPU without one (XLA's deviceless compile: "
        f"{', '.join(GPU_TARGETS)}): hlo, cost, passes, asm (its PTX) and memory are that "
        "GPU's; nothing runs. Only where the operator installed JAX's CUDA plugin.",
    )

    @field_validator("code")
    @classmethod
    def _code_size(cls, code: str) -> str:
        if len(code.encode()) > MAX_CODE_BYTES:
            raise ValueError(f"code is over {MAX_CODE_BYTES // 1024} KiB")
        return code

    @field_validator("entry")
    @classmethod
    def _entry_name(cls, entry: str) -> str:
        if not all(_IDENTIFIER.match(part) for part in entry.split(".")):
            raise ValueError(
                "entry must be a Python name or a dotted path of names (like jax.nn.gelu)"
            )
        return entry

    @field_validator("config")
    @classmethod
    def _config_allowed(cls, config: dict[str, Any]) -> dict[str, Any]:
        for name, value in config.items():
            if name not in CONFIG_ALLOWED:
                raise ValueError(
                    f"config {name!r} is not allowed; allowed: {sorted(CONFIG_ALLOWED)}"
                )
            types = CONFIG_ALLOWED[name]
            if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
                raise ValueError(f"config {name!r} must be {types[0].__name__}")
        return config

    @field_validator("compiler_options")
    @classmethod
    def _compiler_options_allowed(cls, options: dict[str, Any]) -> dict[str, Any]:
        return check_compiler_options(options)

    @field_validator("compare_compiler_options")
    @classmethod
    def _compare_options_allowed(cls, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [check_compiler_options(options) for options in entries]

    @model_validator(mode="after")
    def _compare_options_match(self) -> RunRequest:
        if len(self.compare_compiler_options) > len(self.compare):
            raise ValueError("compare_compiler_options has more entries than compare")
        return self

    def compiler_options_for(self, pipeline: str) -> dict[str, bool | int | float | str]:
        """The XLA options the pipeline named ``pipeline`` compiles with."""
        if pipeline != "main" and int(pipeline) < len(self.compare_compiler_options):
            return self.compare_compiler_options[int(pipeline)]
        return self.compiler_options

    @model_validator(mode="after")
    def _sharding_consistent(self) -> RunRequest:
        check_shardings("in_shardings", self.in_shardings, self.mesh)
        check_shardings("out_shardings", self.out_shardings, self.mesh)
        check_lowering(self.lowering_platforms, list(self.outputs))
        check_topology(self.tpu_topology, self.mesh, list(self.outputs), self.lowering_platforms)
        check_gpu_target(
            self.gpu_target,
            list(self.outputs),
            backend=self.backend,
            mesh=self.mesh,
            lowering_platforms=self.lowering_platforms,
        )
        for name, transforms in self.pipelines():
            where = "transforms" if name == "main" else f"compare[{name}]"
            for i, transform in enumerate(transforms):
                check_transform(f"{where}[{i}]", transform.name, transform.options, self.mesh)
        return self

    @field_validator("outputs")
    @classmethod
    def _outputs_unique(cls, outputs: list[str]) -> list[str]:
        return list(dict.fromkeys(outputs))

    def pipelines(self) -> list[tuple[str, list[Transform]]]:
        """The main pipeline and the compare ones, with the names events carry."""
        return [("main", self.transforms)] + [(str(i), p) for i, p in enumerate(self.compare)]


# --- events ---------------------------------------------------------------------
#
# One model per event type, every field typed and bounded. A worker's line is
# checked on its raw bytes first (size, JSON values, depth: ``parse_event_line``),
# so that a line of a million ``{}`` costs nothing, then validated against these
# models; undeclared fields are dropped. The JSON Schema of the union
# (``event_json_schema``) is committed as docs/events.schema.json, and the page's
# types are generated from it (scripts/gen_event_types.py).

#: Largest single event line accepted from a worker (an HLO text of a big program).
MAX_EVENT_BYTES = 8 * 1024 * 1024
#: JSON values in one event line, at most (a value event's 65,536 numbers and the
#: source map of a long HLO text stay well under it)
MAX_EVENT_NODES = 300_000
#: How deep one event line may nest (the deepest real one, a complex value, is 5)
MAX_EVENT_DEPTH = 8
#: An IR text (the engine cuts a longer one and says so); one stdout/stderr event
#: (the engine splits longer output)
MAX_TEXT_CHARS = 2 * 1024 * 1024
MAX_STREAM_CHARS = 16 * 1024
#: An error's message (the engine cuts at 8 KiB and says so), a hint, a note
MAX_MESSAGE_CHARS = 16 * 1024
MAX_LABEL_CHARS = 1024
#: Source-map entries of one IR text
MAX_SOURCES = 65_536
#: A value: its leaves, the elements of one leaf's data, and all leaves' data
MAX_LEAVES = 4096
MAX_LEAF_DATA = 256
MAX_VALUE_DATA = 65_536
MAX_REPR_CHARS = 80 * 1024
MAX_TIMING_ROWS = 2 + MAX_COMPARE
MAX_NOTES = 16
#: blocks of one array in a sharding event, collectives in one program
MAX_SHARD_BLOCKS = 4096
MAX_COLLECTIVES = 4096
#: Where an error's ``doc_url`` may point: JAX's documentation (and Python's, for a
#: syntax error); anything else is not an event jaxplay made.
DOC_URL_PREFIXES = (
    "https://docs.jax.dev/",
    "https://jax.readthedocs.io/",
    "https://docs.python.org/3/",
)
DONE_STATUSES = ("ok", "error", "timeout", "killed", "cancelled", "tampered")
#: ``tampered``: the run's event channel carried lines the engine did not write (the
#: gate refused them; ``dropped`` counts them). Its outputs are never cache evidence.
TAMPERED_REASON = "this run's code wrote to jaxplay's output channel; what it shows may be forged"
#: The reasons a worker's own ``done`` gives (anything else is not the engine's)
WORKER_DONE_REASONS = ("", "the code raised an error", "invalid request")

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


class JaxprEvent(_PipelineEvent):
    type: Literal["jaxpr"]
    text: str = _text(MAX_TEXT_CHARS)
    sources: Sources = Field(default_factory=list)


class StablehloEvent(_PipelineEvent):
    type: Literal["stablehlo"]
    text: str = _text(MAX_TEXT_CHARS)
    sources: Sources = Field(default_factory=list)


class HloEvent(_PipelineEvent):
    type: Literal["hlo"]
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
    of the module before optimisation (``before``, ``Lowered.cost_analysis``), and
    ``notes`` where XLA's figures are known to be partial."""

    type: Literal["cost"]
    flops: Measure | None = None
    transcendentals: Measure | None = None
    bytes_accessed: Measure | None = None
    memory: Annotated[
        dict[Annotated[str, Field(pattern=r"^[a-z_]{1,32}$")], Count | None], Field(max_length=16)
    ] = Field(default_factory=dict)
    before: CostFigures | None = Field(
        None, description="The same figures before optimisation (null where JAX has none)."
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


#: What one passes / asm / memory / remarks event may carry
MAX_PASS_ITEMS = 1024
MAX_PASSES_CHARS = 6 * 1024 * 1024
MAX_KERNELS = 256
MAX_BUFFERS = 4096
MAX_REMARKS = 256
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


class ShardingEvent(_PipelineEvent):
    """How the compiled program is laid out over the devices (sandbox/engine/sharding.py)."""

    type: Literal["sharding"]
    devices: Annotated[int, Field(ge=1, le=65_536)]
    arguments: Annotated[list[ShardedArray], Field(max_length=MAX_LEAVES)]
    outputs: Annotated[list[ShardedArray], Field(max_length=MAX_LEAVES)]
    collectives: Annotated[list[Collective], Field(max_length=MAX_COLLECTIVES)]


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


EVENT_MODELS: dict[str, type[_Event]] = {
    "accepted": AcceptedEvent,
    "stdout": StdoutEvent,
    "stderr": StderrEvent,
    "stage": StageEvent,
    "jaxpr": JaxprEvent,
    "stablehlo": StablehloEvent,
    "hlo": HloEvent,
    "value": ValueEvent,
    "cost": CostEvent,
    "timing": TimingEvent,
    "passes": PassesEvent,
    "asm": AsmEvent,
    "memory": MemoryEvent,
    "remarks": RemarksEvent,
    "sharding": ShardingEvent,
    "error": ErrorEvent,
    "done": DoneEvent,
}
AnyEvent = Annotated[
    AcceptedEvent | StdoutEvent | StderrEvent | StageEvent | JaxprEvent | StablehloEvent
    | HloEvent | ValueEvent | CostEvent | TimingEvent | PassesEvent | AsmEvent | MemoryEvent
    | RemarksEvent | ShardingEvent | ErrorEvent | DoneEvent,
    Field(discriminator="type"),
]  # fmt: skip


# --- outputs ----------------------------------------------------------------------


@dataclass(frozen=True)
class OutputSpec:
    """What this layer knows of one output. The other layers each keep one table
    keyed by the same names (the engine's producers, sandbox/engine/outputs.py; the
    CLI's renderers, backend/render.py; the page's panes, frontend/src/panes/
    registry.ts), and tests check every table names every output."""

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
}
DEFAULT_OUTPUTS: tuple[Output, ...] = tuple(o for o in OUTPUTS if OUTPUT_TABLE[o].default)
assert tuple(OUTPUT_TABLE) == OUTPUTS, "OUTPUT_TABLE and Output name the same outputs"
assert all(EVENT_MODELS[name] is spec.event for name, spec in OUTPUT_TABLE.items())
EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(AnyEvent)

#: Every event type and the fields it carries besides ``type`` and ``pipeline``
#: (SPEC §2). docs/api.md is checked against this table by a test.
EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    kind: tuple(name for name in model.model_fields if name not in ("type", "pipeline"))
    for kind, model in EVENT_MODELS.items()
}
assert StageName.__args__ == STAGES and ErrorStage.__args__ == ERROR_STAGES  # type: ignore[attr-defined]
assert DoneStatus.__args__ == DONE_STATUSES  # type: ignore[attr-defined]


class BadEvent(ValueError):
    """A line that is not an event jaxplay accepts; the message says why, in a few
    words that never quote the line."""


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def check_line_shape(line: bytes) -> None:
    """Size, JSON values and depth of one line, from its raw bytes, without
    building any of it: strings are blanked (a C regex), then the structural
    bytes are counted, and pairs of brackets peeled one level per pass."""
    if len(line) > MAX_EVENT_BYTES:
        raise BadEvent(f"a line over {MAX_EVENT_BYTES} bytes")
    skeleton = _JSON_STRING.sub(b'""', line)
    nodes = len(skeleton) - len(skeleton.translate(None, b",[{")) + 1
    if nodes > MAX_EVENT_NODES:
        raise BadEvent(f"a line of over {MAX_EVENT_NODES} JSON values")
    brackets = skeleton.translate(_BRACKETS, _NOT_BRACKETS)
    for _ in range(MAX_EVENT_DEPTH):
        if not brackets:
            return
        brackets = brackets.replace(b"[]", b"")
    if brackets:
        raise BadEvent(f"a line nested deeper than {MAX_EVENT_DEPTH}")


def _why(exc: ValidationError) -> str:
    first = exc.errors(include_url=False, include_input=False)[0]
    # a location names fields of ours, list indices, or (for a bad key) the
    # line's own text: that is never repeated
    where = ".".join(
        str(part) if isinstance(part, int) or (part.isidentifier() and len(part) < 32) else "?"
        for part in first["loc"][:4]
    )
    return f"not a valid event ({first['type']} at {where or 'top'})"[:200]


def parse_event_line(line: bytes) -> dict[str, Any]:
    """One line a worker wrote, as an event: shape checked before it is parsed (no
    NaN, no infinity, valid UTF-8, no lone surrogate), then validated and dumped
    with only its declared fields. Raises ``BadEvent``."""
    check_line_shape(line)
    try:
        model = EVENT_ADAPTER.validate_json(line)
    except ValidationError as exc:
        raise BadEvent(_why(exc)) from None
    return _dump(model)


def validate_event(event: Any) -> dict[str, Any]:
    """An event already parsed (from a pool, the cache, Redis): validated the same way."""
    try:
        model = EVENT_ADAPTER.validate_python(event)
    except ValidationError as exc:
        raise BadEvent(_why(exc)) from None
    return _dump(model)


#: fields left out of an event unless set, rather than sent as null
_ABSENT_UNLESS_SET = ("cached", "cached_at", "age_s", "dropped")


class ValidEvent(dict[str, Any]):
    """An event as ``parse_event_line`` or ``validate_event`` made it from a model of
    this module (typed, bounded, its declared fields only). Only they make one (a
    worker writes bytes), so a reader in the same process that gets one unchanged
    need not validate it again (backend/app/runs.py); any other dict it validates."""

    __slots__ = ()


def _dump(model: BaseModel) -> ValidEvent:
    event = model.model_dump(by_alias=True)
    event = ValidEvent(type=event.pop("type"), **event)
    for name in _ABSENT_UNLESS_SET:
        if event.get(name, 0) is None:
            del event[name]
    return event


def event_json_schema() -> dict[str, Any]:
    """The JSON Schema of every event (docs/events.schema.json is this, committed)."""
    schema = EVENT_ADAPTER.json_schema(ref_template="#/$defs/{model}")
    schema["title"] = "jaxplay event"
    schema["description"] = (
        f"One event of a run (protocol {PROTOCOL_VERSION}); generated from "
        "sandbox/protocol.py by scripts/gen_event_types.py."
    )
    return schema


def done_event(status: str, ms: float, reason: str = "", dropped: int = 0) -> dict[str, Any]:
    assert status in DONE_STATUSES, status
    event: dict[str, Any] = {"type": "done", "status": status, "ms": round(ms, 3), "reason": reason}
    if dropped:
        event["dropped"] = dropped
    return event


def encode_event(event: dict[str, Any]) -> bytes:
    """One event as one line of JSON (the wire format between worker and server)."""
    return json.dumps(event, separators=(",", ":"), allow_nan=False).encode() + b"\n"
