"""The sharding part of a run request: the mesh, PartitionSpecs, lowering platforms.

Free of JAX (the server validates requests with it). A PartitionSpec travels as a
JSON list with one entry per array dimension: an axis name, a list of axis names
(the dimension split over several mesh axes), or ``null`` (not split), exactly
as ``jax.sharding.PartitionSpec`` takes its arguments. ``sandbox/protocol/``
puts these into ``RunRequest`` and ``Transform``; the engine builds the JAX objects
(sandbox/engine/core/mesh.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: how many mesh dimensions, array dimensions in a spec, and axes per entry
MAX_MESH_RANK = 4
MAX_SPEC_RANK = 16
MAX_SPEC_ARGS = 64
AXIS_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,31}$"

AxisName = Annotated[str, Field(pattern=AXIS_NAME_PATTERN)]
SpecEntry = AxisName | Annotated[list[AxisName], Field(max_length=MAX_MESH_RANK)] | None
PartitionSpecJSON = Annotated[list[SpecEntry], Field(max_length=MAX_SPEC_RANK)]
#: one spec per argument (or output); ``null``: replicated (unspecified for jit)
Shardings = Annotated[list[PartitionSpecJSON | None], Field(max_length=MAX_SPEC_ARGS)]
AxisTypeName = Literal["auto", "explicit", "manual"]
LoweringPlatform = Literal["cpu", "cuda", "rocm", "tpu"]
#: outputs a run lowered for another platform can give (it compiles nothing)
LOWERING_ONLY_OUTPUTS = frozenset({"jaxpr", "stablehlo", "shapes", "autodiff"})
#: a TPU topology as libtpu names one (``v5e:2x2``, ``v4:2x2x1``, ``v5p=2x2x1``); which
#: ones a run may name is the operator's list (JAXPLAY_TPU_TOPOLOGIES)
TPU_TOPOLOGY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 _]{0,15}[:=_-][0-9]{1,4}(x[0-9]{1,4}){0,2}$"
#: outputs a deviceless TPU compile can give (it compiles for the topology, runs nothing)
TOPOLOGY_OUTPUTS = frozenset(
    {"jaxpr", "stablehlo", "hlo", "cost", "memory", "sharding", "shapes", "profile"}
)
#: the transforms whose options name mesh axes, and which of their options do
SPEC_OPTIONS = {"shard_map": ("in_specs", "out_specs"), "reshard": ("out_specs",)}
AXIS_OPTIONS = {"shard_map": "axis_names", "smap": "axis_name"}
CHECKIFY_ERRORS = (
    "user_checks",
    "nan_checks",
    "index_checks",
    "div_checks",
    "float_checks",
    "automatic_checks",
    "all_checks",
)


class MeshSpec(BaseModel):
    """``jax.make_mesh(shape, axis_names, axis_types=...)`` over the run's devices."""

    model_config = ConfigDict(extra="forbid")

    shape: Annotated[
        list[Annotated[int, Field(ge=1, le=64)]], Field(min_length=1, max_length=MAX_MESH_RANK)
    ]
    axis_names: Annotated[list[AxisName], Field(min_length=1, max_length=MAX_MESH_RANK)]
    axis_types: Annotated[list[AxisTypeName], Field(max_length=MAX_MESH_RANK)] | None = Field(
        None, description="Per axis; default: what the running JAX's `make_mesh` defaults to."
    )

    @model_validator(mode="after")
    def _consistent(self) -> MeshSpec:
        if len(self.axis_names) != len(self.shape):
            raise ValueError(
                f"mesh has {len(self.shape)} dimensions but {len(self.axis_names)} axis_names"
            )
        if len(set(self.axis_names)) != len(self.axis_names):
            raise ValueError(f"mesh axis_names repeat a name: {self.axis_names}")
        if self.axis_types is not None and len(self.axis_types) != len(self.shape):
            raise ValueError(
                f"mesh has {len(self.shape)} dimensions but {len(self.axis_types)} axis_types"
            )
        if math.prod(self.shape) > 64:
            raise ValueError(f"mesh shape {self.shape} needs over 64 devices")
        return self


def spec_axes(spec: list[Any] | None) -> list[str]:
    """The mesh axes a PartitionSpec names, in order."""
    axes: list[str] = []
    for entry in spec or ():
        if isinstance(entry, str):
            axes.append(entry)
        elif isinstance(entry, list):
            axes.extend(entry)
    return axes


