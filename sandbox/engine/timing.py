"""Honest timings: warm-up, ``block_until_ready``, enough repetitions to be stable.

Like ``timeit``'s autorange, each measurement times a batch of calls long enough to
be well above the clock's resolution; batches repeat until the time budget is spent.
Per-call times are reported as median, min and interquartile range.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import jax

#: a batch lasts at least this long
MIN_BATCH_S = 0.005
#: at least this many batches, when the budget allows
MIN_BATCHES = 5
#: at least this many when the budget allows them but not MIN_BATCHES: a call
#: slower than the budget allows five of (a big program, op by op) gets three, and
#: one whose warm-up alone spent the budget (an eager ``scan`` compiles its body
#: there) gets one, so that timing costs about what the call costs, not five times
FEWEST_BATCHES = 3
MAX_RUNS = 100_000
#: The budget is a ceiling: once this many batches agree to within SETTLED_SPREAD
#: (interquartile range over median), more would not change the answer, and the run
#: ends sooner. A noisy function still gets the whole budget.
SETTLED_BATCHES = 15
SETTLED_SPREAD = 0.02


def _call(fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    jax.block_until_ready(fn(*args))


def _fewest(took: float, budget_s: float, deadline: float) -> int:
    """The batches a measurement takes at least: MIN_BATCHES when they fit the
    budget, else FEWEST_BATCHES, or one when the budget is spent already."""
    if took * MIN_BATCHES <= budget_s:
        return MIN_BATCHES
    return FEWEST_BATCHES if time.perf_counter() < deadline else 1


def measure_fresh(
    fn: Callable[..., Any], fresh: Callable[[], tuple[Any, ...]], budget_s: float
) -> dict[str, Any]:
    """Time calls that consume their arguments (donated buffers): each call gets
    fresh copies, made before its clock starts, so batches are of one call."""
    deadline = time.perf_counter() + budget_s
    start = time.perf_counter()
    _call(fn, fresh())
    fewest = _fewest(time.perf_counter() - start, budget_s, deadline)
    per_call: list[float] = []
    while len(per_call) < MAX_RUNS and (len(per_call) < fewest or time.perf_counter() < deadline):
        args = fresh()
        start = time.perf_counter()
        _call(fn, args)
        per_call.append(time.perf_counter() - start)
    return _summary(per_call, runs=len(per_call))


def measure(
    fn: Callable[..., Any], args: tuple[Any, ...], budget_s: float, *, warm: bool = False
) -> dict[str, Any]:
    """Time ``fn(*args)``; the first call (warm-up) is not counted. ``warm``: ``fn``
    has been called on these arguments already in this process (the run's
    ``execute`` stage called this executable), so no warm-up call is made: on a big
    program one call is a good share of the run."""
    deadline = time.perf_counter() + budget_s
    if not warm:
        _call(fn, args)
    number = 1
    while True:  # autorange: grow the batch until it lasts MIN_BATCH_S
        start = time.perf_counter()
        for _ in range(number):
            _call(fn, args)
        took = time.perf_counter() - start
        if took >= MIN_BATCH_S or number >= MAX_RUNS // MIN_BATCHES:
            break
        number *= 2 if took * 10 >= MIN_BATCH_S else 10
    per_call = [took / number]
    runs = number
    fewest = _fewest(took, budget_s, deadline)
    while runs + number <= MAX_RUNS:
        if len(per_call) >= fewest and time.perf_counter() + took > deadline:
            break
        if len(per_call) >= SETTLED_BATCHES and _settled(per_call):
            break
        start = time.perf_counter()
        for _ in range(number):
            _call(fn, args)
        per_call.append((time.perf_counter() - start) / number)
        runs += number
    return _summary(per_call, runs)


def _settled(per_call: list[float]) -> bool:
    quartiles = statistics.quantiles(per_call, n=4)
    return quartiles[2] - quartiles[0] <= SETTLED_SPREAD * statistics.median(per_call)


def _summary(per_call: list[float], runs: int) -> dict[str, Any]:
    quartiles = statistics.quantiles(per_call, n=4) if len(per_call) > 1 else [per_call[0]] * 3
    return {
        "runs": runs,
        "batches": len(per_call),
        "median_ms": statistics.median(per_call) * 1000,
        "min_ms": min(per_call) * 1000,
        "iqr_ms": (quartiles[2] - quartiles[0]) * 1000,
    }
