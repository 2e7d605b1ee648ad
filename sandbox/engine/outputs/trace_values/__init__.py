"""The ``trace_values`` output: the run's jaxpr stepped one equation at a time on the
run's own arguments, each equation's outputs described (shape, dtype, min, max, mean,
NaN and Inf counts) at the user's line that made it, and the first NaN and Inf found.

An interpreter over the jaxpr, as ``jax.core.eval_jaxpr``: each equation is
``primitive.bind(*inputs, **params)``, except that the equations holding a jaxpr are
stepped into (``jit``, calls, ``checkpoint``, ``custom_jvp``/``custom_vjp``, the taken
branch of ``cond``, and every iteration of ``scan`` and ``while``). How a jaxpr's
equations are evaluated is sandbox/engine/outputs/trace_values/segments.py's: in chunks of at most
``COMPILED_SEGMENT_MAX`` equations, each compiled whole (every equation's outputs its
outputs) or bound an equation at a time through compiles shared by every jaxpr
walked, whichever compiles less; a loop or a ``cond`` is not compiled with them: its
outputs are those of its body as stepped (the last carry, the ys stacked). A differentiated
pipeline's jaxpr is the whole computation, backward pass included: JAX names the
transposed equations' name stacks ``transpose(...)`` (the backward pass) and the
others of a differentiation ``jvp(...)`` (the forward pass); an equation with
neither has no ``phase``.

A loop of at most ``ITERATIONS_SHOWN`` iterations has a row per iteration of each
equation of its body; a longer one a row per equation summarising every iteration
(min of the minima, max of the maxima, mean of the means, counts summed). What it
costs is bounded by sandbox/protocol/limits.py: rows kept, values described, bytes
and equations evaluated; the event says where it stopped (``cut``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sandbox.engine.core import jaxpr_walk as walk
from sandbox.engine.core.output import Output, Results
from sandbox.engine.outputs.trace_values import segments
from sandbox.protocol.limits import (
    MAX_MESSAGE_CHARS,
    MAX_TRACE_BYTES,
    MAX_TRACE_ROW_VALUES,
    MAX_TRACE_ROWS,
    MAX_TRACE_STEPS,
    MAX_TRACE_VALUES,
)

#: A loop of at most this many iterations shows each; a longer one is summarised.
ITERATIONS_SHOWN = 8


class _Cut(Exception):
    def __init__(self, reason: str, note: str) -> None:
        super().__init__(note)
        self.reason, self.note = reason, note


@dataclass(eq=False)
class _Row:
    eqn: str
    primitive: str
    depth: int
    line: int | None
    phase: str | None
    outputs: list[dict[str, Any]]
    outputs_total: int
    inputs: list[_Row | None]
    made: list[str]
    iteration: int | None = None
    iterations: int | None = None
    #: the row a summarised loop folded this one into
    folded_into: _Row | None = None

    def resolved(self) -> _Row:
        row = self
        while row.folded_into is not None:
            row = row.folded_into
        return row


@dataclass
class _Value:
    value: Any
    row: _Row | None
    nan: bool
    inf: bool


@dataclass
class _Loop:
    """The rows of one loop's iterations: kept per iteration while there are at most
    ITERATIONS_SHOWN, folded into one row per body equation past that."""

    stepper: Stepper
    shown: list[list[_Row]] = field(default_factory=list)
    summary: dict[tuple[str, int | None], _Row] | None = None
    count: int = 0

    def add(self, rows: list[_Row]) -> None:
        self.count += 1
        if self.summary is None and self.count <= ITERATIONS_SHOWN:
            self.shown.append(rows)
            return
        if self.summary is None:
            self.summary = {}
            for earlier in self.shown:
                self._fold(earlier)
            self.shown = []
        self._fold(rows)

    def _fold(self, rows: list[_Row]) -> None:
        assert self.summary is not None
        for row in rows:
            key = (row.eqn, row.iteration if row.iterations is None else None)
            into = self.summary.get(key)
            if into is None:
                self.summary[key] = row
                row.iterations = row.iterations or 1
                row.iteration = None
                continue
            row.folded_into = into
            into.iterations = (into.iterations or 1) + (row.iterations or 1)
            into.made = sorted(set(into.made) | set(row.made))
            into.outputs = [
                _merge(a, b, into.iterations)
                for a, b in zip(into.outputs, row.outputs, strict=False)
            ]
            self.stepper.live -= 1

    def rows(self) -> list[_Row]:
        if self.summary is not None:
            return list(self.summary.values())
        for n, rows in enumerate(self.shown):
            for row in rows:  # a nested loop's rows keep their own loop's iteration
                if row.iteration is None and row.iterations is None:
                    row.iteration = n
        return [row for rows in self.shown for row in rows]


def _merge(a: dict[str, Any], b: dict[str, Any], n: int) -> dict[str, Any]:
    """``a`` (the summary of n - 1 iterations) with one more iteration's ``b``."""
    out = dict(a)
    for key, pick in (("min", min), ("max", max)):
        if b.get(key) is not None:
            out[key] = b[key] if a.get(key) is None else pick(a[key], b[key])
    if b.get("mean") is not None:
        # a mean of per-iteration means: each iteration weighs the same
        out["mean"] = (
            b["mean"] if a.get("mean") is None else a["mean"] + (b["mean"] - a["mean"]) / n
        )
    for key in ("nan_count", "inf_count"):
        if b.get(key) is not None:
            out[key] = (a.get(key) or 0) + b[key]
    return out


