"""Timing costs about what the call costs (sandbox/engine/outputs/timing.py): a call slower
than the budget is not called five times more, and a budget a tenth of the run."""

from __future__ import annotations

import time

from sandbox.engine.outputs import timing


def _slow(x: int) -> int:
    time.sleep(0.05)
    return x


def test_a_call_slower_than_its_budget_is_timed_once_after_its_warm_up() -> None:
    calls = []

    def counted(x: int) -> int:
        calls.append(x)
        return _slow(x)

    stats = timing.measure(counted, (1,), 0.03)
    assert stats["batches"] == stats["runs"] == 1 and len(calls) == 2  # warm-up + one
    assert stats["median_ms"] >= 50


def test_a_warm_executable_gets_no_warm_up_call() -> None:
    calls = []

    def counted(x: int) -> int:
        calls.append(x)
        return _slow(x)

    stats = timing.measure(counted, (1,), 0.03, warm=True)
    assert len(calls) == stats["runs"] == 1


def test_a_fast_call_still_gets_its_batches() -> None:
    stats = timing.measure(lambda x: x, (1,), 0.5)
    assert stats["batches"] >= timing.MIN_BATCHES and stats["runs"] >= 1000


def test_the_budget_is_a_tenth_of_the_runs_cpu_time_within_its_bounds() -> None:
    now = time.process_time()
    assert timing.timing_budget(now) == timing.TIMING_MIN_BUDGET_S
    assert abs(timing.timing_budget(now - 5.0) - timing.TIMING_SHARE * 5.0) < 0.01
    assert timing.timing_budget(now - 100.0) == timing.TIMING_TOTAL_BUDGET_S
