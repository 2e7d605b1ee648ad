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

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

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

#: Every event type and the fields it carries besides ``type`` and ``pipeline``
#: (SPEC §2). docs/api.md is checked against this table by a test.
EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    "accepted": ("run_id", "worker"),
    "stdout": ("text", "stage"),
    "stderr": ("text", "stage"),
    "stage": ("stage", "ms"),
    "jaxpr": ("text", "sources"),
    "stablehlo": ("text", "sources"),
    "hlo": ("text", "sources"),
    "value": ("repr", "tree"),
    "cost": ("flops", "transcendentals", "bytes_accessed", "memory"),
    "timing": ("rows", "notes"),
    "error": ("stage", "kind", "message", "line", "hint", "doc_url"),
    "done": ("status", "ms", "reason"),
}
DONE_STATUSES = ("ok", "error", "timeout", "killed", "cancelled")


def done_event(status: str, ms: float, reason: str = "") -> dict[str, Any]:
    assert status in DONE_STATUSES, status
    return {"type": "done", "status": status, "ms": round(ms, 3), "reason": reason}


def encode_event(event: dict[str, Any]) -> bytes:
    """One event as one line of JSON (the wire format between worker and server)."""
    return json.dumps(event, separators=(",", ":"), allow_nan=False).encode() + b"\n"