#: whether a dtype has no numbers to describe (PRNG keys, float0), per dtype
_NO_NUMBERS: dict[Any, bool] = {}


def _no_numbers(dtype: Any) -> bool:
    import jax

    try:
        return _NO_NUMBERS[dtype]
    except (KeyError, TypeError):
        none = bool(
            jax.dtypes.issubdtype(dtype, jax.dtypes.extended) or getattr(dtype, "itemsize", 1) == 0
        )
        with contextlib.suppress(TypeError):  # a dtype with no hash: asked each time
            _NO_NUMBERS[dtype] = none
        return none


def stats(value: Any) -> dict[str, Any]:
    """Shape, dtype and, where they mean something, min/max/mean over the finite
    elements and NaN/Inf counts (inexact dtypes only; a complex value by magnitude)."""
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        value = np.asarray(value)
        dtype = value.dtype
    described: dict[str, Any] = {"shape": list(np.shape(value)), "dtype": str(dtype)}
    if _no_numbers(dtype):
        return described  # PRNG keys, float0: no numbers to describe
    data = np.asarray(value)
    if data.dtype.kind not in "biufc":  # bfloat16, float8...: numpy's float32 holds them
        data = data.astype(np.float32)
    inexact = data.dtype.kind in "fc"
    if data.dtype.kind == "c":
        data = np.abs(data)
    elif data.dtype.kind == "b":
        data = data.astype(np.int8)
    finite = data
    if inexact:
        ok = np.isfinite(data)
        if ok.all():
            described["nan_count"] = described["inf_count"] = 0
        else:
            nan = int(np.count_nonzero(np.isnan(data)))
            described["nan_count"] = nan
            described["inf_count"] = int(data.size - np.count_nonzero(ok)) - nan
            finite = data[ok]
    if finite.size:
        described["min"] = float(finite.min())
        described["max"] = float(finite.max())
        described["mean"] = float(finite.mean(dtype=np.float64))
    return described


def _flags(value: Any) -> tuple[bool, bool]:
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return (isinstance(value, float) and math.isnan(value)), (
            isinstance(value, float) and math.isinf(value)
        )
    if getattr(dtype, "kind", "") not in "fcV" or getattr(dtype, "itemsize", 1) == 0:
        return False, False
    try:
        data = np.asarray(value)
        if data.dtype.kind not in "fc":
            data = data.astype(np.float32)
        return bool(np.isnan(data).any()), bool(np.isinf(data).any())
    except Exception:  # an extended dtype: no numbers
        return False, False


def _aval_bytes(var: Any) -> int:
    aval = getattr(var, "aval", None)
    shape = getattr(aval, "shape", ())
    itemsize = getattr(getattr(aval, "dtype", None), "itemsize", 4) or 1
    return int(np.prod(shape, dtype=np.int64)) * int(itemsize)


@dataclass
class _Where:
    path: str
    depth: int
    name_stack: str


def _eqn_cost(eqn: Any) -> int:
    return sum(_aval_bytes(v) for v in eqn.outvars)


