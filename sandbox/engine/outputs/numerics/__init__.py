"""The ``numerics`` output: where the digits go. The pipeline's jaxpr evaluated
equation by equation against a float64 shadow (shadow.py): per equation the error of
its outputs and the error it adds itself (``born``), at the user's line, with the
usual cure where one applies (hints.py); per output of the pipeline, the error of the
value the run computed (compiled, as it ran) and of the same program op by op.

Opt-in: the shadow binds every equation three times (the program's, the shadow's,
the born error's) and holds a float64 copy of every value, so a program past the
request's ``numerics_max_values`` (the operator caps it: the server setting of the
same name) is refused with a message, before anything is evaluated.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from sandbox.engine.core import jaxpr_walk as walk
from sandbox.engine.core.output import Output, Results
from sandbox.engine.outputs.numerics import hints, jit_compare, metrics, precision
from sandbox.engine.outputs.numerics.shadow import Pair, Row, Shadow
from sandbox.protocol.limits import MAX_MESSAGE_CHARS, MAX_NUMERICS_ROWS, MAX_NUMERICS_STEPS


def program_values(jaxpr: Any) -> int:
    """How many values the shadow would hold: every equation's outputs' elements,
    through calls and bodies (a scan's body once per iteration; a while's once: its
    iterations are not known before it runs)."""
    total = 0
    for eqn in jaxpr.eqns:
        for var in eqn.outvars:
            total += int(np.prod(getattr(var.aval, "shape", ()), dtype=np.int64))
        times = int(eqn.params.get("length", 1)) if eqn.primitive.name == "scan" else 1
        for value in eqn.params.values():
            for item in value if isinstance(value, tuple | list) else (value,):
                inner = getattr(item, "jaxpr", item)
                if hasattr(inner, "eqns") and hasattr(inner, "outvars"):
                    total += times * program_values(inner)
    return total


def row_event(row: Row) -> dict[str, Any]:
    return {
        "eqn": row.eqn,
        "primitive": row.primitive,
        "depth": row.depth,
        "line": row.line,
        "phase": row.phase,
        "iterations": row.iterations,
        "dtype": row.dtype,
        "shape": row.shape[:64],
        "error": row.error.as_event() if row.error else None,
        "born": row.born.as_event() if row.born else None,
        "shadowed": row.shadowed,
        "unshadowed": row.unshadowed,
        "diverged": row.diverged,
        "hint": {"kind": row.hint[0], "text": row.hint[1]} if row.hint else None,
    }


def lines_event(rows: list[Row]) -> list[dict[str, Any]]:
    """Per source line: the most ulps born there and the largest error there (the
    editor's band)."""
    by_line: dict[int, dict[str, Any]] = {}
    for row in rows:
        if row.line is None or row.born is None:
            continue
        got = by_line.setdefault(
            row.line, {"line": row.line, "born_ulp": 0.0, "error": 0.0, "hint": None}
        )
        got["born_ulp"] = max(got["born_ulp"], row.born.max_ulp)
        got["error"] = max(got["error"], row.error.max if row.error else 0.0)
        got["hint"] = got["hint"] or (row.hint[0] if row.hint else None)
    return [
        {**v, "born_ulp": metrics.measure(v["born_ulp"]), "error": metrics.measure(v["error"])}
        for _, v in sorted(by_line.items())
    ]


def outputs_event(value: Any, shadowed: list[Pair] | None) -> list[dict[str, Any]]:
    """Per output leaf: the run's value (as it ran) and the program evaluated op by
    op (the rows' own), each against the shadow."""
    import jax

    leaves = jax.tree_util.tree_flatten_with_path(value)[0] if value is not None else []
    out = []
    for k, (path, leaf) in enumerate(leaves[:256]):
        dtype = getattr(leaf, "dtype", np.asarray(leaf).dtype)
        entry: dict[str, Any] = {
            "path": jax.tree_util.keystr(path) or "",
            "dtype": str(dtype),
            "shape": list(np.shape(leaf))[:64],
            "run": None,
            "eager": None,
        }
        if shadowed is not None and k < len(shadowed) and metrics.inexact(dtype):
            pair = shadowed[k]
            if np.shape(pair.high) == np.shape(leaf):
                ran = metrics.errors(leaf, pair.high, dtype)
                eager = metrics.errors(pair.low, pair.high, dtype)
                entry["run"] = ran.as_event() if ran else None
                entry["eager"] = eager.as_event() if eager else None
        out.append(entry)
    return out


def numerics_event(
    closed: Any,
    args: list[Any],
    value: Any,
    *,
    max_values: int,
    options: dict[str, Any] | None = None,
    jit: bool = True,
    settings: list[str] | None = None,
    rerun: tuple[Callable[..., Any], tuple[Any, ...]] | None = None,
    jitted: bool = False,
) -> dict[str, Any]:
    """The event of ``closed`` shadowed on ``args`` (the pipeline's argument leaves),
    ``value`` the pipeline's value as the run computed it; with ``jit``, the program
    compiled whole (with the run's XLA ``options``) against its equations one by one;
    ``settings``, the precision settings run again (``rerun``: the pipeline and its
    arguments, for those that trace it again); ``jitted``: ``value`` is the program
    compiled whole with those options (the pipeline ends in jit), not compiled again."""
    import jax

    jaxpr, _ = walk.parts(closed)
    event: dict[str, Any] = {
        "type": "numerics",
        "backend": jax.default_backend(),
        "rows": [],
        "lines": [],
        "outputs": [],
        "worst_born": None,
        "cut": None,
        "refused": None,
        "shadow_ms": 0.0,
        "jit": None,
        "precision": [],
        "precision_note": None,
        "notes": [],
    }
    size = program_values(jaxpr)
    if size > max_values:
        event["refused"] = (
            f"the numerics lens holds a float64 shadow of every value the program makes: "
            f"this one makes {size:,} values, over the {max_values:,} this server allows "
            "(numerics_max_values); try it on smaller arguments"
        )
        return event
    try:
        jax.devices("cpu")
    except RuntimeError:  # jax_platforms names the accelerator alone
        event["refused"] = (
            "the numerics lens computes its float64 shadow on the CPU, which this run "
            f"did not start (jax_platforms is {jax.config.jax_platforms!r}): run it with "
            'backend "auto" to have the accelerator and the CPU side by side'
        )
        return event
    start = time.perf_counter()
    shadow = Shadow(max_steps=MAX_NUMERICS_STEPS, max_rows=MAX_NUMERICS_ROWS, hint=hints.hint)
    pairs = shadow.run(closed, args)
    event["shadow_ms"] = round((time.perf_counter() - start) * 1000, 3)
    rows = shadow.rows
    event["rows"] = [row_event(r) for r in rows]
    event["lines"] = lines_event(rows)
    event["outputs"] = outputs_event(value, pairs)
    born = [(r.born.max_ulp, n) for n, r in enumerate(rows) if r.born is not None]
    if born:
        top, at = max(born, key=lambda b: (b[0], -b[1]))
        # a row adding less than an ulp only rounds: no row is named then
        event["worst_born"] = at if top >= 1 else None
    event["cut"] = shadow.cut
    notes = list(shadow.notes)
    if pairs is not None and jit:
        row_of = {r.eqn: n for n, r in enumerate(rows)}
        try:
            ran = jax.tree_util.tree_leaves(value) if jitted and value is not None else None
            event["jit"] = jit_compare.compare(closed, args, pairs, options or {}, row_of, ran)
        except Exception as exc:  # the program would not compile cut or whole: said
            notes.append(f"the jit comparison stopped: {type(exc).__name__}: {str(exc)[:300]}")
    if pairs is not None and settings and rerun is not None:
        dtypes = [v.aval.dtype for v in jaxpr.outvars]
        event["precision"] = precision.settings_event(
            settings,
            rerun[0],
            closed,
            rerun[1],
            args,
            [p.high for p in pairs],
            dtypes,
            shadow.values,
        )
        event["precision_note"] = precision.BACKEND_DEFAULTS.get(jax.default_backend())
    event["notes"] = [n[:MAX_MESSAGE_CHARS] for n in notes[:8]]
    return event


def numerics_results(results: Results) -> dict[str, Any]:
    import jax

    pipe, args = results.pipeline.pipe, results.pipeline.run.args
    closed = results.closed
    if closed is None:
        closed = jax.make_jaxpr(pipe.fn, static_argnums=pipe.static_argnums)(*args)
    request = results.pipeline.run.request
    leaves = jax.tree_util.tree_leaves(pipe.dynamic_args(args))
    return numerics_event(
        closed,
        leaves,
        results.value,
        max_values=request.numerics_max_values,
        options=dict(request.compiler_options_for(results.pipeline.name)),
        settings=list(request.numerics_precision),
        rerun=(pipe.fn, args),
        # the run's value is the compiled program's own: jit's last, no config of the
        # request's (run.py then calls the executable it compiled, with these options)
        jitted=pipe.transforms[-1:] == ["jit"] and not request.config and results.value is not None,
    )


OUTPUT = Output("executed", "shadowing the jaxpr in float64", numerics_results, concrete=True)
