"""Errors in user code, as one ``error`` event with a plain-words hint.

A table of the JAX sharp bits, keyed by exception class and a message pattern,
each with a hint and the link to JAX's own page for it. The line is the innermost
frame of the user's code in the traceback (or in the chain of causes: errors raised
while lowering carry the user's stack as their cause).
"""

from __future__ import annotations

import re
import traceback as tb_module
from dataclasses import dataclass
from typing import Any

from sandbox.protocol.requests import SNIPPET_FILENAME

MAX_MESSAGE = 8 * 1024
#: an exception class's name as the event carries it (user code names its classes)
MAX_KIND = 200
ERRORS_PAGE = "https://docs.jax.dev/en/latest/errors.html#jax.errors."
GOTCHAS = "https://docs.jax.dev/en/latest/notebooks/Common_Gotchas_in_JAX.html"
SHARDING_DOCS = "https://docs.jax.dev/en/latest/"
#: With Explicit mesh axes, an operation that cannot decide its result's sharding.
EXPLICIT_SHARDING_HINT = (
    "With Explicit mesh axes the sharding is part of each array's type, and this operation "
    "cannot decide the result's sharding by itself (for a matmul: the contracted dimension is "
    "sharded on both sides). Say it with `out_sharding=P(...)` on the operation, reshard an "
    "operand with `jax.reshard`, or make the axis `auto`.",
    SHARDING_DOCS + "notebooks/explicit-sharding.html",
)


@dataclass(frozen=True)
class Hint:
    kind: str  # exception class name ("" matches any)
    pattern: str  # regex searched in the message ("" matches any)
    hint: str
    doc_url: str