class Stepper:
    """Steps one jaxpr; ``rows`` is what it recorded, ``cut`` why it stopped early."""

    def __init__(
        self,
        *,
        max_rows: int = MAX_TRACE_ROWS,
        max_bytes: int = MAX_TRACE_BYTES,
        max_steps: int = MAX_TRACE_STEPS,
    ) -> None:
        self.max_rows, self.max_bytes, self.max_steps = max_rows, max_bytes, max_steps
        self.rows: list[_Row] = []
        self.sink = self.rows
        self.live = 0
        self.bytes = 0
        self.steps = 0
        self.cut: str | None = None
        self.notes: list[str] = []
        #: each jaxpr walked, flattened, and its plan when it fits whole (the jaxpr
        #: kept alive with them)
        self._flat: dict[int, tuple[Any, segments.Flat]] = {}
        self._plans: dict[int, tuple[Any, segments.Plan]] = {}
        #: the equations compiled alone, shared by every jaxpr walked
        self._ops = segments.Ops(walk.bind)
        #: a while loop's condition, compiled once per loop
        self._tests: dict[int, tuple[Any, Any]] = {}
        #: each equation's name stack, line and output bytes (a loop's body is stepped
        #: again each iteration: read once), the equation kept alive with them
        self._facts: dict[int, tuple[Any, str, int | None, int]] = {}

    # --- running -------------------------------------------------------------------

    def run(self, closed: Any, args: list[Any]) -> None:
        inner, consts = walk.parts(closed)
        try:
            self._eval(
                inner, consts, [_Value(a, None, *_flags(a)) for a in args], _Where("", 0, "")
            )
        except _Cut as cut:
            self.cut = cut.reason
            self.notes.append(cut.note[:MAX_MESSAGE_CHARS])

    @contextlib.contextmanager
    def _collecting(self) -> Iterator[list[_Row]]:
        outer, self.sink = self.sink, []
        try:
            yield self.sink
        finally:
            self.sink = outer

    def _flattened(self, jaxpr: Any) -> segments.Flat:
        if id(jaxpr) not in self._flat:
            flat = segments.flatten(
                jaxpr, walk.call_jaxpr, walk.parts, walk.literal_type(), _eqn_cost
            )
            self._flat[id(jaxpr)] = (jaxpr, flat)
        return self._flat[id(jaxpr)][1]

    def _feed(
        self, jaxpr: Any, consts: list[Any], args: list[Any], where: _Where
    ) -> Iterator[list[Any] | segments.Pending]:
        """Each walked equation's outputs (sandbox/engine/outputs/trace_values/segments.py), within
        the budget left (a prefix of the equations where it is not enough)."""
        flat = self._flattened(jaxpr)
        left = [self.max_bytes - self.bytes, self.max_steps - self.steps]
        # nothing past the rows the event can still take (each walked equation is a
        # row; one more, so that the row budget is the one said to cut)
        left[1] = min(left[1], self.max_rows - self.live + 1)
        count, cut = segments.prefix(flat, left[0], left[1])
        if cut is not None:
            plan = segments.plan(flat, count, cut, self._ops)
        else:
            if id(jaxpr) not in self._plans:
                self._plans[id(jaxpr)] = (jaxpr, segments.plan(flat, count, None, self._ops))
            plan = self._plans[id(jaxpr)][1]
        outs = segments.run(plan, consts, args)
        while True:
            try:
                got = next(outs)
            except StopIteration:
                break
            except Exception as exc:
                raise _Cut(
                    "error",
                    f"stopped at equation {where.path or '0'}…: evaluating its jaxpr raised "
                    f"{type(exc).__name__}: {exc}",
                ) from exc
            yield got
        if plan.cut is not None:
            limit = self.max_bytes if plan.cut == "bytes" else self.max_steps
            what = "bytes of outputs" if plan.cut == "bytes" else "equations"
            raise _Cut(
                plan.cut,
                f"stopped after {self.steps} equations: the next would take the {what} evaluated past {limit:,}",
            )

    def _eval(
        self,
        jaxpr: Any,
        consts: list[Any],
        args: list[_Value],
        where: _Where,
        feed: Iterator[list[Any] | segments.Pending] | None = None,
    ) -> list[_Value]:
        env: dict[Any, _Value] = {}
        constvars = list(getattr(jaxpr, "constvars", ()))
        if len(constvars) != len(consts) or len(jaxpr.invars) != len(args):
            raise RuntimeError(
                f"a jaxpr of {len(constvars)} constants and {len(jaxpr.invars)} inputs given "
                f"{len(consts)} and {len(args)}"
            )
        if feed is None:  # a jaxpr of its own (the run's, a loop body's, a branch)
            values = [_uniform(a.value, v) for a, v in zip(args, jaxpr.invars, strict=True)]
            feed = self._feed(jaxpr, consts, values, where)
        for var, const in zip(constvars, consts, strict=True):
            env[var] = _Value(const, None, *_flags(const))
        for var, arg in zip(jaxpr.invars, args, strict=True):
            env[var] = arg

        def read(atom: Any) -> _Value:
            if isinstance(atom, walk.literal_type()):
                return _Value(atom.val, None, *_flags(atom.val))
            return env[atom]

        for index, eqn in enumerate(jaxpr.eqns):
            inputs = [read(v) for v in eqn.invars]
            outs = self._step(eqn, inputs, where, f"{where.path}{index}", feed)
            for var, out in zip(eqn.outvars, outs, strict=True):
                env[var] = out
        return [read(v) for v in jaxpr.outvars]

    def _step(
        self,
        eqn: Any,
        inputs: list[_Value],
        where: _Where,
        path: str,
        feed: Iterator[list[Any] | segments.Pending],
    ) -> list[_Value]:
        name = eqn.primitive.name
        facts = self._facts.get(id(eqn))
        if facts is None:
            info = eqn.source_info
            facts = (eqn, str(info.name_stack), walk.line(info), _eqn_cost(eqn))
            self._facts[id(eqn)] = facts
        _, own_stack, line, cost = facts
        inner = _Where(f"{path}.", where.depth + 1, f"{where.name_stack}/{own_stack}")
        sub = walk.call_jaxpr(eqn)
        if sub is not None:
            body, consts = walk.parts(sub)
            self._eval(body, consts, inputs, inner, feed)
        outs = next(feed, None)  # past a budget, _feed raises _Cut here
        if outs is None:
            raise RuntimeError(f"the compiled walk made no outputs for equation {path}")
        self.steps += 1
        self.bytes += cost
        try:
            if isinstance(outs, segments.Pending):  # a loop or a cond: its body stepped
                if name == "scan":
                    got = self._scan(eqn, inputs, inner)
                elif name == "while":
                    got = self._while(eqn, inputs, inner)
                else:
                    got = self._cond(eqn, inputs, inner)
                outs.outs = [_uniform(v, var) for v, var in zip(got, eqn.outvars, strict=True)]
                outs = outs.outs
        except _Cut:
            raise
        except Exception as exc:
            where_text = f" (line {line})" if line else ""
            raise _Cut(
                "error",
                f"stopped at equation {path} ({name}){where_text}: {type(exc).__name__}: {exc}",
            ) from exc
        values = [_Value(v, None, False, False) for v in outs]
        described = [stats(v.value) for v in values[:MAX_TRACE_ROW_VALUES]]
        row_nan = any(d.get("nan_count") for d in described)
        row_inf = any(d.get("inf_count") for d in described)
        made = [
            kind
            for kind, out, into in (
                ("nan", row_nan, any(i.nan for i in inputs)),
                ("inf", row_inf, any(i.inf for i in inputs)),
            )
            if out and not into
        ]
        row = _Row(
            eqn=path,
            primitive=name,
            depth=where.depth,
            line=line,
            phase=walk.phase(f"{where.name_stack}/{own_stack}"),
            outputs=described,
            outputs_total=len(values),
            inputs=[i.row for i in inputs[:MAX_TRACE_ROW_VALUES]],
            made=made,
        )
        self._record(row)
        if len(values) > MAX_TRACE_ROW_VALUES:  # the rest are read only for their flags
            flags = [_flags(v.value) for v in values[MAX_TRACE_ROW_VALUES:]]
            row_nan = row_nan or any(n for n, _ in flags)
            row_inf = row_inf or any(i for _, i in flags)
        # a value's flags say what it holds; each output's own, where it was described
        result = []
        for k, v in enumerate(values):
            if k < len(described):
                nan, inf = bool(described[k].get("nan_count")), bool(described[k].get("inf_count"))
            else:
                nan, inf = row_nan, row_inf
            result.append(_Value(v.value, row, nan, inf))
        return result

    def _record(self, row: _Row) -> None:
        self.live += 1
        if self.live > self.max_rows:
            self.live -= 1
            raise _Cut("rows", f"stopped after {self.max_rows} rows recorded")
        self.sink.append(row)

    # --- loops and branches: their bodies stepped again, on the host's side ----------

    def _loop(self, loop: _Loop) -> contextlib.AbstractContextManager[None]:
        """On leaving (a cut included), the loop's rows go where rows go."""

        @contextlib.contextmanager
        def flushing() -> Iterator[None]:
            try:
                yield
            finally:
                self.sink.extend(loop.rows())

        return flushing()

    def _iteration(
        self, loop: _Loop, jaxpr: Any, args: list[_Value], where: _Where
    ) -> list[_Value]:
        sub, consts = walk.parts(jaxpr)
        with self._collecting() as rows:
            try:
                return self._eval(sub, consts, args, where)
            finally:
                loop.add(rows)

    def _scan(self, eqn: Any, inputs: list[_Value], where: _Where) -> list[Any]:
        """Steps every iteration; the scan's outputs: the last carry and the ys of
        the iterations stacked (the scan bound whole where they cannot be)."""
        params = eqn.params
        length, reverse = int(params["length"]), bool(params.get("reverse", False))
        consts, carry, xs = walk.scan_split(params, inputs)
        ys: list[list[Any]] = [[] for _ in range(length)]
        loop = _Loop(self)
        with self._loop(loop):
            for step in range(length):
                i = length - 1 - step if reverse else step
                sliced = [_Value(_index(x.value, i), x.row, x.nan, x.inf) for x in xs]
                outs = self._iteration(loop, params["jaxpr"], [*consts, *carry, *sliced], where)
                carry, y = walk.scan_out_split(params, outs, len(carry))
                ys[i] = [v.value for v in y]
        last = [v.value for v in carry]
        if length:
            flat = [*last, *(_stack([y[k] for y in ys]) for k in range(len(ys[0])))]
            split_carry, split_ys = walk.scan_out_split(params, flat, len(last))
            # the flat outputs are the carry, then the ys, as the scan splits them
            split = [*split_carry, *split_ys]
            in_order = len(split) == len(flat) and all(
                a is b for a, b in zip(split, flat, strict=True)
            )
            shapes = [tuple(np.shape(v)) for v in flat]
            if in_order and shapes == [tuple(v.aval.shape) for v in eqn.outvars]:
                return flat
        return walk.bind(eqn, [v.value for v in inputs])

    def _while(self, eqn: Any, inputs: list[_Value], where: _Where) -> list[Any]:
        import jax

        params = eqn.params
        nc, nb = int(params["cond_nconsts"]), int(params["body_nconsts"])
        cond_consts, body_consts, carry = inputs[:nc], inputs[nc : nc + nb], inputs[nc + nb :]
        cond, cond_own = walk.parts(params["cond_jaxpr"])
        if id(cond) not in self._tests:
            test = segments.jit(lambda *a: jax.core.eval_jaxpr(cond, cond_own, *a))
            self._tests[id(cond)] = (cond, test)
        test = self._tests[id(cond)][1]
        loop = _Loop(self)
        with self._loop(loop):
            while True:
                self.steps += len(cond.eqns)
                if self.steps > self.max_steps:
                    raise _Cut("steps", f"stopped after {self.max_steps} equations evaluated")
                (go,) = test(*[v.value for v in [*cond_consts, *carry]])
                if not bool(go):
                    break
                carry = self._iteration(loop, params["body_jaxpr"], [*body_consts, *carry], where)
        return [v.value for v in carry]

    def _cond(self, eqn: Any, inputs: list[_Value], where: _Where) -> list[Any]:
        branches = eqn.params["branches"]
        index = min(max(int(inputs[0].value), 0), len(branches) - 1)
        sub, consts = walk.parts(branches[index])
        branch = _Where(f"{where.path}b{index}.", where.depth, where.name_stack)
        return [v.value for v in self._eval(sub, consts, inputs[1:], branch)]

    # --- the event -----------------------------------------------------------------

    def event(self) -> dict[str, Any]:
        rows, values = self.rows, 0
        for end, row in enumerate(rows):
            values += len(row.outputs)
            if values > MAX_TRACE_VALUES or end >= self.max_rows:
                rows = rows[:end]
                self.cut = self.cut or "rows"
                self.notes.append(
                    f"the rows past row {end} are not shown: the event holds {MAX_TRACE_VALUES} values"
                )
                break
        position = {id(row): n for n, row in enumerate(rows)}

        def at(row: _Row | None) -> int | None:
            return None if row is None else position.get(id(row.resolved()))

        out_rows = []
        first: dict[str, int | None] = {"nan": None, "inf": None}
        for n, row in enumerate(rows):
            for kind in first:
                if first[kind] is None and any(o.get(f"{kind}_count") for o in row.outputs):
                    first[kind] = n
            out_rows.append(
                {
                    "eqn": row.eqn,
                    "primitive": row.primitive,
                    "depth": row.depth,
                    "line": row.line,
                    "phase": row.phase,
                    "iteration": row.iteration,
                    "iterations": row.iterations,
                    "outputs": row.outputs,
                    "outputs_total": row.outputs_total,
                    "inputs": [at(i) for i in row.inputs],
                    "made": row.made,
                }
            )
        found = [n for n in first.values() if n is not None]
        return {
            "type": "trace_values",
            "rows": out_rows,
            "first_bad": min(found) if found else None,
            "first_nan": first["nan"],
            "first_inf": first["inf"],
            "cut": self.cut,
            "evaluated_bytes": self.bytes,
            "evaluated_steps": self.steps,
            "notes": self.notes[:8],
        }


