"""The benchmarks' statistics beyond the standard library's: one percentile, by
nearest rank over the sorted samples, so a p95 is a time some run really took (never
interpolated between two); and one spread (the median and the range) as every
benchmark prints it."""

from __future__ import annotations

import statistics
from collections.abc import Iterable


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q`` quantile (0 to 1) of ``values`` by nearest rank; no values: ValueError."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no samples to take a percentile of")
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def spread(values: Iterable[float], digits: int = 3) -> dict[str, float]:
    """The median and the range of ``values``, each rounded to ``digits``; no values:
    ValueError (statistics' own)."""
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered), digits),
        "min": round(ordered[0], digits),
        "max": round(ordered[-1], digits),
    }
