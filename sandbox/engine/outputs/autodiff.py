"""The ``autodiff`` output: the stages JAX goes through to differentiate a pipeline.

The function differentiated is the pipeline up to its first differentiating step
(``grad``, ``value_and_grad``, ``vjp``, ``jacrev``, ``jacfwd``, ``hessian``,
``linearize``, ``jvp``), at the run's arguments, with respect to the floating-point
leaves of the arguments that step differentiates (``argnums``; every argument for
``jvp``, ``vjp`` and ``linearize``). Each stage is a jaxpr printed by JAX and
source-mapped like the ``jaxpr`` output:

- ``direct``, the path JAX takes by default since 0.7 (direct linearization; an
  opt-in flag, ``jax_use_direct_linearize``, in 0.4.3x to 0.6): ``forward``, what
  ``jax.vjp`` computes on the forward pass, its primal outputs then its residuals
  (the leaves of the VJP function); ``linear``, ``jax.linearize``'s linear function
  with its residuals as leading inputs; ``transpose``, ``jax.vjp``'s backward pass,
  residuals as leading inputs, then the cotangents.
- ``classic``, JVP + partial evaluation + transpose (JAX's default before 0.7),
  rebuilt from JAX's own functions on every version: ``jvp``, ``make_jaxpr`` of
  ``jax.jvp`` (primals, then tangents); ``known``, the forward half of
  ``partial_eval_jaxpr_nounits`` with the primals known and the tangents not (its
  trailing outputs are the residuals); ``linear``, the other half (residuals, then
  tangents); ``transpose``, ``jax.linear_transpose`` of that linear jaxpr.

Each residual is listed with its shape, dtype, bytes and the line that computed
it; a path's (and a policy's) ``residual_bytes`` counts those the forward pass
computes, not the inputs and constants it saves (the caller holds them anyway). With a ``checkpoint`` step before the differentiation, the residuals of JAX's
default path under several of ``jax.checkpoint_policies`` are compared: the bytes
saved against the FLOPs the backward pass recomputes (XLA's cost analysis, flops
plus transcendentals, of each policy's backward pass as lowered, less
everything_saveable's).
"""

from __future__ import annotations

import contextlib
import inspect
import io
import math
import re
from collections.abc import Callable
from typing import Any

from sandbox.engine.core.output import Output, Results
from sandbox.engine.core.sources import jaxpr_sources, snippet_line
from sandbox.protocol.limits import (
    MAX_AUTODIFF_CHARS,
    MAX_AUTODIFF_SOURCES,
    MAX_AUTODIFF_STAGES,
    MAX_MESSAGE_CHARS,
    MAX_RESIDUALS,
)

#: the steps that differentiate, and whether they take ``argnums``
DIFFERENTIATING = {
    "grad": True,
    "value_and_grad": True,
    "jacrev": True,
    "jacfwd": True,
    "hessian": True,
    "vjp": False,
    "jvp": False,
    "linearize": False,
}
#: steps that change the arguments' shapes: after the differentiation, the stages
#: cannot be traced at the run's arguments
_BATCHING = ("vmap", "pmap", "shard_map", "smap")
#: the policies compared, cheapest in memory first, where this JAX has them
POLICIES = (
    "nothing_saveable",
    "dots_with_no_batch_dims_saveable",
    "dots_saveable",
    "everything_saveable",
)
FLOPS_SOURCE = (
    "XLA's cost analysis (flops plus transcendentals) of each policy's backward pass as "
    "lowered, before optimisation; recomputed: that less everything_saveable's"
)
_STAGE_TITLES = {
    ("direct", "forward"): "forward pass (jax.vjp): primal outputs, then residuals",
    ("direct", "linear"): "linear jaxpr (jax.linearize): residuals, then tangents",
    ("direct", "transpose"): "transposed (jax.vjp's backward pass): residuals, then cotangents",
    ("classic", "jvp"): "JVP jaxpr (jax.jvp): primals, then tangents",
    ("classic", "known"): "partial evaluation, known: primal outputs, then residuals",
    ("classic", "linear"): "partial evaluation, unknown (linear): residuals, then tangents",
    ("classic", "transpose"): "transposed (jax.linear_transpose): residuals, then cotangents",
}


