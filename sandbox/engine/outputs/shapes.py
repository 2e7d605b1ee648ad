"""The shape of each expression of the user's code, as traced (the ``shapes`` output).

Every equation JAX records knows where in the user's code it was made: its
``source_info`` traceback's innermost frame in the snippet gives a line and a column
span (Python's ``co_positions``; the columns are UTF-8 byte offsets there, turned into
character offsets here). One row per span, from the last equation made at that span:
the expression's value (``jnp.mean(x)``'s ``div``, not its ``reduce_sum``). Equations
inside nested jaxprs (a jitted helper, a ``scan`` body) come before the equation that
holds them, so a call's own span shows the call's value.

What is traced (``source``):

- ``entry``: the entry function itself, traced on the arguments it receives inside
  the pipeline. Differentiation and ``jit`` do not change them; under ``vmap`` they are
  the per-example arguments (each ``in_axes`` axis removed), so each row's ``shape`` is
  the per-example shape the code is written for. The pipeline's own jaxpr (batched) then
  gives ``batched_shape`` and ``batch_dims``: where removing the vmapped sizes from the
  batched shape gives the per-example one, exactly one way. Where several ways fit (a
  ``[5, 5]`` batched by 5), ``batch_dims`` is left out rather than guessed.
- ``pipeline``: with ``pmap``, ``shard_map``, ``smap`` or ``reshard`` in the pipeline, or
  ``in_axes`` given per leaf of a pytree, the pipeline's traced jaxpr, its forward
  equations only (a backward pass's equations carry the same spans: their shapes are
  cotangents'); a ``shard_map`` body's shapes are per device, as traced.

The entry's trace runs the user's Python again: what it prints then is not shown.
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import linecache
from collections.abc import Iterator
from typing import Any

from sandbox.engine.core.jaxpr_walk import sub_jaxprs
from sandbox.engine.core.output import Output, Results
from sandbox.protocol.limits import MAX_EVENT_NODES, MAX_SHAPE_SPANS
from sandbox.protocol.requests import SNIPPET_FILENAME

#: steps whose function is called with the pipeline's own arguments
SAME_ARGS = frozenset(
    {
        "jit", "grad", "value_and_grad", "jacfwd", "jacrev", "hessian", "checkpoint", "jvp",
        "vjp", "linearize", "linear_transpose", "checkify",
    }
)  # fmt: skip
#: JSON values one shapes event may hold, well under the event line's bound
#: (MAX_EVENT_NODES): many spans of wide multi-output equations are cut before it
MAX_EVENT_VALUES = MAX_EVENT_NODES * 2 // 3
#: the most dimensions searched for batch positions (combinations grow fast)
MAX_BATCH_SEARCH_RANK = 16
Span = tuple[int, int, int, int]


class NotPerExample(Exception):
    """The per-example arguments cannot be worked out from the request's options."""


def shapes_event(results: Results) -> dict[str, Any]:
    pipeline = results.pipeline
    f, args, pipe = pipeline.run.entry, pipeline.run.args, pipeline.pipe
    transforms = pipeline.transforms
    names = [t.name for t in transforms]
    notes: list[str] = []
    rows: dict[Span, dict[str, Any]] | None = None
    source = "entry"
    if all(n in SAME_ARGS or n == "vmap" for n in names):
        try:
            example, sizes = per_example_args(args, transforms, pipe.static_argnums)
        except NotPerExample as exc:
            notes.append(f"traced the pipeline: {exc}")
        else:
            try:
                closed = _trace_quietly(f, pipe.static_argnums, example)
            except Exception as exc:  # e.g. a collective over vmap's axis_name, alone
                notes.append(
                    f"traced the pipeline: the entry alone: {type(exc).__name__}: {exc}"[:1000]
                )
            else:
                rows = span_rows(closed.jaxpr)
            if rows is not None and sizes and results.closed is not None:
                ambiguous = add_batch_dims(
                    rows, span_rows(results.closed.jaxpr, forward=True), sizes
                )
                if ambiguous:
                    notes.append(
                        f"{ambiguous} batched shape(s) fit the per-example shape more than one "
                        "way: their batch dimensions are not given"
                    )
    if rows is None:
        source = "pipeline"
        rows = span_rows(results.closed.jaxpr, forward=True)
    spans = sorted(
        rows.values(), key=lambda r: (r["line"], r["col"], -r["end_line"], -r["end_col"])
    )
    kept, nodes = 0, 0
    for row in spans[:MAX_SHAPE_SPANS]:
        nodes += _nodes(row)
        if nodes > MAX_EVENT_VALUES:
            break
        kept += 1
    left_out = len(spans) - kept
    if left_out:
        notes.append(f"{left_out} more spans not shown")
        spans = spans[:kept]
    return {
        "type": "shapes",
        "source": source,
        "spans": spans,
        "notes": notes,
        "spans_left_out": left_out,
    }