def _uniform(value: Any, var: Any) -> Any:
    """``value`` as an array of ``var``'s dtype, strongly typed: a loop's first carry
    (a literal, a NumPy row) and its later ones (JAX arrays) then trace alike, and its
    body compiles once."""
    import jax

    dtype = getattr(getattr(var, "aval", None), "dtype", None)
    if dtype is None or jax.dtypes.issubdtype(dtype, jax.dtypes.extended):
        return value
    if isinstance(value, jax.Array) and value.dtype == dtype and not value.weak_type:
        return value
    try:  # on the host: a weakly typed JAX scalar would compile a conversion
        return np.asarray(value, dtype=dtype)
    except Exception:  # what NumPy will not make an array of: as it is
        return value


def _index(value: Any, i: int) -> Any:
    """Row ``i`` of a scanned-over value, on the host (a JAX index would compile)."""
    try:
        return np.asarray(value)[i]
    except Exception:  # an extended dtype (PRNG keys): JAX indexes it
        return value[i]


def _stack(values: list[Any]) -> Any:
    """The iterations' values of one scan output, stacked on the host (a JAX stack
    would compile)."""
    try:
        return np.stack([np.asarray(v) for v in values])
    except Exception:  # an extended dtype (PRNG keys): JAX stacks it
        import jax.numpy as jnp

        return jnp.stack(values)


