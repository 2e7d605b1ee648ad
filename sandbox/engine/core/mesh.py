"""The run's mesh and shardings: the request spells a mesh and PartitionSpecs as
JSON (sandbox/protocol/sharding_request.py); this builds the JAX objects over the
run's devices, places the example arguments, lowers for other platforms, and makes
the pipeline steps that work over the mesh. What a compiled program's shardings
are is the ``sharding`` output (outputs/sharding.py).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

from sandbox.protocol.sharding_request import MeshSpec


class ShardingUnsupported(Exception):
    """A sharding feature the running JAX does not have."""


def _jax_version() -> str:
    import jax

    return str(jax.__version__)


def build_mesh(spec: MeshSpec, tpu_topology: str | None = None) -> Any:
    """``jax.make_mesh`` over the run's devices (or a TPU topology's, which no one
    has: sandbox/engine/core/tpu_topology.py), with the axis types asked for."""
    import jax

    if not hasattr(jax, "make_mesh"):
        raise ShardingUnsupported(
            f"`mesh` needs jax.make_mesh (JAX 0.4.35+); this is {_jax_version()}"
        )
    kwargs: dict[str, Any] = {}
    if spec.axis_types is not None:
        axis_type = getattr(jax.sharding, "AxisType", None)
        if axis_type is None:
            raise ShardingUnsupported(
                f"mesh axis_types need jax.sharding.AxisType (JAX 0.6+); this is {_jax_version()}: "
                "leave axis_types out"
            )
        kwargs["axis_types"] = tuple(getattr(axis_type, t.capitalize()) for t in spec.axis_types)
    if tpu_topology is not None:
        from sandbox.engine.core import tpu_topology as topologies

        kwargs["devices"] = topologies.check_mesh_fits(tpu_topology, spec.shape)
    return jax.make_mesh(tuple(spec.shape), tuple(spec.axis_names), **kwargs)


def partition_spec(spec: list[Any] | None) -> Any:
    """A JSON PartitionSpec as JAX's (``null`` or missing: replicated, ``P()``)."""
    from jax.sharding import PartitionSpec

    entries = [tuple(e) if isinstance(e, list) else e for e in spec or ()]
    return PartitionSpec(*entries)


def named(mesh: Any, spec: list[Any] | None) -> Any:
    from jax.sharding import NamedSharding

    return NamedSharding(mesh, partition_spec(spec))


def specs(value: list[Any] | None, *, single: bool) -> Any:
    """A list of JSON specs as shard_map/reshard take them: one entry is one spec
    for everything when ``single`` (a prefix of the outputs), else a tuple."""
    items = [partition_spec(s) for s in value or ()]
    if single and len(items) == 1:
        return items[0]
    return tuple(items)


def place_args(args: tuple[Any, ...], mesh: Any, shardings: list[Any]) -> tuple[Any, ...]:
    """Each argument placed as its PartitionSpec says (``null``: replicated)."""

    if len(shardings) != len(args):
        raise ValueError(
            f"in_shardings has {len(shardings)} entries but args has {len(args)} arguments: "
            "give one PartitionSpec (or null) per argument"
        )
    return tuple(_place(a, named(mesh, s)) for a, s in zip(args, shardings, strict=True))


def abstract_args(
    args: tuple[Any, ...], shardings: Callable[[], list[Any]], field: str, onto: str
) -> tuple[Any, ...]:
    """Each array argument (or ``ShapeDtypeStruct``) as a ``ShapeDtypeStruct`` of its
    shape and dtype on its argument's sharding (``shardings()``, one per argument,
    asked for only once the arguments pass): devices no one has (a TPU topology's, a
    GPU target's) take no data. Python scalars and static arguments stay as they are
    (jit traces or keeps them). A ``field`` run (``tpu_topology``, ``gpu_target``)
    with no array is refused: jit places a program by its arguments, and without one
    it would compile for the CPU instead of ``onto``."""
    import jax

    def is_array(leaf: Any) -> bool:
        return hasattr(leaf, "shape") and hasattr(leaf, "dtype")

    if not any(is_array(leaf) for leaf in jax.tree_util.tree_leaves(args)):
        raise ValueError(
            f"a {field} run needs at least one array argument (an array, or "
            f"jax.ShapeDtypeStruct, in `args`): it is what puts the program on {onto}"
        )

    def abstract(leaf: Any, sharding: Any) -> Any:
        return (
            jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding)
            if is_array(leaf)
            else leaf
        )

    return tuple(
        jax.tree_util.tree_map(functools.partial(abstract, sharding=sharding), arg)
        for arg, sharding in zip(args, shardings(), strict=True)
    )


def topology_args(args: tuple[Any, ...], mesh: Any, shardings: list[Any] | None) -> tuple[Any, ...]:
    """The arguments of a ``tpu_topology`` run: abstract on their PartitionSpecs over
    the topology's mesh (``null`` or no ``in_shardings``: replicated)."""
    specs = [None] * len(args) if shardings is None else shardings
    if len(specs) != len(args):
        raise ValueError(
            f"in_shardings has {len(specs)} entries but args has {len(args)} arguments: "
            "give one PartitionSpec (or null) per argument"
        )
    return abstract_args(
        args, lambda: [named(mesh, spec) for spec in specs], "tpu_topology", "the topology"
    )