def _nodes(row: dict[str, Any]) -> int:
    """About how many JSON values a row is (the event line's bound counts them)."""
    lists = [row["shape"], row.get("batched_shape") or (), row.get("batch_dims") or ()]
    more = row.get("more") or ()
    return 2 * len(row) + sum(map(len, lists)) + sum(3 + len(o["shape"]) for o in more)


def _trace_quietly(f: Any, static: tuple[int, ...], args: tuple[Any, ...]) -> Any:
    import jax

    # what the user's code prints while traced once more would show twice
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return jax.make_jaxpr(f, static_argnums=static)(*args)


# --- the arguments the entry receives -------------------------------------------------


def per_example_args(
    args: tuple[Any, ...], transforms: list[Any], static: tuple[int, ...]
) -> tuple[tuple[Any, ...], list[int]]:
    """The entry's arguments inside the pipeline, and the size each ``vmap`` maps over
    (outermost first). Mapped arguments become ``ShapeDtypeStruct``s."""
    sizes: list[int] = []
    for transform in reversed(transforms):  # the last step is the outermost
        if transform.name != "vmap":
            continue
        in_axes = _tuple(transform.options.get("in_axes", 0))
        size = transform.options.get("axis_size")
        args, found = _unmap(args, in_axes, static)
        size = size if size is not None else found
        if size is None:
            raise NotPerExample("a vmap without a mapped argument or axis_size")
        sizes.append(int(size))
    return args, sizes


def _tuple(value: Any) -> Any:
    return tuple(_tuple(v) for v in value) if isinstance(value, list) else value


def _unmap(
    args: tuple[Any, ...], in_axes: Any, static: tuple[int, ...]
) -> tuple[tuple[Any, ...], int | None]:
    import jax

    dynamic = [i for i in range(len(args)) if i not in static]
    if isinstance(in_axes, tuple):
        if len(in_axes) != len(dynamic) or not all(
            a is None or isinstance(a, int) for a in in_axes
        ):
            raise NotPerExample("in_axes per leaf of a pytree")
        axes = dict(zip(dynamic, in_axes, strict=True))
    elif in_axes is None or isinstance(in_axes, int):
        axes = dict.fromkeys(dynamic, in_axes)
    else:
        raise NotPerExample(f"in_axes {in_axes!r}")
    size: int | None = None

    def cut(axis: int | None, leaf: Any) -> Any:
        nonlocal size
        if axis is None:
            return leaf
        shape = tuple(getattr(leaf, "shape", ()))
        if not shape:
            raise NotPerExample("a mapped argument without dimensions")
        axis %= len(shape)
        size = shape[axis] if size is None else size
        sharding = None  # a per-example argument has no placement of its own
        return jax.ShapeDtypeStruct(shape[:axis] + shape[axis + 1 :], leaf.dtype, sharding=sharding)

    out = tuple(
        jax.tree_util.tree_map(functools.partial(cut, axes[i]), arg) if i in axes else arg
        for i, arg in enumerate(args)
    )
    return out, size


# --- the spans of a jaxpr -------------------------------------------------------------


def span_rows(jaxpr: Any, *, forward: bool = False) -> dict[Span, dict[str, Any]]:
    """One row per span of the user's code, from the last equation made there;
    ``forward``: leave out the equations of a backward pass (a ``transpose`` in their
    name stack)."""
    rows: dict[Span, dict[str, Any]] = {}
    for eqn in _equations(jaxpr):
        if forward and _is_backward(eqn):
            continue
        span = eqn_span(eqn)
        if span is None or not eqn.outvars:
            continue
        outs = [_describe(v.aval) for v in eqn.outvars]
        if any(o is None for o in outs):
            continue
        row: dict[str, Any] = {
            "line": span[0],
            "col": span[1],
            "end_line": span[2],
            "end_col": span[3],
            "primitive": str(eqn.primitive)[:256],
            **outs[0],  # type: ignore[dict-item]
        }
        if len(outs) > 1:
            row["more"] = [{"shape": o["shape"], "dtype": o["dtype"]} for o in outs[1:17]]  # type: ignore[index]
        rows.pop(span, None)  # the last one made there, in its place in the order
        rows[span] = row
    return rows