HINTS: tuple[Hint, ...] = (
    Hint(
        "TracerBoolConversionError",
        "",
        "Python `if`/`while`/`and`/`or` need a concrete True or False, but under a transformation "
        "the value is a tracer with no value yet. Use `jnp.where` or `lax.select` for values, "
        "`lax.cond`/`lax.while_loop` for control flow, or mark the argument static "
        "(`static_argnums`) if it really is a constant.",
        ERRORS_PAGE + "TracerBoolConversionError",
    ),
    Hint(
        "ConcretizationTypeError",
        "",
        "This operation needs a concrete value, but it got a traced one. Values that decide shapes, "
        "axes or Python control flow must be static: pass them with `static_argnums`, or use the "
        "fixed-size form of the function (e.g. `jnp.nonzero(x, size=...)`, 3-argument `jnp.where`).",
        ERRORS_PAGE + "ConcretizationTypeError",
    ),
    Hint(
        "TracerIntegerConversionError",
        "",
        "A traced value was used as a Python integer (`range(n)`, list indexing). Use "
        "`lax.fori_loop`, or make the value static with `static_argnums`.",
        ERRORS_PAGE + "TracerIntegerConversionError",
    ),
    Hint(
        "TracerArrayConversionError",
        "",
        "NumPy (`np.*`) was called on a traced value; NumPy cannot see inside a transformation. "
        "Use the `jnp.*` function of the same name, or `jax.pure_callback` for host code.",
        ERRORS_PAGE + "TracerArrayConversionError",
    ),
    Hint(
        "NonConcreteBooleanIndexError",
        "",
        "Boolean masks give arrays whose size depends on the data, which `jit` cannot compile. "
        "Keep the shape fixed: `jnp.where(mask, x, 0)`, or `jnp.nonzero(mask, size=N)`.",
        ERRORS_PAGE + "NonConcreteBooleanIndexError",
    ),
    Hint(
        "UnexpectedTracerError",
        "",
        "A traced value escaped the function it belongs to (stored in a global, a list or `self`). "
        "JAX functions must be pure: return the values you need instead of saving them.",
        ERRORS_PAGE + "UnexpectedTracerError",
    ),
    Hint(
        "KeyReuseError",
        "",
        "A PRNG key was used twice. Split it with `jax.random.split` and use each key once.",
        ERRORS_PAGE + "KeyReuseError",
    ),
    Hint(
        "TypeError",
        r"Gradient only defined for scalar-output functions",
        "`grad` differentiates functions that return one scalar. Reduce the output "
        "(e.g. `jnp.sum(...)`), or use `jacrev`/`jacfwd` for the full Jacobian.",
        "https://docs.jax.dev/en/latest/_autosummary/jax.grad.html",
    ),
    Hint(
        "TypeError",
        r"grad requires real- or complex-valued inputs",
        "Gradients are taken with respect to float inputs: pass `3.0` rather than `3`, or set "
        "`allow_int` on the transform.",
        "https://docs.jax.dev/en/latest/_autosummary/jax.grad.html",
    ),
    Hint(
        "TypeError",
        r"immutable|does not support item assignment",
        "JAX arrays are immutable. Instead of `x[i] = y`, write `x = x.at[i].set(y)` "
        "(or `.add`, `.mul`, ...).",
        GOTCHAS + "#in-place-updates",
    ),
    Hint(
        "TypeError",
        r"Shapes must be 1D sequences of concrete values",
        "A shape was computed from a traced value. Shapes must be known when tracing: make the "
        "size an argument with `static_argnums`.",
        GOTCHAS + "#dynamic-shapes",
    ),
    Hint(
        "IndexError",
        r"slice indices must have static",
        "Slices with traced bounds would give data-dependent shapes. Use "
        "`lax.dynamic_slice(x, (start,), (size,))` with a static size.",
        GOTCHAS + "#dynamic-shapes",
    ),
    Hint(
        "TypeError",
        r"promot|implicit dtype promotion",
        "Under strict dtype promotion JAX will not mix these dtypes silently. Cast one side "
        "explicitly, e.g. `x.astype(jnp.float32)`.",
        "https://docs.jax.dev/en/latest/type_promotion.html",
    ),
    Hint(
        "ValueError",
        r"vmap got inconsistent sizes",
        "The arguments mapped by `vmap` have different sizes along their mapped axes. Check "
        "`in_axes` and the arguments' shapes.",
        "https://docs.jax.dev/en/latest/_autosummary/jax.vmap.html",
    ),
    Hint(
        "ValueError",
        r"Non-hashable static arguments",
        "Static arguments are hashed to cache compilations: use a tuple instead of a list, or a "
        "frozen dataclass instead of a dict.",
        "https://docs.jax.dev/en/latest/_autosummary/jax.jit.html",
    ),
    Hint("ShardingTypeError", "", *EXPLICIT_SHARDING_HINT),
    # JAX before 0.6 raised the same refusal as a ValueError
    Hint("", r"ambiguous how the output should be sharded", *EXPLICIT_SHARDING_HINT),
    Hint(
        "",
        r"evenly divide|should be divisible by|is not divisible",
        "A dimension split over mesh axes must be a multiple of their size: an axis of 2 "
        "devices splits a dimension of 8 into blocks of 4, not a dimension of 7. Change the "
        "array's shape or the PartitionSpec (`null` leaves a dimension whole).",
        SHARDING_DOCS + "sharded-computation.html",
    ),
    Hint(
        "",
        r"Number of devices \d+ must be >= the product of mesh_shape|"
        r"mesh_shape .* devices|Mesh requires|got \d+ devices",
        "The mesh needs as many devices as the product of its shape. Raise `devices` in the "
        "request (on CPU they are virtual devices), or shrink the mesh.",
        SHARDING_DOCS + "sharded-computation.html",
    ),
    Hint(
        "",
        r"Resource axis: .* is not found in mesh|not found in mesh|unknown axis name",
        "A PartitionSpec or collective names an axis the mesh does not have. Use the mesh's "
        "axis_names.",
        SHARDING_DOCS + "sharded-computation.html",
    ),
    Hint(
        "",
        r"in_specs passed to shard_map.*does not match",
        "With Explicit axes, shard_map's in_specs must be how the arguments are already "
        "sharded: set in_shardings to the same specs, reshard the arguments with `jax.reshard`, "
        "or leave in_specs out to take the arguments' own.",
        SHARDING_DOCS + "notebooks/shard_map.html",
    ),
    Hint(
        "ShardingUnsupported",
        "",
        "This sharding feature is newer than the JAX version this run uses. Pick a newer "
        "`jax_version` (GET /api/v1/backends lists them), or leave the feature out.",
        SHARDING_DOCS + "sharded-computation.html",
    ),
    Hint(
        "",
        r"requires \d+ replicas|devices are available|compiling computation that requires",
        "pmap needs one device per element of the mapped axis. Raise `devices` in the request "
        "(on CPU they are virtual devices) or shrink the leading axis.",
        "https://docs.jax.dev/en/latest/migrate_pmap.html",
    ),
    Hint(
        "FloatingPointError",
        r"nan|inf",
        "`jax_debug_nans`/`jax_debug_infs` stopped at the first operation that made a NaN or an "
        "infinity; the line marked is where it happened.",
        GOTCHAS + "#debugging-nans-and-infs",
    ),
    Hint(
        "TypeError",
        r"dot_general requires|incompatible shapes|Incompatible shapes",
        "The operands' shapes do not fit together. Compare them in the jaxpr, where every value's "
        "shape is printed.",
        GOTCHAS,
    ),
    Hint(
        "JaxRuntimeError",
        r"CompileTimeHbmOom|exceeds available HBM",
        "The program does not fit in one TPU device's HBM (the compiler's figures are in the "
        "message). Shard its largest arrays over more devices (`in_shardings`, a larger `mesh` "
        "or `tpu_topology`), use a narrower dtype, or recompute activations (`checkpoint`).",
        SHARDING_DOCS + "sharded-computation.html",
    ),
    Hint(
        "JaxRuntimeError",
        r"RESOURCE_EXHAUSTED",
        "The device ran out of memory. Try smaller shapes, or look at the memory figures in the "
        "cost pane.",
        ERRORS_PAGE + "JaxRuntimeError",
    ),
    Hint(
        "SyntaxError",
        "",
        "The code is not valid Python; the line marked is where the parser stopped.",
        "https://docs.python.org/3/reference/grammar.html",
    ),
    Hint(
        "IndentationError",
        "",
        "The code's indentation is inconsistent at the line marked.",
        "https://docs.python.org/3/reference/lexical_analysis.html#indentation",
    ),
    Hint(
        "EntryError",
        "",
        "Set `entry` to the name of the function to transform (default `f`).",
        "https://docs.jax.dev/en/latest/key-concepts.html#transformations",
    ),
)


