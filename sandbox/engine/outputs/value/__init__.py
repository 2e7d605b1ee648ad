"""The ``value`` output: a pipeline's output as a pytree of described leaves."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import jax
import numpy as np

from sandbox.engine.core.output import Output, Results
from sandbox.engine.outputs.value.shortest import shortest_float64
from sandbox.protocol.limits import MAX_LABEL_CHARS, MAX_LEAF_DATA, MAX_LEAVES, MAX_VALUE_DATA

#: Leaves with at most this many elements carry their values in ``data``.
DATA_MAX_ELEMENTS = MAX_LEAF_DATA
#: The ``repr`` is as Python prints the output, up to this many characters: each of a
#: model's arrays prints in ~0.5 ms (NumPy's array2string, ~900 characters of a 64 x 64
#: array summarised), so 64 Ki characters cost a 100-layer MLP's gradient 74 arrays,
#: three quarters of its value event; the ``tree`` describes every leaf whatever this is
MAX_REPR = 16 * 1024


def leaf_array(leaf: Any) -> np.ndarray:
    """The bytes a leaf stands for; a PRNG key array by its key data (SPEC §2)."""
    dtype = getattr(leaf, "dtype", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        leaf = jax.random.key_data(leaf)
    return np.ascontiguousarray(np.asarray(leaf))


def _narrow_float(dtype: np.dtype) -> bool:
    return dtype.kind in "fV" and 0 < dtype.itemsize < 8  # float32, float16, bfloat16...


def plain_all(arrays: list[np.ndarray]) -> list[Any]:
    """Each array's values as JSON-able Python numbers (complex as [re, im]; None for
    float0); floats narrower than float64 in their own shortest form
    (value/shortest.py), those of one dtype converted together: a call costs ~0.2 ms
    whatever its size, and a gradient has a thousand small leaves."""
    out: list[Any] = [None] * len(arrays)
    narrow: dict[np.dtype, list[int]] = {}
    for i, values in enumerate(arrays):
        if _narrow_float(values.dtype):
            narrow.setdefault(values.dtype, []).append(i)
        elif values.dtype.itemsize == 0:  # float0: the "gradient" of an integer input
            out[i] = None
        elif values.dtype.kind == "c":
            out[i] = [[float(z.real), float(z.imag)] for z in values.reshape(-1)]
        elif values.dtype.kind in "biu":
            out[i] = values.reshape(-1).tolist()
        elif values.dtype.kind in "fV":
            out[i] = values.astype(np.float64).reshape(-1).tolist()
        else:
            out[i] = [str(v) for v in values.reshape(-1)]
    for where in narrow.values():
        flat = shortest_float64(np.concatenate([arrays[i].reshape(-1) for i in where]))
        start = 0
        for i in where:
            out[i] = flat[start : start + arrays[i].size].tolist()
            start += arrays[i].size
    return out


def summary(values: np.ndarray) -> dict[str, Any] | None:
    if (
        values.dtype.itemsize == 0
        or values.size == 0
        or (values.dtype.kind not in "biufc" and values.dtype.name != "bfloat16")
    ):
        return None
    data = values.astype(np.complex128 if values.dtype.kind == "c" else np.float64)
    if data.dtype.kind == "c":
        data = np.abs(data)
    finite = data[np.isfinite(data)]
    return {
        "min": float(np.min(finite)) if finite.size else math.nan,
        "max": float(np.max(finite)) if finite.size else math.nan,
        "mean": float(finite.mean()) if finite.size else math.nan,
        "nan_count": int(np.isnan(data).sum()),
        "inf_count": int(np.isinf(data).sum()),
    }


def _described(path: Any, leaf: Any) -> tuple[dict[str, Any], np.ndarray]:
    """A leaf's description but its ``data``, and the values that would be it."""
    values = leaf_array(leaf)
    dtype = getattr(leaf, "dtype", values.dtype)
    described: dict[str, Any] = {
        "path": jax.tree_util.keystr(path)[:MAX_LABEL_CHARS],
        # not values.shape: ascontiguousarray makes a 0-d array 1-d
        "shape": list(np.shape(leaf)),
        "dtype": str(dtype),
        "sha256": hashlib.sha256(values.tobytes()).hexdigest(),
        "summary": summary(values),
        "data": None,
    }
    return described, values