def trace_values_event(closed: Any, args: tuple[Any, ...]) -> dict[str, Any]:
    """The event of ``closed`` (the pipeline's traced jaxpr) stepped on ``args`` (the
    pipeline's non-static arguments, as traced)."""
    import jax

    stepper = Stepper()
    stepper.run(closed, jax.tree_util.tree_leaves(args))
    return stepper.event()


#: the note of a compare pipeline not stepped (``trace_values_compare`` unset)
NOT_STEPPED = (
    "not stepped: the stepper steps the main pipeline only (stepping costs about a "
    "run); set the request's trace_values_compare to step the compare pipelines too"
)


def _is_compare(results: Results) -> bool:
    """Whether ``results`` are a compare pipeline's (the run names each pipeline)."""
    return results.pipeline.name != "main"


def not_stepped_event() -> dict[str, Any]:
    return {
        "type": "trace_values",
        "rows": [],
        "first_bad": None,
        "first_nan": None,
        "first_inf": None,
        "cut": None,
        "evaluated_bytes": 0,
        "evaluated_steps": 0,
        "notes": [NOT_STEPPED],
    }


def trace_values_results(results: Results) -> dict[str, Any]:
    """The event of a pipeline's ``Results``: its traced
    jaxpr (traced here when no other output asked for it) on its own arguments. A
    compare pipeline is stepped only when the request's ``trace_values_compare`` says
    so; otherwise its event has no rows and a note saying why."""
    import jax

    request = results.pipeline.run.request
    if _is_compare(results) and not request.trace_values_compare:
        return not_stepped_event()
    pipe, args = results.pipeline.pipe, results.pipeline.run.args
    closed = results.closed
    if closed is None:
        closed = jax.make_jaxpr(pipe.fn, static_argnums=pipe.static_argnums)(*args)
    return trace_values_event(closed, pipe.dynamic_args(args))


OUTPUT = Output("executed", "stepping the jaxpr", trace_values_results)
