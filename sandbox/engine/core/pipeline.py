"""Builds a pipeline from the request's transforms: one small rule per name.

``[grad, jit]`` means ``jit(grad(f))``. Each rule takes the function built so far
and the transform's options (spelled as the JAX function spells them) and returns
the transformed function.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax

from sandbox.engine.core import mesh as meshes
from sandbox.engine.core.program import as_python, evaluate
from sandbox.protocol.requests import Transform

Rule = Callable[[Callable[..., Any], dict[str, Any], dict[str, Any]], Callable[..., Any]]


class TransformOptionError(ValueError):
    """An option value that JAX would not accept, caught before tracing."""


def _jvp(fn: Callable[..., Any], opts: dict[str, Any], ns: dict[str, Any]) -> Callable[..., Any]:
    tangents = _expression_tuple(opts, "tangents", ns)

    def jvp_of(*primals: Any) -> Any:
        return jax.jvp(fn, primals, tangents)

    return jvp_of


def _vjp(fn: Callable[..., Any], opts: dict[str, Any], ns: dict[str, Any]) -> Callable[..., Any]:
    if "cotangents" not in opts:
        raise TransformOptionError(
            "vjp needs `cotangents`: an expression for the output's cotangent"
        )
    cotangents = evaluate(str(opts["cotangents"]), ns, "<cotangents>")

    def vjp_of(*primals: Any) -> Any:
        out, pullback = jax.vjp(fn, *primals)
        return out, pullback(cotangents)

    return vjp_of


def _expression_tuple(
    opts: dict[str, Any], name: str, ns: dict[str, Any], step: str = "jvp"
) -> tuple[Any, ...]:
    if name not in opts:
        raise TransformOptionError(
            f"{step} needs `{name}`: an expression, one tangent per argument"
        )
    value = evaluate(str(opts[name]), ns, f"<{name}>")
    return value if isinstance(value, tuple) else (value,)


def _checkpoint(
    fn: Callable[..., Any], opts: dict[str, Any], ns: dict[str, Any]
) -> Callable[..., Any]:
    opts = dict(opts)
    policy = opts.pop("policy", None)
    if policy is not None:
        names = sorted(n for n in dir(jax.checkpoint_policies) if not n.startswith("_"))
        if policy not in names:
            raise TransformOptionError(
                f"checkpoint policy {policy!r} is not in jax.checkpoint_policies; known: {', '.join(names)}"
            )
        opts["policy"] = getattr(jax.checkpoint_policies, policy)
    return jax.checkpoint(fn, **opts)


def _linearize(
    fn: Callable[..., Any], opts: dict[str, Any], ns: dict[str, Any]
) -> Callable[..., Any]:
    tangents = _expression_tuple(opts, "tangents", ns, "linearize")

    def linearize_of(*primals: Any) -> Any:
        out, f_jvp = jax.linearize(fn, *primals)
        return out, f_jvp(*tangents)

    return linearize_of


def _linear_transpose(
    fn: Callable[..., Any], opts: dict[str, Any], ns: dict[str, Any]
) -> Callable[..., Any]:
    if "cotangents" not in opts:
        raise TransformOptionError(
            "linear_transpose needs `cotangents`: an expression for the output's cotangent"
        )
    cotangents = evaluate(str(opts["cotangents"]), ns, "<cotangents>")

    def transpose_of(*primals: Any) -> Any:
        return jax.linear_transpose(fn, *primals)(cotangents)

    return transpose_of


def _checkify(
    fn: Callable[..., Any], opts: dict[str, Any], ns: dict[str, Any]
) -> Callable[..., Any]:
    from jax.experimental import checkify

    names = opts.get("errors", "user_checks")
    names = (names,) if isinstance(names, str) else tuple(names)
    errors = frozenset[Any]()
    for name in names:
        errors = errors | getattr(checkify, name)
    return checkify.checkify(fn, errors=errors)


def _plain(jax_fn: Callable[..., Any]) -> Rule:
    return lambda fn, opts, ns: jax_fn(fn, **opts)


RULES: dict[str, Rule] = {
    "jit": _plain(jax.jit),
    "grad": _plain(jax.grad),
    "value_and_grad": _plain(jax.value_and_grad),
    "vmap": _plain(jax.vmap),
    "pmap": _plain(jax.pmap),
    "jacfwd": _plain(jax.jacfwd),
    "jacrev": _plain(jax.jacrev),
    "hessian": _plain(jax.hessian),
    "checkpoint": _checkpoint,
    "jvp": _jvp,
    "vjp": _vjp,
    "linearize": _linearize,
    "linear_transpose": _linear_transpose,
    "checkify": _checkify,
}
#: steps that work over the request's mesh (core/mesh.py), given the
#: step's options as JSON (their PartitionSpecs are lists)
MESH_RULES: dict[str, Callable[[Callable[..., Any], dict[str, Any], Any], Callable[..., Any]]] = {
    "shard_map": meshes.shard_map_step,
    "smap": meshes.smap_step,
    "reshard": meshes.reshard_step,
}


@dataclass
class Pipeline:
    fn: Callable[..., Any]
    label: str
    #: positions of static arguments (jit's static_argnums/argnames, pmap's
    #: static_broadcasted_argnums): passed to make_jaxpr and to the jit wrapper
    static_argnums: tuple[int, ...] = ()
    transforms: list[str] = field(default_factory=list)
    #: jit was given donate_argnums/donate_argnames: a call consumes its arguments
    donates: bool = False

    def lowerable(self) -> Any:
        """What ``.lower`` is called on: the pipeline itself when its outermost
        transform is jit or pmap, else the pipeline under a plain jit."""
        if hasattr(self.fn, "lower"):
            return self.fn
        return jax.jit(self.fn, static_argnums=self.static_argnums)

    def dynamic_args(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """The arguments a compiled executable takes: the non-static ones."""
        return tuple(a for i, a in enumerate(args) if i not in self.static_argnums)


def _positions(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, int) else tuple(value)


def _names_to_positions(fn: Callable[..., Any], names: Any) -> tuple[int, ...]:
    names = (names,) if isinstance(names, str) else tuple(names or ())
    if not names:
        return ()
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return ()
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return tuple(positional.index(n) for n in names if n in positional)


def _describe(name: str, inner: str, opts: dict[str, Any]) -> str:
    extra = "".join(f", {k}={v!r}" for k, v in opts.items() if k not in ("tangents", "cotangents"))
    return f"{name}({inner}{extra})"


def build(
    f: Callable[..., Any],
    entry: str,
    transforms: list[Transform],
    ns: dict[str, Any],
    mesh: Any = None,
    shardings: dict[str, Any] | None = None,
) -> Pipeline:
    """The pipeline. ``shardings`` (jit's in_shardings/out_shardings, from the
    request) go to its last ``jit`` step; without one, a jit is added outermost."""
    fn, label, static, donates = f, entry, set[int](), False
    names: list[str] = [t.name for t in transforms]
    last_jit = len(names) - 1 - names[::-1].index("jit") if "jit" in names else None
    for i, transform in enumerate(transforms):
        opts = {k: as_python(v) for k, v in transform.options.items()}
        if transform.name == "jit":
            static |= set(_positions(opts.get("static_argnums")))
            static |= set(_names_to_positions(f, opts.get("static_argnames")))
            donated = (opts.get("donate_argnums"), opts.get("donate_argnames"))
            donates = donates or any(d is not None and d != () for d in donated)
            if i == last_jit and shardings:
                opts.update(shardings)
        if transform.name == "pmap":
            static |= set(_positions(opts.get("static_broadcasted_argnums")))
        if transform.name in MESH_RULES:
            fn = MESH_RULES[transform.name](fn, transform.options, mesh)
        else:
            fn = RULES[transform.name](fn, opts, ns)
        label = _describe(transform.name, label, {k: v for k, v in transform.options.items()})
    if shardings and last_jit is None:
        fn = jax.jit(fn, static_argnums=tuple(sorted(static)), **shardings)
        label = f"jit({label}, shardings)"
        names.append("jit")
    return Pipeline(fn, label, tuple(sorted(static)), names, donates)


def copy_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Fresh buffers for a call that donates (and so deletes) its arguments."""
    return jax.tree_util.tree_map(lambda a: a.copy() if isinstance(a, jax.Array) else a, args)