def check_spec(where: str, spec: Any, mesh: MeshSpec | None) -> None:
    """One PartitionSpec: a list of entries, axes of the mesh, each axis used once."""
    if spec is None:
        return
    if not isinstance(spec, list) or len(spec) > MAX_SPEC_RANK:
        raise ValueError(f'{where} must be a PartitionSpec: a list like ["x", null]')
    for entry in spec:
        ok = entry is None or isinstance(entry, str)
        ok = ok or (isinstance(entry, list) and all(isinstance(a, str) for a in entry))
        if not ok:
            raise ValueError(f"{where}: each entry is an axis name, a list of names, or null")
    axes = spec_axes(spec)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{where} uses a mesh axis twice: {spec}")
    if mesh is None:
        raise ValueError(f"{where} needs a `mesh` in the request")
    unknown = [a for a in axes if a not in mesh.axis_names]
    if unknown:
        raise ValueError(f"{where} names {unknown}, not axes of the mesh {mesh.axis_names}")


def check_shardings(field: str, shardings: list[Any] | None, mesh: MeshSpec | None) -> None:
    if shardings is None:
        return
    if mesh is None:
        raise ValueError(f"{field} needs a `mesh` in the request")
    for i, spec in enumerate(shardings):
        check_spec(f"{field}[{i}]", spec, mesh)


def check_transform(where: str, name: str, options: dict[str, Any], mesh: MeshSpec | None) -> None:
    """The sharding transforms' options against the request's mesh."""
    for option in SPEC_OPTIONS.get(name, ()):
        if option not in options:
            if option == "out_specs":
                raise ValueError(f"{where} ({name}) needs `out_specs`")
            continue
        specs = options[option]
        if not isinstance(specs, list) or not all(s is None or isinstance(s, list) for s in specs):
            raise ValueError(
                f"{where}.{option} must be a list of PartitionSpecs (one per "
                'argument or output), like [["x"], null]'
            )
        for i, spec in enumerate(specs):
            check_spec(f"{where}.{option}[{i}]", spec, mesh)
    if name in AXIS_OPTIONS:
        option = AXIS_OPTIONS[name]
        names = options.get(option)
        if name == "smap" and not isinstance(names, str):
            raise ValueError(f"{where} (smap) needs `axis_name`: one mesh axis")
        if name in ("shard_map", "smap") and mesh is None:
            raise ValueError(f"{where} ({name}) needs a `mesh` in the request")
        listed = [names] if isinstance(names, str) else list(names or [])
        assert mesh is not None
        unknown = [a for a in listed if a not in mesh.axis_names]
        if unknown:
            raise ValueError(
                f"{where}.{option} names {unknown}, not axes of the mesh {mesh.axis_names}"
            )
    if name == "checkify":
        errors = options.get("errors", "user_checks")
        listed = [errors] if isinstance(errors, str) else errors
        if (
            not isinstance(listed, list)
            or not listed
            or any(e not in CHECKIFY_ERRORS for e in listed)
        ):
            raise ValueError(f"{where}.errors must be one or more of {list(CHECKIFY_ERRORS)}")


def check_lowering(platforms: Sequence[str] | None, outputs: Sequence[str]) -> None:
    if not platforms:
        return
    extra = sorted(set(outputs) - LOWERING_ONLY_OUTPUTS)
    if extra:
        raise ValueError(
            "lowering_platforms gives the jaxpr and that platform's StableHLO only (nothing "
            f"is compiled or run): drop {extra} from outputs"
        )


def check_topology(
    topology: str | None,
    mesh: MeshSpec | None,
    outputs: Sequence[str],
    platforms: Sequence[str] | None,
) -> None:
    if topology is None:
        return
    if mesh is None:
        raise ValueError(
            "tpu_topology needs a `mesh`: the mesh is built over the topology's devices "
            '(e.g. {"shape": [2, 2], "axis_names": ["x", "y"]} for v5e:2x2)'
        )
    if platforms:
        raise ValueError("tpu_topology compiles for TPU already: leave lowering_platforms out")
    extra = sorted(set(outputs) - TOPOLOGY_OUTPUTS)
    if extra:
        raise ValueError(
            f"tpu_topology compiles for a TPU that is not there (nothing runs): outputs may "
            f"be {sorted(TOPOLOGY_OUTPUTS)}; drop {extra}"
        )