class NothingToDifferentiate(Exception):
    """Said in the event's notes: no stage can be shown, and why."""


def autodiff_event(
    f: Callable[..., Any],
    entry: str,
    transforms: list[Any],
    ns: dict[str, Any],
    args: tuple[Any, ...],
    mesh: Any = None,
) -> dict[str, Any]:
    """The ``autodiff`` event of one pipeline (its steps ``transforms`` over ``f``)."""
    event: dict[str, Any] = {
        "type": "autodiff",
        "transform": None,
        "function": entry,
        "wrt": [],
        "stages": [],
        "paths": [],
        "policies": [],
        "flops_source": None,
        "notes": [],
    }
    names = [t.name for t in transforms]
    step = next((i for i, n in enumerate(names) if n in DIFFERENTIATING), None)
    if step is None:
        event["notes"].append(
            "nothing to differentiate: the pipeline has no grad, value_and_grad, vjp, "
            "jacrev, jacfwd, hessian, linearize or jvp step"
        )
        return event
    event["transform"] = names[step]
    later = [n for n in names[step + 1 :] if n in _BATCHING]
    if later:
        one = one_example(transforms[step + 1 :], args)
        if one is None:
            event["notes"].append(
                f"{later[0]} is applied after {names[step]}: the stages are traced at the "
                "run's arguments, which are its batched ones, so they are not shown"
            )
            return event
        args = one
        event["notes"].append(
            f"vmap is applied after {names[step]}: the stages are shown for one example "
            "(index 0 along each mapped axis of the arguments)"
        )
    # The user's prints at trace time would repeat once per stage: not relayed.
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            target = _Target.build(f, entry, transforms, step, ns, args, mesh)
        except NothingToDifferentiate as why:
            event["notes"].append(str(why))
            return event
        event["function"] = target.label
        event["wrt"] = target.wrt
        stages: list[tuple[str, str, Any]] = []
        for path, maker in (("direct", _direct), ("classic", _classic)):
            row, made = _path(path, maker, target)
            event["paths"].append(row)
            stages += [(path, name, closed) for name, closed in made]
        event["stages"] = _stage_events(stages)
        checkpoint = [i for i, n in enumerate(names[:step]) if n == "checkpoint"]
        if checkpoint:
            event["policies"] = _policies(
                f, entry, transforms, step, checkpoint[-1], ns, args, mesh
            )
            event["flops_source"] = FLOPS_SOURCE
    return event


# --- the function differentiated --------------------------------------------------


