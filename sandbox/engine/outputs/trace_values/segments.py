"""How the value stepper (sandbox/engine/outputs/trace_values/) evaluates one jaxpr: every
walked equation's outputs, in the order the stepper reads them, with as few XLA
compiles as it can.

The jaxpr is flattened once (``flatten``): the bodies of the equations stepped into
like a call (``jit``, ``checkpoint``, ``custom_jvp``/``custom_vjp``...) inlined before
the call's own step, whose outputs are its body's results; a loop or a ``cond`` is
one step, bound whole (the stepper steps its body again on the host). The steps
within the budget left (``plan``) are cut into consecutive chunks of at most
``COMPILED_SEGMENT_MAX`` steps, and each chunk is either compiled whole, its steps'
outputs its outputs (one compile for the chunk, a loop body's serving every
iteration), or dispatched a step at a time through a compiled function per distinct
equation (primitive, parameters, input types), shared by every jaxpr the stepper
walks: a chunk whose equations are mostly ones already compiled alone (an unrolled
Python loop, a repeated layer) costs no compile at all. Every compile is made at
XLA's backend optimization level 0 (``COMPILER_OPTIONS``): the stepper's programs
run once on small values, and LLVM's optimizations are most of a small program's
compile (about half the compile time measured; the values can differ from an
optimized compile's in the last bits, as the run's own fused program's already do).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

#: A chunk compiled whole holds at most this many steps.
COMPILED_SEGMENT_MAX = 48
#: What one more step adds to the compile of a chunk compiled whole, in compiles of
#: one equation alone (``plan``)
WHOLE_STEP_SHARE = 1 / 7
#: The equations the stepper evaluates itself, stepping their bodies (a ``Pending``).
HOST_PRIMITIVES = frozenset({"scan", "while", "cond"})
#: What each of the stepper's compiles is given (the run's own compiles keep XLA's
#: defaults).
COMPILER_OPTIONS = {"xla_backend_optimization_level": "0"}


_options_taken = [True]


def jit(fn: Any) -> Any:
    """``jax.jit(fn)`` compiled with ``COMPILER_OPTIONS``, or without them where this
    XLA does not know them (it refuses the compile)."""
    import jax

    compiled = [
        jax.jit(fn, compiler_options=COMPILER_OPTIONS) if _options_taken[0] else jax.jit(fn)
    ]

    def call(*args: Any) -> Any:
        try:
            return compiled[0](*args)
        except Exception as exc:
            if not _options_taken[0] or "compile option" not in str(exc):
                raise
            _options_taken[0] = False
            compiled[0] = jax.jit(fn)
            return compiled[0](*args)

    return call


@dataclass(frozen=True)
class Const:
    """A value known when flattening: a literal, a call body's constant."""

    value: Any


@dataclass(eq=False)
class Step:
    eqn: Any
    #: slots (ints) or Consts
    ins: list[Any]
    #: a call's: its body's results (slots or Consts); else fresh slots
    outs: list[Any]
    call: bool
    #: bytes of the equation's outputs
    cost: int


@dataclass
class Flat:
    inputs: list[int]  # the jaxpr's constvars' slots, then its invars'
    steps: list[Step]


def flatten(jaxpr: Any, call_jaxpr: Any, parts: Any, literal: type, eqn_cost: Any) -> Flat:
    """``jaxpr``'s steps in the stepper's order (``call_jaxpr(eqn)``: the body an
    equation is stepped into, or None; ``parts``: a jaxpr and its constants)."""
    counter = iter(range(1 << 62))
    steps: list[Step] = []

    def walk(jaxpr: Any, bound: list[Any]) -> list[Any]:
        env: dict[Any, Any] = {}
        for var, given in zip(
            [*getattr(jaxpr, "constvars", ()), *jaxpr.invars], bound, strict=True
        ):
            env[var] = given

        def ref(atom: Any) -> Any:
            return Const(getattr(atom, "val", None)) if isinstance(atom, literal) else env[atom]

        for eqn in jaxpr.eqns:
            ins = [ref(v) for v in eqn.invars]
            sub = call_jaxpr(eqn)
            if sub is not None:
                inner, consts = parts(sub)
                outs = walk(inner, [*(Const(c) for c in consts), *ins])
            else:
                outs = [next(counter) for _ in eqn.outvars]
            steps.append(Step(eqn, ins, outs, sub is not None, eqn_cost(eqn)))
            for var, out in zip(eqn.outvars, outs, strict=True):
                env[var] = out
        return [ref(v) for v in jaxpr.outvars]

    inputs = [next(counter) for _ in [*getattr(jaxpr, "constvars", ()), *jaxpr.invars]]
    walk(jaxpr, list(inputs))
    return Flat(inputs, steps)


