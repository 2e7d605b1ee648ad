"""Why ``jit`` changes the result: the program compiled whole against its equations
bound one by one (eager), each against the float64 shadow; where they differ, the
first equation whose compiled value differs, and which XLA option names the cause.

The first differing equation is found by compiling the program *cut* after an
equation, with that equation's outputs as the cut program's outputs, and bisecting
over the cut point: returning every intermediate from one compile would change the
compiled program (a product that is an output is not fused into a multiply-add), so
each cut is the real program up to there. The cause is measured, never written in
(XLA's rewrites change between versions): the whole program recompiled with one
option switched (``OPTIONS``), and the cut program with an ``optimization_barrier``
before the first differing equation (its operands computed apart, as eager computes
them: a contraction into a fused multiply-add then goes away).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sandbox.engine.core import jaxpr_walk as walk
from sandbox.engine.outputs.numerics import metrics

#: the XLA options switched one at a time, and the cause each names where switching it
#: makes the compiled program give the eager value
OPTIONS: tuple[tuple[str, Any, str], ...] = (
    (
        "xla_backend_optimization_level",
        0,
        "LLVM's optimisations at level 3 (contraction into a fused multiply-add)",
    ),
    ("xla_disable_hlo_passes", "algsimp", "an algebraic simplification of XLA's (algsimp)"),
    (
        "xla_allow_excess_precision",
        False,
        "excess precision (XLA computed a narrow dtype in a wider one)",
    ),
)
BARRIER_CAUSE = (
    "the equation fused with the ones that make its operands: computed apart (an "
    "optimization_barrier before it) it gives the eager value. On the CPU this is a "
    "multiply and an add contracted into a fused multiply-add (one rounding, not two)"
)
#: at most this many cut compiles (the bisection: log2 of the equations)
MAX_CUTS = 24


def same(a: Any, b: Any) -> bool:
    """Bit for bit the same values (NaNs equal)."""
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    if x.dtype.kind not in "biuc":  # floats (bfloat16 and float8 too): NaNs compare equal
        return bool(np.array_equal(x.astype(np.float64), y.astype(np.float64), equal_nan=True))
    return bool(np.array_equal(x, y))


@dataclass
class Body:
    """The straight-line jaxpr bisected: the pipeline's, or the one jit call it is."""

    jaxpr: Any
    consts: list[Any]
    args: list[Any]
    #: the place of its equations among the rows' (``0.`` inside a top-level jit)
    prefix: str


def body_of(closed: Any, args: list[Any]) -> Body:
    jaxpr, consts = walk.parts(closed)
    prefix = ""
    while len(jaxpr.eqns) == 1 and walk.call_jaxpr(jaxpr.eqns[0]) is not None:
        eqn = jaxpr.eqns[0]
        if list(eqn.outvars) != list(jaxpr.outvars) or eqn.primitive.name.startswith("custom"):
            break
        env = dict(zip(jaxpr.invars, args, strict=True)) | dict(
            zip(jaxpr.constvars, consts, strict=True)
        )
        args = [
            np.asarray(v.val, v.aval.dtype) if isinstance(v, walk.literal_type()) else env[v]
            for v in eqn.invars
        ]
        jaxpr, consts = walk.parts(walk.call_jaxpr(eqn))
        prefix += "0."
    return Body(jaxpr, consts, args, prefix)


def _run(
    jaxpr: Any, consts: list[Any], args: list[Any], upto: int, barrier: bool, eager: bool
) -> list[Any]:
    """The outputs of equation ``upto - 1`` of ``jaxpr``, its equations bound in order
    (traced under jit, or eager: calls stepped into, each primitive bound alone)."""
    from jax import lax

    env: dict[Any, Any] = dict(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))

    def read(atom: Any) -> Any:
        if isinstance(atom, walk.literal_type()):
            return np.asarray(atom.val, atom.aval.dtype)
        return env[atom]

    outs: list[Any] = []
    for index, eqn in enumerate(jaxpr.eqns[:upto]):
        values = [read(v) for v in eqn.invars]
        if barrier and index == upto - 1:
            values = list(lax.optimization_barrier(tuple(values)))
        sub = walk.call_jaxpr(eqn) if eager else None
        if sub is not None and not eqn.primitive.name.startswith("custom_vjp"):
            inner, inner_consts = walk.parts(sub)
            outs = _outvars(inner, inner_consts, values)
        else:
            outs = walk.bind(eqn, values, host_as_jax=True)
        env.update(zip(eqn.outvars, outs, strict=True))
    return outs


