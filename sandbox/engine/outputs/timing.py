"""The ``timing`` output: the entry function, eager, against each pipeline that
compiled, timed after every pipeline ran (its row's hooks).

Honest timings: warm-up, ``block_until_ready``, enough repetitions to be stable.

Like ``timeit``'s autorange, each measurement times a batch of calls long enough to
be well above the clock's resolution; batches repeat until the time budget is spent.
Per-call times are reported as median, min and interquartile range.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax

from sandbox.engine.core.errors import UserError
from sandbox.engine.core.output import Output, Results, RunContext, RunHandle, RunHooks
from sandbox.protocol.limits import MAX_LABEL_CHARS, MAX_MESSAGE_CHARS

#: per-row time budget for the timing comparison, and the total across rows
TIMING_ROW_BUDGET_S = 0.4
TIMING_TOTAL_BUDGET_S = 2.0
#: The timing is jaxplay's own work, not the user's: its budget is this share of
#: the CPU time the run took before it (at least TIMING_MIN_BUDGET_S, at most the
#: total above), so that it grows with the program and never dominates a run. CPU
#: time, not wall time: on a loaded machine the wall clock counts other processes'
#: work. A tiny function is called thousands of times even in the least budget.
TIMING_SHARE = 0.05
TIMING_MIN_BUDGET_S = 0.02

#: A batch lasts at least this long, or a share of its row's budget when that is
#: less: the batches a row needs fit its budget, so a small program's timing costs
#: its budget, not MIN_BATCHES batches of 5 ms (the clock reads to well under a
#: microsecond; a batch of one millisecond is still thousands of its ticks)
MIN_BATCH_S = 0.005
MIN_BATCH_FLOOR_S = 0.001
#: at least this many batches, when the budget allows
MIN_BATCHES = 5
#: at least this many when the budget allows them but not MIN_BATCHES; a call slower
#: than the budget allows three of gets one, so that a row's calls are bounded by its
#: budget in calls of that program: timing costs about what one call costs
FEWEST_BATCHES = 3
MAX_RUNS = 100_000
#: The budget is a ceiling: once this many batches agree to within SETTLED_SPREAD
#: (interquartile range over median), more would not change the answer, and the run
#: ends sooner. A noisy function still gets the whole budget.
SETTLED_BATCHES = 15
SETTLED_SPREAD = 0.02
#: An eager call whose warm-up took over this many times the timing's whole budget
#: (its wall or CPU time, the lesser: ``_first_call``) is not called again: its row is
#: left out, and a note gives that call's time (an eager ``lax.scan`` compiles its body
#: on every call: 0.4-0.6 s a call for a 6-block transformer, a third of plain JAX's
#: whole cell for two calls), and over EAGER_GIVE_UP_MIN_S: a small function's first
#: eager call in a fresh process compiles each of its operations (tens of ms), and its
#: row is kept
EAGER_GIVE_UP = 2.0
EAGER_GIVE_UP_MIN_S = 0.25


class TooSlow(Exception):
    """A warm-up call over the time ``measure`` was given to give up after."""

    def __init__(self, took_s: float) -> None:
        super().__init__(f"one call took {took_s * 1000:.0f} ms")
        self.took_s = took_s


def _call(fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    jax.block_until_ready(fn(*args))


def _fewest(took: float, budget_s: float) -> int:
    """The batches a measurement takes at least: MIN_BATCHES when they fit the
    budget, else FEWEST_BATCHES when they do, else one."""
    if took * MIN_BATCHES <= budget_s:
        return MIN_BATCHES
    return FEWEST_BATCHES if took * FEWEST_BATCHES <= budget_s else 1


def batch_length(budget_s: float) -> float:
    """How long a batch lasts at least under ``budget_s``: MIN_BATCH_S, or the
    budget's share that leaves room for MIN_BATCHES batches, each up to twice it (the
    autorange doubles a batch until it is long enough), never under MIN_BATCH_FLOOR_S."""
    return max(MIN_BATCH_FLOOR_S, min(MIN_BATCH_S, budget_s / (2 * MIN_BATCHES)))


def measure_fresh(
    fn: Callable[..., Any], fresh: Callable[[], tuple[Any, ...]], budget_s: float
) -> dict[str, Any]:
    """Time calls that consume their arguments (donated buffers): each call gets
    fresh copies, made before its clock starts, so batches are of one call."""
    start = time.perf_counter()
    _call(fn, fresh())
    fewest = _fewest(time.perf_counter() - start, budget_s)
    deadline = time.perf_counter() + budget_s  # the budget is the measured calls'
    per_call: list[float] = []
    while len(per_call) < MAX_RUNS and (len(per_call) < fewest or time.perf_counter() < deadline):
        args = fresh()
        start = time.perf_counter()
        _call(fn, args)
        per_call.append(time.perf_counter() - start)
    return _summary(per_call, runs=len(per_call))


def measure(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    budget_s: float,
    *,
    warm: bool = False,
    give_up_s: float | None = None,
) -> dict[str, Any]:
    """Time ``fn(*args)``; the first call (warm-up) is not counted. ``warm``: ``fn``
    has been called on these arguments already in this process (the run's
    ``execute`` stage called this executable), so no warm-up call is made: on a big
    program one call is a good share of the run.

    The budget is the measured calls', from after the warm-up: a first call can cost
    many later ones (a fresh process's first call of a small executable, 60-70 ms
    against 2 ms), and is never counted; at least one batch follows it, unless the
    warm-up took over ``give_up_s`` (``TooSlow``)."""
    if not warm:
        took = _first_call(fn, args)
        if give_up_s is not None and took > give_up_s:
            raise TooSlow(took)
    deadline = time.perf_counter() + budget_s
    batch_s = batch_length(budget_s)
    number = 1
    while True:  # autorange: grow the batch until it lasts batch_s
        start = time.perf_counter()
        for _ in range(number):
            _call(fn, args)
        took = time.perf_counter() - start
        if took >= batch_s or number >= MAX_RUNS // MIN_BATCHES:
            break
        number *= 2 if took * 10 >= batch_s else 10
    per_call = [took / number]
    runs = number
    fewest = _fewest(took, budget_s)
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


def _first_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> float:
    """One call's cost: the lesser of its wall time and the process's CPU time over it.
    On a loaded machine a call's wall time grows with the other processes' work and
    its CPU time does not; a call that runs on several threads uses more CPU than wall
    time. A call that costs much (an eager scan compiling its body) costs both."""
    wall, cpu = time.perf_counter(), time.process_time()
    _call(fn, args)
    return min(time.perf_counter() - wall, time.process_time() - cpu)


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


@dataclass
class TimingRow:
    pipeline: str
    label: str
    compile_ms: float | None
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    donates: bool = False
    #: the run's ``execute`` stage called ``fn`` on ``args`` already: no warm-up
    warm: bool = False


class TimingHooks(RunHooks):
    """A row per pipeline that compiled, kept as each ends; all of them timed last."""

    def __init__(self, run: RunHandle) -> None:
        super().__init__(run)
        self.rows: list[TimingRow] = []
        self.context: RunContext | None = None

    def after_pipeline(self, results: Results) -> None:
        if results.compiled is None:
            return
        pipeline = results.pipeline
        self.context = pipeline.run
        self.rows.append(
            TimingRow(
                pipeline.name,
                pipeline.pipe.label,
                results.compile_ms,
                results.compiled,
                pipeline.pipe.dynamic_args(pipeline.run.args),
                pipeline.pipe.donates,
                warm=results.executed_compiled,
            )
        )

    def finish(self) -> None:
        # Timing compares f with the pipelines that compiled; when none did, the
        # errors already said why and an eager row alone would only repeat them.
        if self.context is None or self.context.abstract or not self.rows:
            return
        from sandbox.engine.core.pipeline import copy_args

        run, f, args = self.run, self.context.entry, self.context.args
        rows = [
            TimingRow("main", f"{run.request.entry} (eager)", None, f, args),
            *self.rows,
        ]
        budget = min(TIMING_ROW_BUDGET_S, timing_budget(run.started_cpu) / len(rows))
        measured, notes = [], []
        started = time.perf_counter()
        # The timing loops call the function hundreds of times: what it prints
        # (jax.debug.print runs on every call) is counted, not relayed.
        run.emitter.muted, run.emitter.muted_lines = True, 0
        for row in rows:
            if row.donates:  # each call consumes its arguments: time it on fresh copies
                fresh = functools.partial(copy_args, row.args)
                timer = functools.partial(measure_fresh, row.fn, fresh, budget)
            else:
                # f eagerly: a call far over the whole budget is not repeated
                give_up = (
                    max(EAGER_GIVE_UP * budget * len(rows), EAGER_GIVE_UP_MIN_S)
                    if row.compile_ms is None
                    else None
                )
                timer = functools.partial(
                    measure, row.fn, row.args, budget, warm=row.warm, give_up_s=give_up
                )
            try:
                stats = run.staged("timing", timer, report=False)
            except UserError as error:
                if isinstance(error.exc, TooSlow):
                    notes.append(
                        f"{row.label[:MAX_LABEL_CHARS]} not timed: one call took "
                        f"{error.exc.took_s * 1000:.0f} ms (its first, which may include "
                        f"compiling), over {EAGER_GIVE_UP:g}x the timing's budget "
                        f"({budget * len(rows) * 1000:.0f} ms) and "
                        f"{EAGER_GIVE_UP_MIN_S * 1000:.0f} ms: not called again"
                    )
                elif row.compile_ms is None:
                    # f itself may not run outside its transformation (a collective
                    # such as lax.psum needs pmap's axis name): a note, not an error.
                    note = f"{row.label} not timed: {type(error.exc).__name__}: {error.exc}"
                    notes.append(note[:MAX_MESSAGE_CHARS])
                else:
                    run.fail(error)
                continue
            measured.append(
                {
                    "label": row.label[:MAX_LABEL_CHARS],
                    "pipeline": row.pipeline,
                    "compile_ms": row.compile_ms,
                    **stats,
                }
            )
        run.emitter.flush_streams()
        run.emitter.muted = False
        run.emit({"type": "stage", "stage": "timing", "ms": (time.perf_counter() - started) * 1000})
        if run.emitter.muted_lines:
            run.emitter.emit_text(
                "stdout",
                f"[{run.emitter.muted_lines} lines printed during the timing runs are not shown]\n",
            )
        run.emit({"type": "timing", "rows": measured, "notes": notes})


def timing_budget(started_cpu: float) -> float:
    """The timing's budget across its rows: TIMING_SHARE of the run's CPU time so
    far, within TIMING_MIN_BUDGET_S and TIMING_TOTAL_BUDGET_S."""
    spent = time.process_time() - started_cpu
    return min(TIMING_TOTAL_BUDGET_S, max(TIMING_MIN_BUDGET_S, TIMING_SHARE * spent))


#: made after every pipeline, from the compiled programs (on concrete arguments)
OUTPUT = Output("compiled", "timing the pipelines", concrete=True, hooks=TimingHooks)
