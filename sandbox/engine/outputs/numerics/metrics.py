"""How far a value is from its float64 shadow: relative error and ulps, per element,
summarised as a maximum and a median.

The relative error of an element is ``|y - y*| / max(|y*|, tiny)``, ``y*`` the shadow
and ``tiny`` the smallest normal number of the program's dtype: an underflow that the
dtype cannot hold anyway (float32's ``exp(-200) == 0`` against float64's ``1e-87``)
is then no error, while a wrong value near zero still is. Its error in ulps divides by
the spacing of the program's dtype at ``y*`` (subnormals spaced as the smallest
normal's exponent says). Non-finite elements are equal when both sides hold the same
one; any other mismatch (an overflow to ``inf`` that float64 did not make, a NaN the
shadow has not) is an infinite error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Errors:
    """One value's error summary (relative, and in ulps of its dtype)."""

    max: float
    median: float
    max_ulp: float
    median_ulp: float
    #: normwise: the largest difference over the largest magnitude of the shadow (what
    #: a matrix product's error is usually quoted as: near-zero elements weigh nothing)
    norm: float

    def as_event(self) -> dict[str, Any]:
        return {k: measure(v) for k, v in self.__dict__.items()}

    @staticmethod
    def fold(a: Errors | None, b: Errors | None) -> Errors | None:
        """Two summaries as one (a loop's iterations): the maxima's max, and the
        larger median (a bound on the median of every element, not the median)."""
        if a is None or b is None:
            return a or b
        return Errors(
            *(max(x, y) for x, y in zip(a.__dict__.values(), b.__dict__.values(), strict=True))
        )


def measure(value: float) -> float | str:
    """A figure as the protocol writes it (NaN and infinities named: not JSON)."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return float(f"{value:.4g}")


def inexact(dtype: Any) -> bool:
    """Whether a dtype holds floating-point numbers (bfloat16 and float8 included)."""
    import jax.numpy as jnp

    try:
        return bool(jnp.issubdtype(dtype, jnp.inexact))
    except TypeError:  # an extended dtype (PRNG keys)
        return False


def _as_f64(value: Any) -> np.ndarray:
    data = np.asarray(value)
    if data.dtype.kind == "c":
        return data.astype(np.complex128)
    return data.astype(np.float64)


def elementwise(low: Any, high: Any, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per element: the relative error of ``low`` against ``high`` and its error in
    ulps of ``dtype`` (both float64, flattened)."""
    import jax.numpy as jnp

    info = jnp.finfo(dtype)
    lo, hi = _as_f64(low).ravel(), _as_f64(high).ravel()
    if lo.dtype.kind == "c" or hi.dtype.kind == "c":  # a complex value: by modulus
        diff = np.abs(lo - hi)
        mag = np.abs(hi)
        lo_ok, hi_ok = np.isfinite(lo), np.isfinite(hi)
        same = lo_ok & hi_ok
        equal_bad = (~lo_ok & ~hi_ok) & (np.isnan(lo) == np.isnan(hi))
    else:
        lo_ok, hi_ok = np.isfinite(lo), np.isfinite(hi)
        same = lo_ok & hi_ok
        with np.errstate(invalid="ignore"):
            diff = np.where(same, np.abs(lo - hi), 0.0)
        mag = np.abs(np.where(hi_ok, hi, 0.0))
        # both NaN, or the same infinity: equal
        equal_bad = (~lo_ok & ~hi_ok) & ((np.isnan(lo) & np.isnan(hi)) | (lo == hi))
    tiny = float(info.tiny)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rel = diff / np.maximum(mag, tiny)
        exponent = np.floor(np.log2(np.maximum(mag, tiny)))
        spacing = np.exp2(np.maximum(exponent, info.minexp) - info.nmant)
        ulp = diff / spacing
    bad = ~same & ~equal_bad
    rel = np.where(same, rel, np.where(bad, np.inf, 0.0))
    ulp = np.where(same, ulp, np.where(bad, np.inf, 0.0))
    return rel, ulp


def errors(low: Any, high: Any, dtype: Any) -> Errors | None:
    """The summary of ``low`` against its shadow ``high`` (None: no elements)."""
    rel, ulp = elementwise(low, high, dtype)
    if rel.size == 0:
        return None
    lo, hi = _as_f64(low).ravel(), _as_f64(high).ravel()
    both = np.isfinite(lo) & np.isfinite(hi)
    if both.all():
        scale = float(np.abs(hi).max())
        worst = float(np.abs(lo - hi).max())
        norm = worst / scale if scale > 0 else (0.0 if worst == 0 else math.inf)
    else:  # a non-finite mismatch somewhere: as the elementwise maximum says
        norm = float(rel.max())
    return Errors(
        float(rel.max()), float(np.median(rel)), float(ulp.max()), float(np.median(ulp)), norm
    )


def mismatches(low: Any, high: Any) -> int:
    """Elements of an integer or boolean value where the shadow computed another one
    (a comparison flipped, another index picked)."""
    a, b = np.asarray(low), np.asarray(high)
    if a.shape != b.shape:
        return int(a.size)
    return int(np.count_nonzero(a != b))