class _Target:
    """The function the step differentiates: ``fn(*primals, *consts)``, over the flat
    differentiated leaves (``primals``) and the other array leaves of the arguments
    (``consts``: traced as inputs, not closed over, so an abstract argument works and
    a saved one is named)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        primals: list[Any],
        consts: list[Any],
        labels: list[str],
        label: str,
        linear: bool,
    ) -> None:
        self.fn, self.primals, self.consts, self.label = fn, primals, consts, label
        #: the leaves' names, the differentiated ones first (``wrt``)
        self.labels = labels
        self.wrt = labels[: len(primals)]
        #: the step is a forward-mode one (jvp, jacfwd, linearize): what it saves is
        #: linearize's; the others run jax.vjp
        self.linear = linear

    def bind(self, consts: Any) -> Callable[..., Any]:
        """The function of the differentiated leaves alone, at these ``consts``."""
        return lambda *xs: self.fn(*xs, *consts)

    @classmethod
    def build(
        cls,
        f: Callable[..., Any],
        entry: str,
        transforms: list[Any],
        step: int,
        ns: dict[str, Any],
        args: tuple[Any, ...],
        mesh: Any,
    ) -> _Target:
        import jax
        import jax.numpy as jnp

        from sandbox.engine.core import pipeline as pipelines
        from sandbox.engine.core.program import as_python

        prefix = pipelines.build(f, entry, transforms[:step], ns, mesh)
        transform = transforms[step]
        opts = {k: as_python(v) for k, v in transform.options.items()}
        if DIFFERENTIATING[transform.name]:
            argnums = opts.get("argnums", 0)
            positions = (argnums,) if isinstance(argnums, int) else tuple(argnums)
        else:
            positions = tuple(range(len(args)))
        positions = tuple(p % len(args) if p < 0 else p for p in positions)
        if any(p >= len(args) for p in positions):
            raise NothingToDifferentiate(
                f"argnums {positions} is out of range of {len(args)} arguments"
            )
        has_aux = bool(opts.get("has_aux", False))
        names = _param_names(f, len(args))
        leaves: list[Any] = []
        labels: list[str] = []
        places: list[tuple[int, int]] = []
        consts: list[Any] = []
        const_labels: list[str] = []
        const_places: list[tuple[int, int]] = []
        flat_args = []
        for position, arg in enumerate(args):
            with_paths, treedef = jax.tree_util.tree_flatten_with_path(arg)
            flat_args.append(([leaf for _, leaf in with_paths], treedef))
            for index, (keys, leaf) in enumerate(with_paths):
                if position in positions and isinstance(leaf, float | complex):
                    # JAX differentiates a Python float (as a weakly typed scalar):
                    # `grad(f)(0.0)`; a Python int it refuses, left closed over here
                    leaf = jnp.asarray(leaf)
                dtype = getattr(leaf, "dtype", None)
                if dtype is None or not hasattr(leaf, "shape"):
                    continue  # a Python value: closed over, as JAX would see it
                name = names[position] + jax.tree_util.keystr(keys)
                if position in positions and jnp.issubdtype(dtype, jnp.inexact):
                    leaves.append(leaf)
                    labels.append(name)
                    places.append((position, index))
                else:
                    consts.append(leaf)
                    const_labels.append(name)
                    const_places.append((position, index))
        if not leaves:
            raise NothingToDifferentiate(
                "nothing to differentiate: the arguments differentiated hold no floating-point array"
            )
        fn_prefix = prefix.fn

        def fn(*xs: Any) -> Any:
            rebuilt = [list(flat) for flat, _ in flat_args]
            for (position, index), x in zip(places + const_places, xs, strict=True):
                rebuilt[position][index] = x
            call = [
                jax.tree_util.tree_unflatten(treedef, rebuilt[i])
                for i, (_, treedef) in enumerate(flat_args)
            ]
            out = fn_prefix(*call)
            return out[0] if has_aux else out

        linear = transform.name in ("jvp", "jacfwd", "linearize")
        return cls(fn, leaves, consts, labels + const_labels, prefix.label, linear)

    def structs(self, values: list[Any]) -> list[Any]:
        import jax

        return [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in values]


def one_example(after: list[Any], args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The arguments of one example of the ``vmap`` steps in ``after`` (the steps after
    the differentiation): index 0 along each mapped axis, the outermost step first.
    None where that cannot be said: another batching step, or an ``in_axes`` that is
    not an int or None per argument."""
    import jax

    from sandbox.engine.core.program import as_python

    if any(t.name in _BATCHING and t.name != "vmap" for t in after):
        return None
    for step in reversed([t for t in after if t.name == "vmap"]):
        in_axes = as_python(step.options.get("in_axes", 0))
        axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
        if len(axes) != len(args) or not all(a is None or isinstance(a, int) for a in axes):
            return None

        def first(leaf: Any, axis: int) -> Any:
            if not hasattr(leaf, "shape") or not leaf.shape:
                return leaf
            if isinstance(leaf, jax.ShapeDtypeStruct):
                shape = list(leaf.shape)
                del shape[axis]
                return jax.ShapeDtypeStruct(tuple(shape), leaf.dtype)
            return jax.numpy.take(leaf, 0, axis=axis)

        args = tuple(
            a if axis is None else jax.tree_util.tree_map(lambda x, ax=axis: first(x, ax), a)
            for a, axis in zip(args, axes, strict=True)
        )
    return args


def _param_names(f: Callable[..., Any], count: int) -> list[str]:
    try:
        params = [
            p.name
            for p in inspect.signature(f).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"args[{i}]" for i in range(count)]


# --- the two paths -------------------------------------------------------------------