def _outvars(jaxpr: Any, consts: list[Any], args: list[Any]) -> list[Any]:
    """A jaxpr's outputs, its equations bound one by one (calls stepped into)."""
    env: dict[Any, Any] = dict(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    for eqn in jaxpr.eqns:
        values = [
            np.asarray(v.val, v.aval.dtype) if isinstance(v, walk.literal_type()) else env[v]
            for v in eqn.invars
        ]
        sub = walk.call_jaxpr(eqn)
        if sub is not None and not eqn.primitive.name.startswith("custom_vjp"):
            inner, inner_consts = walk.parts(sub)
            outs = _outvars(inner, inner_consts, values)
        else:
            outs = walk.bind(eqn, values, host_as_jax=True)
        env.update(zip(eqn.outvars, outs, strict=True))
    return [
        np.asarray(v.val, v.aval.dtype) if isinstance(v, walk.literal_type()) else env[v]
        for v in jaxpr.outvars
    ]


class Compiler:
    """Compiles cuts of one body, with the run's XLA options (and one switched)."""

    def __init__(self, body: Body, options: dict[str, Any]) -> None:
        self.body, self.options = body, dict(options)
        self.compiles = 0

    def compiled(
        self, upto: int, *, barrier: bool = False, option: tuple[str, Any] | None = None
    ) -> list[Any]:
        import jax

        from sandbox.engine.core.xla_dump import compile_with

        body = self.body

        def cut(*args: Any) -> list[Any]:
            return _run(body.jaxpr, body.consts, list(args), upto, barrier, eager=False)

        options = dict(self.options)
        if option is not None:
            options[option[0]] = option[1]
        lowered = jax.jit(cut).lower(*body.args)
        executable = compile_with(lowered, options) if options else lowered.compile()
        self.compiles += 1
        return list(executable(*body.args))

    def eager(self, upto: int) -> list[Any]:
        return _run(self.body.jaxpr, self.body.consts, self.body.args, upto, False, eager=True)

    def whole(self, *, option: tuple[str, Any] | None = None) -> list[Any]:
        """The body compiled whole, its outputs (as the jaxpr's outvars)."""
        import jax

        from sandbox.engine.core.xla_dump import compile_with

        body = self.body
        jaxpr = body.jaxpr

        def whole(*args: Any) -> list[Any]:
            return _whole(jaxpr, body.consts, list(args))

        options = dict(self.options)
        if option is not None:
            options[option[0]] = option[1]
        lowered = jax.jit(whole).lower(*body.args)
        executable = compile_with(lowered, options) if options else lowered.compile()
        self.compiles += 1
        return list(executable(*body.args))


def _whole(jaxpr: Any, consts: list[Any], args: list[Any]) -> list[Any]:
    import jax

    return list(jax.core.eval_jaxpr(jaxpr, consts, *args))


def first_difference(compiler: Compiler, differing: list[Any]) -> tuple[int | None, int]:
    """The first equation (index in the body) whose compiled value differs from the
    eager one, bisecting over cut points up to the first equation that makes one of
    the ``differing`` outputs; and the cut programs compiled."""
    eqns = compiler.body.jaxpr.eqns
    makers = [n for n, eqn in enumerate(eqns) if any(v in differing for v in eqn.outvars)]
    if not makers:
        return None, compiler.compiles
    n = min(makers) + 1

    def differs(k: int) -> bool:
        eqn = compiler.body.jaxpr.eqns[k - 1]
        if not any(metrics.inexact(v.aval.dtype) for v in eqn.outvars):
            return False
        got, want = compiler.compiled(k), compiler.eager(k)
        return not all(same(a, b) for a, b in zip(got, want, strict=True))

    lo, hi = 0, n  # differs(lo) is false (nothing computed); differs(hi) is tested
    if n == 0 or not differs(hi):
        return None, compiler.compiles
    while hi - lo > 1 and compiler.compiles < MAX_CUTS:
        mid = (lo + hi) // 2
        if differs(mid):
            hi = mid
        else:
            lo = mid
    return hi - 1, compiler.compiles


def compare(
    closed: Any,
    args: list[Any],
    eager_pairs: list[Any],
    options: dict[str, Any],
    row_of: dict[str, int],
    jitted: list[Any] | None = None,
) -> dict[str, Any]:
    """The event's ``jit``: ``eager_pairs`` the shadow's outputs (the program's op by
    op values and float64's), ``row_of`` each equation's row by its place; ``jitted``
    the compiled program's outputs when the run has them (its pipeline ends in jit:
    not compiled again)."""
    body = body_of(closed, args)
    compiler = Compiler(body, options)
    if jitted is None:
        jitted = compiler.whole()
    eager = [p.low for p in eager_pairs]
    differs = not all(same(a, b) for a, b in zip(jitted, eager, strict=True))
    result: dict[str, Any] = {
        "differs": differs,
        "closer": "same",
        "compiles": 0,
        "options": [],
        "cause": None,
    }
    if not differs:
        return result
    jit_err = eager_err = 0.0
    for value, pair, var in zip(jitted, eager_pairs, body.jaxpr.outvars, strict=True):
        if metrics.inexact(var.aval.dtype):
            a = metrics.errors(value, pair.high, var.aval.dtype)
            b = metrics.errors(pair.low, pair.high, var.aval.dtype)
            jit_err = max(jit_err, a.max if a else 0.0)
            eager_err = max(eager_err, b.max if b else 0.0)
    if jit_err != eager_err:
        result["closer"] = "jit" if jit_err < eager_err else "eager"
    differing = [
        var
        for value, pair, var in zip(jitted, eager_pairs, body.jaxpr.outvars, strict=True)
        if not same(value, pair.low)
    ]
    first, cuts = first_difference(compiler, differing)
    result["compiles"] = cuts
    if first is not None:
        place = f"{body.prefix}{first}"
        eqn = body.jaxpr.eqns[first]
        result.update(
            first_eqn=place,
            first_row=row_of.get(place),
            primitive=eqn.primitive.name,
            line=walk.line(eqn.source_info),
        )
    for name, value, cause in OPTIONS:
        entry: dict[str, Any] = {
            "option": name,
            "value": str(value),
            "removes": None,
            "error": None,
        }
        try:
            got = compiler.whole(option=(name, value))
            entry["removes"] = all(same(a, b) for a, b in zip(got, eager, strict=True))
        except Exception as exc:  # an option this XLA does not know: said
            entry["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        result["options"].append(entry)
        if entry["removes"] and result["cause"] is None:
            result["cause"] = f"{cause}: recompiled with {name}={value}, jit gives the eager value"
    if first is not None:
        entry = {
            "option": "optimization_barrier",
            "value": f"before equation {body.prefix}{first}",
            "removes": None,
            "error": None,
        }
        try:
            got = compiler.compiled(first + 1, barrier=True)
            entry["removes"] = all(
                same(a, b) for a, b in zip(got, compiler.eager(first + 1), strict=True)
            )
        except Exception as exc:
            entry["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        result["options"].append(entry)
        if entry["removes"] and result["cause"] is None:
            result["cause"] = BARRIER_CAUSE
    if result["cause"] is None:
        result["cause"] = (
            "not named: no option tried makes the compiled program give the eager value"
        )
    return result
