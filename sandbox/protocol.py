"""The worker protocol: what goes into a run and what comes out of it.

This is the one module that the server (``backend``) and the sandbox share, so it
must stay free of JAX and of anything server-side. A run request goes in; a stream
of JSON events comes out, one object per line, ending with ``done``.
See SPEC.md §1 (request) and §2 (events), mirrored in docs/api.md.
"""

from __future__ import annotations

import json
import re
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

Output = Literal["jaxpr", "stablehlo", "hlo", "value", "cost", "timing"]
OUTPUTS: tuple[Output, ...] = ("jaxpr", "stablehlo", "hlo", "value", "cost", "timing")
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
    outputs: list[Output] = Field(default_factory=lambda: list(OUTPUTS))
    backend: Backend = "auto"
    devices: int = Field(1, ge=1, le=MAX_DEVICES)
    config: dict[str, bool | int | float | str] = Field(default_factory=dict)
    timeout_s: float = Field(20.0, gt=0, le=600)
    compare: Annotated[list[Pipeline], Field(max_length=MAX_COMPARE)] = Field(default_factory=list)
    jax_version: str | None = Field(
        None,
        pattern=JAX_VERSION_PATTERN,
        description="The JAX version to run on (`0.10.2`); default: the server's default "
        "version. `GET /api/v1/backends` lists them.",
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
#: Where an error's ``doc_url`` may point: JAX's documentation (and Python's, for a
#: syntax error); anything else is not an event jaxplay made.
DOC_URL_PREFIXES = (
    "https://docs.jax.dev/",
    "https://jax.readthedocs.io/",
    "https://docs.python.org/3/",
)
DONE_STATUSES = ("ok", "error", "timeout", "killed", "cancelled")
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
DoneStatus = Literal["ok", "error", "timeout", "killed", "cancelled"]
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


class CostEvent(_PipelineEvent):
    type: Literal["cost"]
    flops: Measure | None = None
    transcendentals: Measure | None = None
    bytes_accessed: Measure | None = None
    memory: Annotated[
        dict[Annotated[str, Field(pattern=r"^[a-z_]{1,32}$")], Count | None], Field(max_length=16)
    ] = Field(default_factory=dict)


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
    notes: Annotated[list[Annotated[str, Field(max_length=MAX_MESSAGE_CHARS)]], Field(max_length=MAX_NOTES)] = Field(default_factory=list)  # fmt: skip


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
    (malformed, or not events jaxplay would send); ``cached``: the cache answered."""

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
    "error": ErrorEvent,
    "done": DoneEvent,
}
AnyEvent = Annotated[
    AcceptedEvent | StdoutEvent | StderrEvent | StageEvent | JaxprEvent | StablehloEvent
    | HloEvent | ValueEvent | CostEvent | TimingEvent | ErrorEvent | DoneEvent,
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


def _dump(model: BaseModel) -> dict[str, Any]:
    event = model.model_dump()
    event = {"type": event.pop("type"), **event}
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