def _path(
    path: str, maker: Callable[[_Target], tuple[Any, int, list[tuple[str, Any]]]], target: _Target
) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    from sandbox.engine.core.compat import direct_linearize

    default = direct_linearize() == (path == "direct")
    row: dict[str, Any] = {
        "path": path,
        "status": "ok",
        "default": default,
        "note": None,
        "residuals": [],
        "residual_bytes": 0,
    }
    if path == "direct" and direct_linearize() is None:
        row.update(status="unavailable", note="this JAX version has no direct linearization")
        return row, []
    try:
        forward, outs, stages = maker(target)
    except Exception as exc:  # this JAX cannot take this path for this function
        row.update(status="failed", note=f"{type(exc).__name__}: {exc}"[:MAX_MESSAGE_CHARS])
        return row, []
    residuals = residual_rows(forward, outs, target.labels)
    row["residuals"] = residuals[:MAX_RESIDUALS]
    row["residual_bytes"] = computed_bytes(residuals)
    if len(residuals) > MAX_RESIDUALS:
        row["note"] = f"{len(residuals) - MAX_RESIDUALS} more residuals not listed"
    return row, stages


def _direct(target: _Target) -> tuple[Any, int, list[tuple[str, Any]]]:
    import jax

    from sandbox.engine.core.compat import using_direct_linearize

    with using_direct_linearize(True):
        forward, n_out, vjp_tree, out_structs = _traced_vjp(target)
        residuals = _outputs(forward, n_out)
        # forward mode saves what jax.linearize saves: its forward pass is the one shown
        lin_forward, lin_n_out, lin_tree = _traced_linearize(target)
        lin_residuals = _outputs(lin_forward, lin_n_out)
        tangents = target.structs(target.primals)
        linear = jax.make_jaxpr(lambda res, *t: jax.tree_util.tree_unflatten(lin_tree, res)(*t))(
            lin_residuals, *tangents
        )
        transpose = jax.make_jaxpr(lambda res, ct: jax.tree_util.tree_unflatten(vjp_tree, res)(ct))(
            residuals, out_structs
        )
    if target.linear:
        return (
            lin_forward,
            lin_n_out,
            [("forward", lin_forward), ("linear", linear), ("transpose", transpose)],
        )
    return forward, n_out, [("forward", forward), ("linear", linear), ("transpose", transpose)]


def _traced_vjp(target: _Target) -> tuple[Any, int, Any, Any]:
    """``jax.vjp``'s forward pass traced: outputs then the VJP function's leaves."""
    import jax

    held: dict[str, Any] = {}
    n = len(target.primals)

    def forward(*xs: Any) -> Any:
        out, pullback = jax.vjp(target.bind(xs[n:]), *xs[:n])
        leaves, held["tree"] = jax.tree_util.tree_flatten(pullback)
        held["out"] = jax.tree_util.tree_map(lambda o: jax.ShapeDtypeStruct(o.shape, o.dtype), out)
        return out, leaves

    closed = jax.make_jaxpr(forward)(*target.primals, *target.consts)
    n_out = len(jax.tree_util.tree_leaves(held["out"]))
    return closed, n_out, held["tree"], held["out"]


def _traced_linearize(target: _Target) -> tuple[Any, int, Any]:
    import jax

    held: dict[str, Any] = {}
    n = len(target.primals)

    def forward(*xs: Any) -> Any:
        out, f_jvp = jax.linearize(target.bind(xs[n:]), *xs[:n])
        leaves, held["tree"] = jax.tree_util.tree_flatten(f_jvp)
        held["n_out"] = len(jax.tree_util.tree_leaves(out))
        return out, leaves

    closed = jax.make_jaxpr(forward)(*target.primals, *target.consts)
    return closed, held["n_out"], held["tree"]


def _outputs(closed: Any, skip: int) -> list[Any]:
    """The shapes and dtypes of a traced forward pass's outputs past the first ``skip``."""
    import jax

    return [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in closed.out_avals[skip:]]


