"""A run request (SPEC §1): what goes into a run, checked before any of it reaches a
worker."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sandbox.environments.libraries import LIBRARIES
from sandbox.environments.versions import JAX_VERSION_PATTERN
from sandbox.protocol.checks import (
    CHECK_NAMES,
    CHECKS,
    GRAD_MODES,
    MAX_GRAD_ORDER,
    CheckName,
    GradMode,
)
from sandbox.protocol.gpu_target_request import GPU_TARGETS, check_gpu_target
from sandbox.protocol.limits import (
    MAX_CODE_BYTES,
    MAX_COMPARE,
    MAX_COMPILER_OPTIONS,
    MAX_DEVICES,
    MAX_EXPR_BYTES,
    MAX_LABEL_CHARS,
    MAX_TRANSFORMS,
    NUMERICS_MAX_VALUES,
)
from sandbox.protocol.output_table import DEFAULT_OUTPUTS
from sandbox.protocol.sharding_request import (
    TPU_TOPOLOGY_PATTERN,
    LoweringPlatform,
    MeshSpec,
    Shardings,
    check_lowering,
    check_shardings,
    check_topology,
    check_transform,
)
from sandbox.protocol.vocabulary import Output

#: The file name user code is compiled under; it is what JAX's source locations,
#: tracebacks and HLO metadata show, and what the engine maps lines from.
SNIPPET_FILENAME = "snippet.py"
#: a library of the set a request may pick a version of (sandbox/environments/libraries.py), and
#: how that version is spelled (PEP 440's public versions, roughly)
LIBRARY_NAMES = tuple(lib.name for lib in LIBRARIES)
LIBRARY_VERSION_PATTERN = r"^[0-9][0-9A-Za-z.+!-]{0,40}$"
Backend = Literal["cpu", "gpu", "tpu", "auto"]

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
    # sharding (sandbox/protocol/sharding_request.py checks their specs against the mesh)
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

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: the ``export`` output's shapes: one per argument, JAX's symbolic-shape syntax
#: (dimension names, integers, + - * and parentheses; ``jax.export`` parses it)
MAX_EXPORT_ARGS = 64
SymbolicShape = Annotated[str, Field(max_length=200, pattern=r"^[A-Za-z0-9_ ,+\-*()/]*$")]
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


#: the precision settings the numerics output can run a pipeline under
NumericsSetting = Literal[
    "default", "high", "highest", "float64", "bfloat16", "float16", "bfloat16_params",
    "float16_params", "tpu_default",
]  # fmt: skip


#: The largest ``value_from``: past any value a worker's memory could hold.
MAX_VALUE_FROM = 2**31 - 1


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
    libraries: Annotated[
        dict[str, Annotated[str, Field(pattern=LIBRARY_VERSION_PATTERN)]],
        Field(max_length=len(LIBRARY_NAMES)),
    ] = Field(
        default_factory=dict,
        description="Versions of the JAX version's libraries to run with instead of its "
        'defaults (`{"optax": "0.2.6"}`): only those the operator offers '
        "(`GET /api/v1/backends`, each library's `alternatives`); others are refused.",
    )
    gpu_target: str | None = Field(
        None,
        description="Compile for this NVIDIA GPU without one (XLA's deviceless compile: "
        f"{', '.join(GPU_TARGETS)}): hlo, cost, passes, asm (its PTX) and memory are that "
        "GPU's; nothing runs. Only where the operator installed JAX's CUDA plugin.",
    )
    pallas_interpret: Literal["auto", "tpu_races"] = Field(
        "auto",
        description="How a `pallas_call` without `interpret=` runs on a CPU run: `auto`, "
        "`interpret=True`; `tpu_races`, TPU-simulating interpret mode with race detection "
        "(`pltpu.InterpretParams(detect_races=True)`, uninitialised memory NaN), its races "
        "as remarks.",
    )
    checks: Annotated[list[CheckName], Field(max_length=len(CHECK_NAMES))] = Field(
        default_factory=list,
        description="One-click checks of each pipeline, run after its outputs: "
        + "; ".join(f"`{name}`: {what}" for name, what in CHECKS.items())
        + ". Their results are the `checks` output (added to `outputs` when any is named).",
    )
    grad_orders: Annotated[
        list[Annotated[int, Field(ge=1, le=MAX_GRAD_ORDER)]],
        Field(min_length=1, max_length=MAX_GRAD_ORDER),
    ] = Field(
        default_factory=lambda: [1],
        description="The `grad` check's orders: each is one `check_grads(order=N)`, which "
        "checks every order up to N.",
    )
    grad_modes: Annotated[list[GradMode], Field(min_length=1, max_length=2)] = Field(
        default_factory=lambda: list(GRAD_MODES),
        description="The `grad` check's modes (check_grads' `modes`): `fwd` (JVP), `rev` (VJP).",
    )
    cost_before: bool = Field(
        False,
        description="The `cost` output's `before`: XLA's cost analysis of the module before "
        "optimisation (`Lowered.cost_analysis`, which converts the module to HLO again: "
        "15-45 % of the compile's time); else `before` is null.",
    )
    trace_values_compare: bool = Field(
        False,
        description="`trace_values` steps the compare pipelines too; by default only the main "
        "pipeline is stepped (a compare pipeline's event has no rows and a note saying so).",
    )
    value_from: int = Field(
        0,
        ge=0,
        le=MAX_VALUE_FROM,
        strict=True,
        description="The `value` output's first leaf described, by its index in the value's "
        "flatten order (`jax.tree_util.tree_flatten`): its `tree` holds the leaves from it, "
        "and their data budget counts from it. Past the last leaf: an empty `tree`.",
    )
    numerics_max_values: int = Field(
        NUMERICS_MAX_VALUES,
        ge=1,
        le=2**40,
        description="`numerics` refuses a program making more values than this (its float64 "
        "shadow holds a copy of each); a server caps it at its `numerics_max_values` setting.",
    )
    numerics_precision: Annotated[list[NumericsSetting], Field(max_length=9)] = Field(
        default_factory=list,
        description="`numerics` runs the pipeline again under each of these and shows each "
        "output's error against the float64 shadow: `default`, `high`, `highest` "
        "(jax.default_matmul_precision), `float64`, `bfloat16` or `float16` (compute in "
        "that dtype, params and outputs float32), `bfloat16_params` or `float16_params` "
        "(params stored in that dtype, compute float32), `tpu_default` (a TPU's default emulated: "
        "each float32 matrix product's operands rounded to bfloat16).",
    )

    export_shapes: Annotated[list[SymbolicShape | None], Field(max_length=MAX_EXPORT_ARGS)] | None = Field(
        None,
        description="The `export` output: one symbolic shape per argument in JAX's syntax "
        '(`"b, 3"`; `jax.export.symbolic_shape`), null for an argument\'s own shape; '
        "default: every argument's own shape.",
    )  # fmt: skip
    export_platforms: Annotated[list[LoweringPlatform], Field(min_length=1, max_length=4)] | None = Field(
        None,
        description='The `export` output\'s platforms (`["cpu", "cuda", "tpu"]`); default: '
        "the worker's. The round trip calls the artifact where the worker's is among them.",
    )  # fmt: skip

    @model_validator(mode="before")
    @classmethod
    def _checks_output(cls, data: Any) -> Any:
        """The `checks` output is in `outputs` exactly when `checks` names any check."""
        if not isinstance(data, dict):
            return data
        checks, outputs = data.get("checks"), data.get("outputs")
        asked = isinstance(checks, list | tuple) and len(checks) > 0
        if outputs is None and asked:
            outputs = list(DEFAULT_OUTPUTS)
        if not isinstance(outputs, list | tuple):
            return data
        kept = [o for o in outputs if o != "checks"]
        return {**data, "outputs": [*kept, "checks"] if asked else kept}

    @model_validator(mode="after")
    def _checks_run(self) -> RunRequest:
        nothing_runs = {
            "gpu_target": self.gpu_target,
            "tpu_topology": self.tpu_topology,
            "lowering_platforms": self.lowering_platforms,
        }
        named = [name for name, value in nothing_runs.items() if value]
        if self.checks and named:
            raise ValueError(
                f"checks run the pipeline, and with {named[0]} nothing runs: drop one or the other"
            )
        return self

    @field_validator("checks", "grad_modes")
    @classmethod
    def _names_once(cls, names: list[str]) -> list[str]:
        return list(dict.fromkeys(names))

    @field_validator("grad_orders")
    @classmethod
    def _orders_sorted(cls, orders: list[int]) -> list[int]:
        return sorted(set(orders))

    @field_validator("code")
    @classmethod
    def _code_size(cls, code: str) -> str:
        if len(code.encode()) > MAX_CODE_BYTES:
            raise ValueError(f"code is over {MAX_CODE_BYTES // 1024} KiB")
        return code

    @field_validator("libraries")
    @classmethod
    def _libraries_of_the_set(cls, chosen: dict[str, str]) -> dict[str, str]:
        for name in chosen:
            if name not in LIBRARY_NAMES:
                raise ValueError(
                    f"{name!r} is not a library of the set: {', '.join(LIBRARY_NAMES)}"
                )
        return chosen

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