def prefix(flat: Flat, left_bytes: int, left_steps: int) -> tuple[int, str | None]:
    """How many steps fit the budget left, and what cut them (``steps`` or
    ``bytes``, checked in that order before each step), or None."""
    for n, step in enumerate(flat.steps):
        if left_steps < 1:
            return n, "steps"
        if left_bytes < step.cost:
            return n, "bytes"
        left_bytes, left_steps = left_bytes - step.cost, left_steps - 1
    return len(flat.steps), None


def _op_key(eqn: Any) -> Any:
    """What decides the computation of an equation bound alone, but its input types."""
    try:
        params = tuple(sorted(eqn.params.items()))
        ctx = getattr(eqn, "ctx", None)
        key = (eqn.primitive, params, None if ctx is None else repr(ctx))
        hash(key)
        return key
    except TypeError:  # a parameter with no hash: this equation's own
        return ("eqn", id(eqn))


def _compile_key(step: Step) -> Any:
    """What decides the compile of an equation bound alone."""
    return (_op_key(step.eqn), _types(step))


def _types(step: Step) -> tuple[Any, ...]:
    types = []
    for var in step.eqn.invars:
        aval = getattr(var, "aval", None)
        types.append((getattr(aval, "shape", None), str(getattr(aval, "dtype", None))))
    return tuple(types)


def _strong(value: Any, dtype: Any) -> Any:
    """``value`` as a strongly typed array of ``dtype`` (an array of another kind, an
    extended dtype's, as it is)."""
    import jax
    import numpy as np

    if isinstance(value, jax.Array):
        return np.asarray(value) if value.weak_type and value.dtype == dtype else value
    if isinstance(value, np.ndarray) or dtype is None:
        return value
    try:
        if jax.dtypes.issubdtype(dtype, jax.dtypes.extended):
            return value
        return np.asarray(value, dtype=dtype)
    except Exception:  # what NumPy will not make an array of: as it is
        return value


@dataclass(eq=False)
class Chunk:
    steps: list[Step]
    #: compiled whole: the slots it reads from before it, and the function
    reads: list[int] = field(default_factory=list)
    fn: Any = None
    #: dispatched a step at a time: each computing step's compiled function
    ops: list[Any] = field(default_factory=list)
    #: a loop or a cond: its outputs are the stepper's (``Pending``)
    host: bool = False


@dataclass(eq=False)
class Pending:
    """What ``run`` yields for a loop or a ``cond``: the stepper steps its body on the
    host and sets ``outs`` (the equation's outputs) before asking for the next step;
    compiling it whole as well would compile its body twice."""

    step: Step
    outs: list[Any] | None = None


class Ops:
    """The compiled functions of equations bound alone, shared by every jaxpr one
    stepper walks, and which (equation, input types) have been compiled alone."""

    def __init__(self, bind: Any) -> None:
        self.bind = bind
        self.fns: dict[Any, tuple[Any, Any]] = {}  # key -> (the eqn kept alive, fn)
        self.compiled: set[Any] = set()

    def fn(self, step: Step) -> Any:
        """The step's compiled function, given its inputs strongly typed (a weakly
        typed input, a literal, would otherwise compile the equation a second time:
        a primitive's computation does not depend on its inputs' weak types)."""
        key = _op_key(step.eqn)
        if key not in self.fns:
            eqn, bind = step.eqn, self.bind
            self.fns[key] = (eqn, jit(lambda *values: bind(eqn, list(values))))
        self.compiled.add(_compile_key(step))
        shared = self.fns[key][1]
        dtypes = [getattr(getattr(v, "aval", None), "dtype", None) for v in step.eqn.invars]

        def call(*values: Any) -> Any:
            return shared(*map(_strong, values, dtypes))

        return call

    def new(self, steps: list[Step]) -> int:
        """How many distinct compiles binding ``steps`` alone would cost."""
        return len({_compile_key(s) for s in steps} - self.compiled)