def _classic(target: _Target) -> tuple[Any, int, list[tuple[str, Any]]]:
    import jax

    from sandbox.engine.core.compat import eval_jaxpr, partial_eval_jaxpr_nounits

    n = len(target.primals)
    tangents = target.structs(target.primals)
    jvp = jax.make_jaxpr(lambda p, t, c: jax.jvp(target.bind(c), p, t))(
        tuple(target.primals), tuple(tangents), tuple(target.consts)
    )
    n_out = len(jvp.out_avals) // 2
    known, unknown, _, res_avals = partial_eval_jaxpr_nounits(
        jvp,
        [False] * n + [True] * n + [False] * len(target.consts),
        [False] * n_out + [True] * n_out,
    )
    residuals = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in res_avals]
    cts = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in jvp.out_avals[n_out:]]

    def backward(res: list[Any], ct: list[Any]) -> Any:
        def linear(*t: Any) -> Any:
            return eval_jaxpr(unknown.jaxpr, unknown.consts, *res, *t)

        return jax.linear_transpose(linear, *tangents)(ct)

    transpose = jax.make_jaxpr(backward)(residuals, cts)
    stages = [("jvp", jvp), ("known", known), ("linear", unknown), ("transpose", transpose)]
    return known, n_out, stages


# --- residuals -----------------------------------------------------------------------


def residual_rows(closed: Any, n_out: int, inputs: list[str]) -> list[dict[str, Any]]:
    """Each residual of a forward pass (its outputs past the first ``n_out``): its
    shape, dtype, bytes, name in the printed jaxpr, what made it (a primitive, or
    ``input NAME``, ``inputs`` naming the forward pass's inputs) and the line."""
    jaxpr = closed.jaxpr
    made = {id(v): eqn for eqn in jaxpr.eqns for v in eqn.outvars}
    invars = {id(v): i for i, v in enumerate(jaxpr.invars)}
    constvars = {id(v) for v in jaxpr.constvars}
    names = _outvar_names(str(closed), len(jaxpr.outvars))
    rows = []
    for index, var in enumerate(jaxpr.outvars[n_out:], start=n_out):
        aval = var.aval
        line = None
        if id(var) in made:
            eqn = made[id(var)]
            source = eqn.primitive.name
            line = _line(eqn.source_info)
        elif id(var) in invars:
            i = invars[id(var)]
            source = f"input {inputs[i] if i < len(inputs) else i}"
        elif id(var) in constvars:
            source = "constant"
        else:
            source = "literal"
        shape = [int(d) for d in getattr(aval, "shape", ())]
        rows.append(
            {
                "name": names[index] if names else None,
                "shape": shape,
                "dtype": str(aval.dtype),
                "bytes": _nbytes(shape, aval.dtype),
                "line": line,
                "source": source,
            }
        )
    return rows


def _line(info: Any) -> int | None:
    """An equation's line in the user's code: JAX's ``user_frames`` takes its traceback
    from 0.7, its SourceInfo before."""
    for candidate in (getattr(info, "traceback", None), info):
        try:
            return snippet_line(candidate)
        except AttributeError:
            continue
    return None


def computed_bytes(rows: list[dict[str, Any]]) -> int:
    """The bytes of the residuals the forward pass computes: the inputs and constants
    it saves are listed, not counted (the caller holds them anyway)."""
    return sum(
        r["bytes"] for r in rows if not r["source"].startswith(("input ", "constant", "literal"))
    )


def _nbytes(shape: list[int], dtype: Any) -> int:
    try:
        itemsize = int(dtype.itemsize)
    except (AttributeError, TypeError):  # an extended dtype (a PRNG key): not counted
        return 0
    return math.prod(shape) * itemsize


_OUT_LIST = re.compile(r"\n\s*in \(?(.*?)\)?\s*\}\s*$", re.S)


def _outvar_names(text: str, count: int) -> list[str] | None:
    """The printed names of a jaxpr's outputs (its last ``in (...)``), where they parse."""
    match = _OUT_LIST.search(text)
    if not match:
        return None
    names = [n.strip() for n in match.group(1).replace("\n", " ").split(",") if n.strip()]
    return names if len(names) == count else None


# --- stages --------------------------------------------------------------------------