def _place(arg: Any, sharding: Any) -> Any:
    """An argument on its sharding; an abstract one (``ShapeDtypeStruct``) carries it."""
    import jax

    if isinstance(arg, jax.ShapeDtypeStruct):
        return jax.ShapeDtypeStruct(arg.shape, arg.dtype, sharding=sharding)
    return jax.device_put(arg, sharding)


def jit_shardings(request: Any, mesh: Any) -> dict[str, Any]:
    """jit's ``in_shardings``/``out_shardings`` for the request (empty without any)."""
    out: dict[str, Any] = {}
    if request.in_shardings is not None:
        out["in_shardings"] = tuple(
            None if s is None else named(mesh, s) for s in request.in_shardings
        )
    if request.out_shardings is not None:
        outs = [None if s is None else named(mesh, s) for s in request.out_shardings]
        out["out_shardings"] = outs[0] if len(outs) == 1 else tuple(outs)
    return out


@contextlib.contextmanager
def mesh_context(mesh: Any) -> Iterator[None]:
    """The mesh as the ambient one while a pipeline runs (``P`` alone in
    ``reshard``, explicit axes in types); nothing without a mesh."""
    import jax

    if mesh is None:
        yield
        return
    if hasattr(jax, "set_mesh"):
        with jax.set_mesh(mesh):
            yield
    elif hasattr(jax.sharding, "use_mesh"):
        with jax.sharding.use_mesh(mesh):
            yield
    else:
        with mesh:
            yield


def lower_for(lowerable: Any, args: tuple[Any, ...], platforms: list[str]) -> Any:
    """Lower for other platforms than this worker's (no compile: no hardware needed)."""
    try:
        traced = lowerable.trace(*args)
        return traced.lower(lowering_platforms=tuple(platforms))
    except (AttributeError, TypeError) as exc:
        if "lowering_platforms" in str(exc) or "trace" in str(exc):
            raise ShardingUnsupported(
                f"lowering_platforms needs jit(...).trace(...).lower(lowering_platforms=...), "
                f"which JAX {_jax_version()} does not have"
            ) from exc
        raise


# --- pipeline steps over the mesh (sandbox/engine/core/pipeline.py's MESH_RULES) ---------


def shard_map_step(fn: Any, options: dict[str, Any], mesh: Any) -> Any:
    """``jax.shard_map(fn, mesh=, in_specs=, out_specs=, axis_names=)``; before
    JAX's top-level shard_map, ``jax.experimental.shard_map`` (all axes manual)."""
    import jax

    kwargs: dict[str, Any] = {"out_specs": specs(options["out_specs"], single=True)}
    if "in_specs" in options:
        kwargs["in_specs"] = specs(options["in_specs"], single=False)
    if hasattr(jax, "shard_map"):
        if options.get("axis_names"):
            kwargs["axis_names"] = frozenset(options["axis_names"])
        if "check_vma" in options:
            kwargs["check_vma"] = bool(options["check_vma"])
        return jax.shard_map(fn, mesh=mesh, **kwargs)
    from jax.experimental.shard_map import shard_map

    if "in_specs" not in kwargs:
        raise ShardingUnsupported(f"shard_map needs `in_specs` on JAX {_jax_version()}")
    if options.get("axis_names"):
        raise ShardingUnsupported(
            f"shard_map's axis_names needs JAX 0.7+; this is {_jax_version()}"
        )
    return shard_map(fn, mesh, check_rep=bool(options.get("check_vma", True)), **kwargs)


def smap_step(fn: Any, options: dict[str, Any], mesh: Any) -> Any:
    """``jax.smap``: shard_map over one axis, spelled as vmap is."""
    import jax

    if not hasattr(jax, "smap"):
        raise ShardingUnsupported(f"smap needs JAX 0.7+; this is {_jax_version()}")
    kwargs = {k: _axes(v) for k, v in options.items() if k in ("in_axes", "out_axes")}
    kwargs.setdefault("out_axes", 0)
    return jax.smap(fn, axis_name=options["axis_name"], **kwargs)


def _axes(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def reshard_step(fn: Any, options: dict[str, Any], mesh: Any) -> Any:
    """The function's outputs resharded to ``out_specs`` (``jax.reshard``)."""
    import jax

    # jax.sharding.reshard from 0.7, also jax.reshard from 0.8
    reshard = getattr(jax, "reshard", None) or getattr(jax.sharding, "reshard", None)
    if reshard is None:
        raise ShardingUnsupported(f"reshard needs JAX 0.7+; this is {_jax_version()}")
    out = specs(options["out_specs"], single=True)
    if mesh is not None:
        out = jax.tree_util.tree_map(lambda p: named(mesh, list(p)), out, is_leaf=_is_spec)

    def reshard_of(*args: Any) -> Any:
        return reshard(fn(*args), out)

    return reshard_of


def _is_spec(value: Any) -> bool:
    from jax.sharding import PartitionSpec

    return isinstance(value, PartitionSpec)