def _equations(jaxpr: Any, depth: int = 0) -> Iterator[Any]:
    """Every equation, those of the jaxprs an equation holds just before it."""
    for eqn in jaxpr.eqns:
        if depth < 32:
            for sub in sub_jaxprs(eqn.params):
                yield from _equations(sub, depth + 1)
        yield eqn


def _is_backward(eqn: Any) -> bool:
    stack = getattr(eqn.source_info.name_stack, "stack", ())
    return any(getattr(t, "name", None) == "transpose" for t in stack)


def _user_frames(source_info: Any) -> list[Any]:
    """The equation's frames in user code, innermost first (a traceback's from 0.5 on;
    0.4.x's ``user_frames`` takes the SourceInfo itself)."""
    from jax._src import source_info_util

    traceback = getattr(source_info, "traceback", None)
    if traceback is None:
        return []
    try:
        return list(source_info_util.user_frames(traceback))
    except (AttributeError, TypeError):
        return list(source_info_util.user_frames(source_info))


def eqn_span(eqn: Any) -> Span | None:
    """(line, col, end_line, end_col) of the innermost snippet frame, columns counted in
    characters from 0 (end exclusive); None where the frame has no columns."""
    for frame in _user_frames(eqn.source_info):
        if frame.file_name != SNIPPET_FILENAME:
            continue
        line, end_line = int(frame.start_line), int(getattr(frame, "end_line", -1))
        col, end_col = (
            int(getattr(frame, "start_column", -1)),
            int(getattr(frame, "end_column", -1)),
        )
        if min(line, end_line, col, end_col) < 0 or line < 1 or (end_line, end_col) < (line, col):
            return None
        return line, _chars(line, col), end_line, _chars(end_line, end_col)
    return None


def _chars(line: int, byte_offset: int) -> int:
    """A UTF-8 byte offset into a snippet line as a character offset."""
    text = linecache.getline(SNIPPET_FILENAME, line)
    if text.isascii():
        return byte_offset
    return len(text.encode()[:byte_offset].decode(errors="ignore"))


def _describe(aval: Any) -> dict[str, Any] | None:
    shape = getattr(aval, "shape", None)
    dtype = getattr(aval, "dtype", None)
    if shape is None or dtype is None or not all(isinstance(d, int) for d in shape):
        return None  # a token, or a symbolic shape
    out: dict[str, Any] = {"shape": list(shape), "dtype": str(dtype)[:256]}
    sharding = _sharding(aval)
    if sharding is not None:
        out["sharding"] = sharding
    return out


def _sharding(aval: Any) -> str | None:
    """The PartitionSpec of a value traced under a mesh (from JAX 0.5's typed shardings)."""
    sharding = getattr(aval, "sharding", None)
    mesh = getattr(sharding, "mesh", None)
    if mesh is None or getattr(mesh, "empty", True):
        return None
    return str(getattr(sharding, "spec", sharding))[:256]


# --- batch dimensions -----------------------------------------------------------------


def add_batch_dims(
    rows: dict[Span, dict[str, Any]], batched: dict[Span, dict[str, Any]], sizes: list[int]
) -> int:
    """Give each row its batched shape and batch dimensions, where the pipeline's jaxpr
    has the same span and exactly one way to remove ``sizes`` fits; returns how many
    fitted more than one way."""
    ambiguous = 0
    for span, row in rows.items():
        other = batched.get(span)
        if other is None:
            continue
        dims = batch_positions(other["shape"], row["shape"], sizes)
        if dims is None:
            continue
        row["batched_shape"] = other["shape"]
        if len(dims) == 1:
            row["batch_dims"] = list(dims[0])
        else:
            ambiguous += 1
    return ambiguous


def batch_positions(
    batched: list[int], example: list[int], sizes: list[int]
) -> list[tuple[int, ...]] | None:
    """Every set of positions in ``batched`` holding ``sizes`` (in any order) whose
    removal leaves ``example``; None where none does."""
    n = len(sizes)
    if len(batched) != len(example) + n or len(batched) > MAX_BATCH_SEARCH_RANK:
        return None
    fits = []
    for positions in itertools.combinations(range(len(batched)), n):
        kept = [d for i, d in enumerate(batched) if i not in positions]
        if kept == example and sorted(batched[i] for i in positions) == sorted(sizes):
            fits.append(positions)
    return fits or None


OUTPUT = Output("traced", "finding the shape of each expression", shapes_event)