def _stage_events(stages: list[tuple[str, str, Any]]) -> list[dict[str, Any]]:
    """Each stage's text and source map, within the event's budgets: each text a share
    of MAX_AUTODIFF_CHARS (cut at a line's end, saying so), each map a share of
    MAX_AUTODIFF_SOURCES."""
    stages = stages[:MAX_AUTODIFF_STAGES]
    chars = MAX_AUTODIFF_CHARS // max(1, len(stages))
    per_map = MAX_AUTODIFF_SOURCES // max(1, len(stages))
    out = []
    for path, name, closed in stages:
        text = str(closed)
        try:
            sources = jaxpr_sources(closed, text)
        except Exception:  # the text is exact without its map
            sources = []
        if len(text) > chars:
            cut = text.rfind("\n", 0, chars - 200) + 1
            shown = text[:cut].count("\n")
            text = text[:cut] + f"… ({len(text) - cut} more characters not shown)\n"
            sources = [s for s in sources if s["out_line"] <= shown]
        out.append(
            {
                "path": path,
                "stage": name,
                "title": _STAGE_TITLES[(path, name)],
                "text": text,
                "sources": sources[:per_map],
            }
        )
    return out


# --- checkpoint policies ---------------------------------------------------------------


def _policies(
    f: Callable[..., Any],
    entry: str,
    transforms: list[Any],
    step: int,
    at: int,
    ns: dict[str, Any],
    args: tuple[Any, ...],
    mesh: Any,
) -> list[dict[str, Any]]:
    """JAX's default path's residuals with the checkpoint step at ``at`` under each
    policy; the pipeline's own policy is marked ``current``."""
    import jax

    from sandbox.protocol.requests import Transform

    own = transforms[at].options.get("policy")
    known = set(dir(jax.checkpoint_policies))
    names = [p for p in POLICIES if p in known]
    if own is not None and own not in names:
        names.append(own)
    rows = []
    for name in names:
        options = {**transforms[at].options, "policy": name}
        swapped = [*transforms[:at], Transform(name="checkpoint", **options), *transforms[at + 1 :]]
        row: dict[str, Any] = {
            "policy": name,
            "current": name == own,
            "residuals": 0,
            "residual_bytes": 0,
            "flops_backward": None,
            "flops_recomputed": None,
            "note": None,
        }
        try:
            target = _Target.build(f, entry, swapped, step, ns, args, mesh)
            forward, n_out, tree, out_structs = _traced_vjp(target)
            residuals = residual_rows(forward, n_out, target.labels)
            row["residuals"] = len(residuals)
            row["residual_bytes"] = computed_bytes(residuals)
            row["flops_backward"] = _backward_flops(tree, _outputs(forward, n_out), out_structs)
        except Exception as exc:
            row["note"] = f"{type(exc).__name__}: {exc}"[:256]
        rows.append(row)
    everything = next((r for r in rows if r["policy"] == "everything_saveable"), None)
    base = everything["flops_backward"] if everything else None
    for row in rows:
        if base is not None and row["flops_backward"] is not None:
            row["flops_recomputed"] = max(0.0, row["flops_backward"] - base)
    return rows


def _backward_flops(tree: Any, residuals: list[Any], out_structs: Any) -> float | None:
    import jax

    from sandbox.engine.core.compat import cost_analysis

    lowered = jax.jit(lambda res, ct: jax.tree_util.tree_unflatten(tree, res)(ct)).lower(
        residuals, out_structs
    )
    try:
        cost = cost_analysis(lowered)
    except Exception:  # a Lowered without cost analysis: the compiled module's
        cost = cost_analysis(lowered.compile())
    counted = [cost.get("flops"), cost.get("transcendentals")]
    if counted[0] is None:
        return None
    total = float(sum(c for c in counted if c is not None))
    return total if math.isfinite(total) else None


def autodiff_events(r: Results) -> dict[str, Any]:
    pipeline = r.pipeline
    run = pipeline.run
    return autodiff_event(
        run.entry, run.request.entry, pipeline.transforms, run.namespace, run.args, run.mesh
    )


OUTPUT = Output("traced", "showing how JAX differentiates", autodiff_events)