class UserError(Exception):
    """An exception raised by the user's code (or by JAX on its behalf) in a stage."""

    def __init__(self, stage: str, exc: BaseException) -> None:
        super().__init__(stage)
        self.stage, self.exc = stage, exc


def find_hint(kind: str, message: str, mro: tuple[str, ...] = ()) -> Hint | None:
    names = (kind, *mro)
    for hint in HINTS:
        if hint.kind and hint.kind not in names:
            continue
        if hint.pattern and not re.search(hint.pattern, message, re.IGNORECASE):
            continue
        return hint
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def user_line(exc: BaseException) -> int | None:
    """The innermost line of the user's code where ``exc`` (or its causes) happened."""
    if isinstance(exc, SyntaxError) and exc.filename == SNIPPET_FILENAME:
        return exc.lineno
    for link in _chain(exc):
        lines = [
            f.lineno
            for f in tb_module.extract_tb(link.__traceback__)
            if f.filename == SNIPPET_FILENAME
        ]
        if lines:
            return lines[-1]
    return None


def error_event(stage: str, exc: BaseException) -> dict[str, Any]:
    kind = type(exc).__name__[:MAX_KIND]
    message = str(exc)
    if isinstance(exc, SyntaxError) and exc.msg:
        message = exc.msg if exc.filename != "<args>" else f"in args: {exc.msg}"
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE] + f"\n… ({len(message) - MAX_MESSAGE} more characters)"
    mro = tuple(cls.__name__ for cls in type(exc).__mro__)
    hint = find_hint(kind, message, mro)
    return {
        "type": "error",
        "stage": stage,
        "kind": kind,
        "message": message,
        "line": user_line(exc),
        "hint": hint.hint if hint else None,
        "doc_url": hint.doc_url if hint else None,
    }


def engine_error_event(what: str, exc: BaseException) -> dict[str, Any]:
    """A failure of jaxplay itself: said as such, never as a raw traceback."""
    return {
        "type": "error",
        "stage": "engine",
        "kind": "EngineError",
        "message": f"jaxplay failed while {what} ({type(exc).__name__}: {str(exc)[:500]}). "
        "This is a bug in jaxplay, not in your code.",
        "line": None,
        "hint": "Other outputs of this run are still valid. Please report this with the snippet.",
        "doc_url": None,
    }