def _is_key(leaf: Any) -> bool:
    dtype = getattr(leaf, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


#: Outputs with more leaves than this have their ``repr`` made leaf by leaf, up to
#: MAX_REPR characters: a 1,000-layer model's gradient is 2,000 arrays, and printing
#: them all (NumPy's array2string, ~0.5 ms each) to keep the first 64 KiB was a
#: second or so of a run
BOUNDED_REPR_LEAVES = 64


class _LeftOut:
    """A leaf past the printed budget: ``repr`` shows it as ``…``."""

    def __repr__(self) -> str:
        return "…"


def bounded_repr(output: Any) -> tuple[str, int]:
    """``repr(output)`` as far as MAX_REPR characters, printing only the leaves
    needed for them.

    The tree is rebuilt with the leaves past the budget replaced by ``…`` and printed
    as it is (its containers print their own leaves, with whatever they add: Flax's
    State adds each array's size), so its first MAX_REPR characters are
    ``repr(output)``'s. A tree that cannot be rebuilt so is printed whole. Returns
    the text and how many leaves it leaves out."""
    leaves, treedef = jax.tree_util.tree_flatten(output)
    if len(leaves) <= BOUNDED_REPR_LEAVES:
        return repr(output), 0
    if _builtin_tree(output):  # lists, tuples and dicts: printed here, each leaf once
        printer = _Printer()
        return printer.show(output), printer.left_out
    kept: list[Any] = []
    used = 0
    for leaf in leaves:
        if used > MAX_REPR:
            kept.append(_LeftOut())
            continue
        used += len(repr(leaf))
        kept.append(leaf)
    left_out = sum(isinstance(leaf, _LeftOut) for leaf in kept)
    if not left_out:
        return repr(output), 0
    try:
        return repr(jax.tree_util.tree_unflatten(treedef, kept)), left_out
    except Exception:
        return repr(output), 0


def _builtin_tree(value: Any) -> bool:
    """Whether ``value`` is lists, tuples and dicts (Python's own, as ``repr`` prints
    them) down to its leaves."""
    if type(value) in (list, tuple):
        return all(_builtin_tree(item) for item in value)
    if type(value) is dict:
        return all(_builtin_tree(item) for item in value.values())
    return value is None or jax.tree_util.treedef_is_leaf(jax.tree_util.tree_structure(value))


class _Printer:
    """``repr`` of lists, tuples and dicts as Python prints them, each leaf printed
    until MAX_REPR characters are made, the rest shown as ``…`` (and counted)."""

    def __init__(self) -> None:
        self.used = 0
        self.left_out = 0

    def show(self, value: Any) -> str:
        if type(value) is list:
            return "[" + ", ".join(self.show(item) for item in value) + "]"
        if type(value) is tuple:
            items = [self.show(item) for item in value]
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        if type(value) is dict:
            return "{" + ", ".join(f"{k!r}: {self.show(v)}" for k, v in value.items()) + "}"
        if self.used > MAX_REPR:
            self.left_out += value is not None
            return repr(value) if value is None else "…"
        text = repr(value)
        self.used += len(text)
        return text


def value_event(output: Any, first_leaf: int = 0) -> dict[str, Any]:
    """The value event of ``output``, its ``tree`` a page of the leaves (in
    ``tree_flatten`` order) from ``first_leaf`` (the request's ``value_from``)."""
    leaves, _ = jax.tree_util.tree_flatten_with_path(output)
    text, left_out = bounded_repr(output)
    if left_out:
        text = text[:MAX_REPR] + f"\n… (the rest not shown: {left_out} of {len(leaves)} leaves)"
    elif len(text) > MAX_REPR:
        text = text[:MAX_REPR] + f"\n… ({len(text) - MAX_REPR} more characters)"
    # The event's bounds (sandbox/protocol/limits.py): MAX_LEAVES leaves from
    # ``first_leaf`` are described (``repr`` shows the rest), and their data stops at
    # MAX_VALUE_DATA elements, counted from ``first_leaf`` too. A page from past the
    # end is empty: ``total_leaves`` says where the value ends.
    tree, budget, data_stops_at = [], MAX_VALUE_DATA, None
    with_data: list[tuple[dict[str, Any], np.ndarray]] = []
    for index, (p, leaf) in enumerate(
        leaves[first_leaf : first_leaf + MAX_LEAVES], start=first_leaf
    ):
        described, values = _described(p, leaf)
        if budget < DATA_MAX_ELEMENTS:
            # every later leaf of the page is left without data too: a client asks
            # for a page from here to see them
            data_stops_at = index if data_stops_at is None else data_stops_at
        elif values.size <= DATA_MAX_ELEMENTS:
            with_data.append((described, values))
            budget -= 0 if values.dtype.itemsize == 0 else values.size
        tree.append(described)
    for (described, _), data in zip(with_data, plain_all([v for _, v in with_data]), strict=True):
        described["data"] = data
    return {
        "type": "value",
        "repr": text,
        "tree": tree,
        "first_leaf": first_leaf,
        "total_leaves": len(leaves),
        "data_stops_at": data_stops_at,
    }


def value_events(r: Results) -> dict[str, Any]:
    return value_event(r.value, r.pipeline.run.request.value_from)


OUTPUT = Output("executed", "describing the value", value_events)
