"""The float64 shadow: a jaxpr evaluated equation by equation twice, as the program
runs (its dtypes, on its backend: each primitive bound on its own, as eager JAX
does) and in float64 on the CPU (``jax.enable_x64`` in the run's own process, the
arguments converted exactly, every floating dtype of an equation's parameters
rewritten to float64: ``preferred_element_type`` too, or a ``dot_general`` would hand
float32 back and every later equation fall back to it).

Per equation, two errors of its floating outputs against the shadow's:

* ``error``: where the program's value stands (what its inputs brought, and its own);
* ``born``: what the equation adds itself: the same primitive bound in the program's
  dtypes on the shadow's inputs rounded to those dtypes, against the shadow's output
  (Herbie's and Herbgrind's *local error*). A cancellation ``a - b`` shows here,
  where the ``div`` after it only carries its error on.

Integer and boolean values follow the program (PFPSanitizer's rule: both sides take
the same branches and pick the same elements); where the shadow computed another one
the row counts the elements (``diverged``: a comparison flipped, another index). What
cannot be shadowed (bit-level primitives, a primitive holding a jaxpr the shadow does
not step into, a bind float64 refuses) takes the program's value, said in the row.

Calls (``jit``, ``custom_jvp``/``custom_vjp`` rules, ``checkpoint``) are stepped into:
their equations are the rows. ``cond`` steps the branch the program took; ``scan`` and
``while`` step every iteration, one row per body equation summarising them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sandbox.engine.core import jaxpr_walk as walk
from sandbox.engine.outputs.numerics import metrics
from sandbox.engine.outputs.numerics.metrics import Errors

#: bit-level primitives: their float outputs are made of bits, not of arithmetic, so
#: the shadow takes the program's (``jax.random``'s uniform is built this way)
OPAQUE = frozenset(
    {
        "bitcast_convert_type",
        "random_bits",
        "random_seed",
        "random_wrap",
        "random_unwrap",
        "random_fold_in",
        "random_split",
        "threefry2x32",
        "nextafter",
    }
)


class Cut(Exception):
    """The budget ran out (``reason``: what; the message says where)."""

    def __init__(self, reason: str, note: str) -> None:
        super().__init__(note)
        self.reason = reason


@dataclass(eq=False)
class Row:
    eqn: str
    primitive: str
    depth: int
    line: int | None
    phase: str | None
    dtype: str | None
    shape: list[int]
    error: Errors | None = None
    born: Errors | None = None
    shadowed: bool = True
    #: why the shadow took the program's value (None: it did not)
    unshadowed: str | None = None
    diverged: int = 0
    iterations: int | None = None
    #: what hints.py reads: the producers' primitives, literal operands, magnitudes
    facts: dict[str, Any] = field(default_factory=dict)
    hint: tuple[str, str] | None = None

    def fold(self, other: Row) -> None:
        self.iterations = (self.iterations or 1) + (other.iterations or 1)
        self.error = Errors.fold(self.error, other.error)
        self.born = Errors.fold(self.born, other.born)
        self.diverged += other.diverged
        self.hint = self.hint or other.hint


@dataclass
class Pair:
    """A value as the program has it (``low``) and its shadow (``high``: float64 for a
    floating value, the program's own for any other); the row that made it."""

    low: Any
    high: Any
    row: Row | None = None
    literal: Any = None


class _Rows:
    """Where rows go: the run's list, or a loop's, folding its iterations by place."""

    def __init__(self, folding: bool) -> None:
        self.rows: list[Row] = []
        self.by_place: dict[str, Row] | None = {} if folding else None

    def add(self, row: Row) -> Row:
        if self.by_place is not None:
            into = self.by_place.get(row.eqn)
            if into is not None:
                into.fold(row)
                return into
            row.iterations = row.iterations or 1
            self.by_place[row.eqn] = row
        self.rows.append(row)
        return row


def widen(dtype: Any) -> Any:
    """The shadow's dtype for ``dtype``: float64 (complex128) for a floating one."""
    if not metrics.inexact(dtype):
        return dtype
    return np.dtype(np.complex128) if np.dtype(dtype).kind == "c" else np.dtype(np.float64)


def shadow_params(params: dict[str, Any]) -> dict[str, Any]:
    """An equation's parameters for float64: every floating dtype widened, and a dot
    algorithm (which names its operand types) left to the default."""
    out = dict(params)
    for key, value in params.items():
        if _is_dtype(value):
            out[key] = widen(value)
        elif key == "precision" and value is not None and _names_algorithm(value):
            out[key] = None
    return out


def _is_dtype(value: Any) -> bool:
    if isinstance(value, np.dtype):
        return True
    return isinstance(value, type) and issubclass(value, np.generic)


def _names_algorithm(value: Any) -> bool:
    from jax import lax

    items = value if isinstance(value, tuple) else (value,)
    kinds = tuple(
        t
        for t in (getattr(lax, "DotAlgorithmPreset", None), getattr(lax, "DotAlgorithm", None))
        if t
    )
    return any(isinstance(v, kinds) for v in items)


class Shadow:
    """Evaluates one jaxpr and its shadow; ``rows`` what it recorded."""

    def __init__(
        self,
        *,
        max_steps: int,
        max_rows: int,
        hint: Callable[[Row], tuple[str, str] | None] | None = None,
    ) -> None:
        import jax

        self.max_steps, self.max_rows, self.hint = max_steps, max_rows, hint
        self.steps = 0
        self.sink = _Rows(folding=False)
        self.cut: str | None = None
        self.notes: list[str] = []
        self.cpu = jax.devices("cpu")[0]
        #: the shadow's value of each row outside loops (its first floating output), its
        #: dtype, line and output index, by place: what precision.py compares a setting to
        self.values: dict[str, tuple[Any, Any, int | None, int]] = {}
        #: what each side cost (seconds): the program's binds, the shadow's, the born
        self.seconds = {"program": 0.0, "shadow": 0.0, "born": 0.0, "compare": 0.0}

    @property
    def rows(self) -> list[Row]:
        return self.sink.rows

    # --- conversions ---------------------------------------------------------------

    def to_high(self, value: Any, dtype: Any) -> Any:
        """The shadow of a program value (exact: float64 holds every narrower float)."""
        import jax

        if not metrics.inexact(dtype):
            return value
        with jax.enable_x64(True):
            return jax.device_put(np.asarray(value).astype(widen(dtype)), self.cpu)

    def pair(self, value: Any, aval: Any) -> Pair:
        return Pair(value, self.to_high(value, aval.dtype))

    # --- running -------------------------------------------------------------------

    def run(self, closed: Any, args: list[Any]) -> list[Pair] | None:
        """Evaluates ``closed`` on ``args``; the outputs' pairs (None: stopped early)."""
        jaxpr, consts = walk.parts(closed)
        pairs = [self.pair(a, v.aval) for a, v in zip(args, jaxpr.invars, strict=True)]
        try:
            return self.eval(jaxpr, consts, pairs, "", 0, "")
        except Cut as cut:
            self.cut = cut.reason
            self.notes.append(str(cut))
            return None

    def eval(
        self, jaxpr: Any, consts: list[Any], args: list[Pair], path: str, depth: int, stack: str
    ) -> list[Pair]:
        env: dict[Any, Pair] = {}
        for var, const in zip(jaxpr.constvars, consts, strict=True):
            env[var] = self.pair(const, var.aval)
        for var, arg in zip(jaxpr.invars, args, strict=True):
            env[var] = arg

        def read(atom: Any) -> Pair:
            if isinstance(atom, walk.literal_type()):
                value = np.asarray(atom.val, dtype=atom.aval.dtype)
                got = self.pair(value, atom.aval)
                got.literal = value
                return got
            return env[atom]

        for index, eqn in enumerate(jaxpr.eqns):
            inputs = [read(v) for v in eqn.invars]
            outs = self.step(eqn, inputs, f"{path}{index}", depth, stack)
            for var, out in zip(eqn.outvars, outs, strict=True):
                env[var] = out
        return [read(v) for v in jaxpr.outvars]

    def step(self, eqn: Any, inputs: list[Pair], path: str, depth: int, stack: str) -> list[Pair]:
        name = eqn.primitive.name
        own_stack = f"{stack}/{eqn.source_info.name_stack}"
        sub = walk.call_jaxpr(eqn)
        if sub is not None:
            body, consts = walk.parts(sub)
            if name.startswith("custom_vjp"):  # its primal inputs follow its consts
                inputs = inputs[len(inputs) - len(body.invars) :]
            return self.eval(body, consts, inputs, f"{path}.", depth + 1, own_stack)
        if name == "scan":
            return self.scan(eqn, inputs, path, depth, own_stack)
        if name == "while":
            return self.loop(eqn, inputs, path, depth, own_stack)
        if name == "cond":
            return self.cond(eqn, inputs, path, depth, own_stack)
        self.steps += 1
        if self.steps > self.max_steps:
            raise Cut(
                "steps",
                f"stopped after {self.max_steps} equations evaluated (equation {path}, {name})",
            )
        return self.primitive(eqn, inputs, path, depth, own_stack)

    def primitive(
        self, eqn: Any, inputs: list[Pair], path: str, depth: int, stack: str
    ) -> list[Pair]:
        import jax

        name = eqn.primitive.name
        first = next((v for v in eqn.outvars if metrics.inexact(v.aval.dtype)), eqn.outvars[0])
        aval = first.aval
        row = Row(
            eqn=path,
            primitive=name,
            depth=depth,
            line=walk.line(eqn.source_info),
            phase=walk.phase(stack),
            dtype=str(getattr(aval, "dtype", "")) or None,
            shape=[int(d) for d in getattr(aval, "shape", ())],
        )
        start = time.perf_counter()
        lows = walk.bind(eqn, [i.low for i in inputs], host_as_jax=True)
        self.seconds["program"] += time.perf_counter() - start
        floats_in = any(metrics.inexact(v.aval.dtype) for v in eqn.invars)
        floats_out = any(metrics.inexact(v.aval.dtype) for v in eqn.outvars)
        highs: list[Any] | None = None
        if name in OPAQUE or any(_extended(v.aval.dtype) for v in (*eqn.invars, *eqn.outvars)):
            row.shadowed = not floats_out
            row.unshadowed = (
                "made of bits: the shadow takes the program's value" if floats_out else None
            )
        elif not (floats_in or floats_out):
            highs = lows  # integers and booleans alone: the shadow is the program
        elif name == "reduce_precision":  # a rounding the shadow does not make
            highs = [inputs[0].high]
        else:
            start = time.perf_counter()
            try:
                with jax.enable_x64(True):
                    highs = walk.bind(
                        eqn, [i.high for i in inputs], shadow_params(eqn.params), host_as_jax=True
                    )
            except Exception as exc:  # float64 refused: said in the row
                row.shadowed = False
                row.unshadowed = f"float64 refused it: {type(exc).__name__}: {str(exc)[:200]}"
                self.note_once(
                    f"{name} could not be shadowed in float64 ({type(exc).__name__}); the shadow takes the program's value there"
                )
            self.seconds["shadow"] += time.perf_counter() - start
        outs: list[Pair] = []
        for k, (var, low) in enumerate(zip(eqn.outvars, lows, strict=True)):
            dtype = var.aval.dtype
            if highs is None:
                outs.append(Pair(low, self.to_high(low, dtype), row))
                continue
            high = highs[k]
            if metrics.inexact(dtype):
                outs.append(Pair(low, high, row))
            else:  # the program's integers and booleans lead
                if floats_in:
                    row.diverged += metrics.mismatches(low, high)
                outs.append(Pair(low, low, row))
        if highs is not None and floats_out:
            self.measure(eqn, row, inputs, lows, highs)
        row.facts.update(_facts(name, inputs, lows, highs))
        self.record(row)
        return outs

    def measure(
        self, eqn: Any, row: Row, inputs: list[Pair], lows: list[Any], highs: list[Any]
    ) -> None:
        """The row's error and born error (its first floating output's)."""
        k = next(n for n, v in enumerate(eqn.outvars) if metrics.inexact(v.aval.dtype))
        dtype = eqn.outvars[k].aval.dtype
        start = time.perf_counter()
        rounded, overflowed = [], False
        for i, v in zip(inputs, eqn.invars, strict=True):
            if metrics.inexact(v.aval.dtype) and not isinstance(v, walk.literal_type()):
                high = np.asarray(i.high)
                with np.errstate(over="ignore"):
                    got = high.astype(v.aval.dtype)
                overflowed = overflowed or bool(
                    np.any(np.isfinite(high) & ~np.isfinite(np.asarray(got, dtype=high.dtype)))
                )
                rounded.append(got)
            else:
                rounded.append(i.low)
        # an input whose shadow the dtype cannot hold: what this equation adds on top
        # of that overflow is not measurable (the row's error still says where it is)
        local = None if overflowed else walk.bind(eqn, rounded, host_as_jax=True)[k]
        self.seconds["born"] += time.perf_counter() - start
        start = time.perf_counter()
        row.error = metrics.errors(lows[k], highs[k], dtype)
        row.born = None if local is None else metrics.errors(local, highs[k], dtype)
        row.facts["inputs_overflowed"] = overflowed
        if self.sink.by_place is None:  # not a loop's: a setting's value is compared to it
            self.values[row.eqn] = (highs[k], dtype, row.line, k)
        self.seconds["compare"] += time.perf_counter() - start

    def record(self, row: Row) -> None:
        if len(self.rows) >= self.max_rows and (
            self.sink.by_place is None or row.eqn not in self.sink.by_place
        ):
            raise Cut("rows", f"stopped after {self.max_rows} rows")
        if self.hint is not None and row.hint is None:
            row.hint = self.hint(row)
        self.sink.add(row)

    def note_once(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)

    # --- loops and branches ----------------------------------------------------------

    def _folding(self) -> _Rows:
        outer = self.sink
        self.sink = _Rows(folding=True)
        return outer

    def _flush(self, outer: _Rows) -> None:
        inner, self.sink = self.sink, outer
        for row in inner.rows:
            self.record(row)

    def scan(self, eqn: Any, inputs: list[Pair], path: str, depth: int, stack: str) -> list[Pair]:
        params = eqn.params
        length, reverse = int(params["length"]), bool(params.get("reverse", False))
        consts, carry, xs = walk.scan_split(params, inputs)
        body, body_consts = walk.parts(params["jaxpr"])
        ys: list[list[Pair]] = [[] for _ in range(length)]
        outer = self._folding()
        try:
            for step in range(length):
                i = length - 1 - step if reverse else step
                sliced = [Pair(_index(x.low, i), _index(x.high, i), x.row) for x in xs]
                outs = self.eval(
                    body, body_consts, [*consts, *carry, *sliced], f"{path}.", depth + 1, stack
                )
                carry, y = walk.scan_out_split(params, outs, len(carry))
                ys[i] = list(y)
        finally:
            self._flush(outer)
        n_ys = len(eqn.outvars) - len(carry)
        stacked = (
            [
                Pair(_stack([y[k].low for y in ys]), _stack([y[k].high for y in ys]), None)
                for k in range(n_ys)
            ]
            if length
            else [
                self.pair(np.zeros(v.aval.shape, v.aval.dtype), v.aval)
                for v in eqn.outvars[len(carry) :]
            ]
        )
        split_carry, split_ys = walk.scan_out_split(params, [*carry, *stacked], len(carry))
        return [*split_carry, *split_ys]

    def loop(self, eqn: Any, inputs: list[Pair], path: str, depth: int, stack: str) -> list[Pair]:
        params = eqn.params
        nc, nb = int(params["cond_nconsts"]), int(params["body_nconsts"])
        cond_consts, body_consts, carry = inputs[:nc], inputs[nc : nc + nb], inputs[nc + nb :]
        cond, cond_own = walk.parts(params["cond_jaxpr"])
        body, body_own = walk.parts(params["body_jaxpr"])
        outer = self._folding()
        iteration = 0
        try:
            while True:
                self.sink, tests = _Rows(folding=True), self.sink  # the test's rows are not shown
                try:
                    (go,) = self.eval(
                        cond, cond_own, [*cond_consts, *carry], f"{path}c.", depth + 1, stack
                    )
                finally:
                    self.sink = tests
                if bool(np.asarray(go.low)) != bool(np.asarray(go.high)) or (
                    go.row is not None and go.row.diverged
                ):
                    self.note_once(
                        f"the loop at equation {path} tests otherwise in float64 at iteration {iteration}: the shadow follows the program"
                    )
                if not bool(np.asarray(go.low)):
                    break
                carry = self.eval(
                    body, body_own, [*body_consts, *carry], f"{path}.", depth + 1, stack
                )
                iteration += 1
        finally:
            self._flush(outer)
        return carry

    def cond(self, eqn: Any, inputs: list[Pair], path: str, depth: int, stack: str) -> list[Pair]:
        branches = eqn.params["branches"]
        index = min(max(int(np.asarray(inputs[0].low)), 0), len(branches) - 1)
        body, consts = walk.parts(branches[index])
        return self.eval(body, consts, inputs[1:], f"{path}b{index}.", depth + 1, stack)


def _extended(dtype: Any) -> bool:
    import jax

    try:
        return bool(jax.dtypes.issubdtype(dtype, jax.dtypes.extended))
    except TypeError:
        return False


def _index(value: Any, i: int) -> Any:
    try:
        return np.asarray(value)[i]
    except Exception:  # an extended dtype (PRNG keys): JAX indexes it
        return value[i]


def _stack(values: list[Any]) -> Any:
    try:
        return np.stack([np.asarray(v) for v in values])
    except Exception:
        import jax.numpy as jnp

        return jnp.stack(values)


def _facts(
    name: str, inputs: list[Pair], lows: list[Any], highs: list[Any] | None
) -> dict[str, Any]:
    """What hints.py reads of one equation: its inputs' producers, its literal
    operands, and (add, sub) how many bits cancelled where its born error is worst."""
    facts: dict[str, Any] = {
        "producers": [i.row.primitive if i.row is not None else None for i in inputs],
        "producer_rows": [i.row for i in inputs],
        "literals": [None if i.literal is None else np.asarray(i.literal).tolist() for i in inputs],
    }
    if highs is not None and name in ("add", "sub") and len(inputs) == 2:
        try:
            a, b = (np.abs(np.asarray(i.high, dtype=np.float64)) for i in inputs)
            out = np.abs(np.asarray(highs[0], dtype=np.float64))
            with np.errstate(divide="ignore", invalid="ignore"):
                bits = np.log2(np.maximum(a, b) / out)
            bits = (
                bits[np.isfinite(bits)]
                if np.ndim(bits)
                else np.asarray([bits])[np.isfinite([bits])]
            )
            facts["cancelled_bits"] = float(bits.max()) if bits.size else None
        except (TypeError, ValueError):
            facts["cancelled_bits"] = None
    if lows and highs is not None and name == "exp":
        low, high = np.asarray(lows[0], dtype=np.float64), np.asarray(highs[0], dtype=np.float64)
        facts["overflowed"] = bool(np.any(np.isinf(low) & np.isfinite(high)))
        facts["input_max"] = float(
            np.max(np.asarray(inputs[0].high, dtype=np.float64), initial=-np.inf)
        )
    return facts