@dataclass(eq=False)
class Plan:
    flat: Flat
    chunks: list[Chunk]
    cut: str | None


def plan(flat: Flat, count: int, cut: str | None, ops: Ops) -> Plan:
    """The first ``count`` steps in chunks, each compiled whole or bound a step at a
    time, whichever compiles less: alone, each equation not yet compiled alone is a
    compile of its own; whole, a chunk of n equations costs about 1 + n / 7 such
    compiles (``WHOLE_STEP_SHARE``: measured on this CPU at XLA's level 0, a compile
    of one equation about 35 ms, a chunk's about 35 ms and 5-10 ms per equation, every
    equation's outputs an output). A loop or a ``cond`` is a chunk of its own,
    evaluated by the stepper (``Pending``)."""
    chunks: list[Chunk] = []
    run: list[Step] = []

    def close() -> None:
        if run:
            chunks.append(_chunk(list(run), ops))
            run.clear()

    for step in flat.steps[:count]:
        if step.eqn.primitive.name in HOST_PRIMITIVES:
            close()
            chunks.append(Chunk([step], host=True))
            continue
        run.append(step)
        if len(run) == COMPILED_SEGMENT_MAX:
            close()
    close()
    return Plan(flat, chunks, cut)


def _chunk(steps: list[Step], ops: Ops) -> Chunk:
    computing = [s for s in steps if not s.call]
    chunk = Chunk(steps)
    if ops.new(computing) > 1 + len(computing) * WHOLE_STEP_SHARE:
        made: set[int] = set()
        reads: dict[int, None] = {}
        for step in computing:
            for ref in step.ins:
                if isinstance(ref, int) and ref not in made:
                    reads[ref] = None
            made.update(step.outs)
        chunk.reads = list(reads)
        chunk.fn = jit(_chunk_function(computing, chunk.reads, ops.bind))
    else:
        chunk.ops = [ops.fn(s) for s in computing]
    return chunk


def _chunk_function(steps: list[Step], reads: list[int], bind: Any) -> Any:
    def evaluate(values: list[Any]) -> list[list[Any]]:
        env = dict(zip(reads, values, strict=True))
        outs = []
        for step in steps:
            got = bind(step.eqn, [r.value if isinstance(r, Const) else env[r] for r in step.ins])
            env.update(zip(step.outs, got, strict=True))
            outs.append(got)
        return outs

    return evaluate


def run(plan: Plan, consts: list[Any], args: list[Any]) -> Iterator[list[Any] | Pending]:
    """Each planned step's outputs, in order; a chunk is evaluated when its first step
    is asked for (a stepper stopped before it compiles nothing more)."""
    env: dict[int, Any] = dict(zip(plan.flat.inputs, [*consts, *args], strict=True))

    def read(ref: Any) -> Any:
        return ref.value if isinstance(ref, Const) else env[ref]

    for chunk in plan.chunks:
        if chunk.host:
            (step,) = chunk.steps
            pending = Pending(step)
            yield pending
            if pending.outs is None or len(pending.outs) != len(step.outs):
                raise RuntimeError(f"the stepper gave no outputs for {step.eqn.primitive.name}")
            env.update(zip(step.outs, pending.outs, strict=True))
            continue
        computing = [s for s in chunk.steps if not s.call]
        if chunk.fn is not None:
            results = chunk.fn([env[r] for r in chunk.reads])
            for step, got in zip(computing, results, strict=True):
                env.update(zip(step.outs, got, strict=True))
        else:
            for step, fn in zip(computing, chunk.ops, strict=True):
                got = list(fn(*[read(r) for r in step.ins]))
                env.update(zip(step.outs, got, strict=True))
        for step in chunk.steps:
            yield [read(r) for r in step.outs]
