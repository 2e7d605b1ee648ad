"""The benchmarks' one percentile: nearest rank over the sorted samples, so a p95 is
a time some run really took (never interpolated between two)."""

from __future__ import annotations

from collections.abc import Iterable


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q`` quantile (0 to 1) of ``values`` by nearest rank; no values: ValueError."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no samples to take a percentile of")
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
