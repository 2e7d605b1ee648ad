"""Timing costs about what the call costs (sandbox/engine/outputs/timing.py): a row's
calls are bounded by its budget in calls of that program (five batches when they fit,
three when they do, else one), counted from after the warm-up, which is never
measured, and the budget is a twentieth of the run."""

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

    # after the warm-up, three calls do not fit the budget, nor a second: one call
    stats = timing.measure(counted, (1,), 0.07)
    assert stats["batches"] == stats["runs"] == 1 and len(calls) == 2  # warm-up + one
    assert stats["median_ms"] >= 50


def test_a_warm_up_over_the_whole_budget_is_not_counted_and_one_call_follows() -> None:
    """A first call can cost many later ones (a fresh process's first call of a small
    executable): it is never the measurement; one measured call follows it."""
    calls: list[float] = []

    def first_slow(x: int) -> int:
        time.sleep(0.08 if not calls else 0.01)
        calls.append(x)
        return x

    stats = timing.measure(first_slow, (1,), 0.03)
    assert len(calls) >= 2 and stats["runs"] == len(calls) - 1
    assert stats["median_ms"] < 40  # the later calls', not the first's 80 ms


def test_calls_within_the_budget_get_three_batches() -> None:
    calls = []

    def counted(x: int) -> int:
        calls.append(x)
        return _slow(x)

    stats = timing.measure(counted, (1,), 0.17)  # three 50 ms calls fit, a fourth not
    assert stats["batches"] == stats["runs"] == timing.FEWEST_BATCHES
    assert len(calls) == timing.FEWEST_BATCHES + 1


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


def test_the_budget_is_a_share_of_the_runs_cpu_time_within_its_bounds() -> None:
    now = time.process_time()
    assert timing.timing_budget(now) == timing.TIMING_MIN_BUDGET_S
    assert abs(timing.timing_budget(now - 5.0) - timing.TIMING_SHARE * 5.0) < 0.01
    assert timing.timing_budget(now - 100.0) == timing.TIMING_TOTAL_BUDGET_S


def _spin(x: int) -> int:
    """50 ms of this process's CPU."""
    until = time.process_time() + 0.05
    while time.process_time() < until:
        pass
    return x


def test_a_warm_up_over_the_give_up_time_is_not_repeated() -> None:
    """An eager call far over the timing's whole budget (an eager scan compiles on every
    call) is called once, and says how long it took."""
    calls = []

    def counted(x: int) -> int:
        calls.append(x)
        return _spin(x)

    try:
        timing.measure(counted, (1,), 0.01, give_up_s=0.02)
    except timing.TooSlow as slow:
        assert slow.took_s >= 0.05 and len(calls) == 1
    else:
        raise AssertionError("a 50 ms warm-up over a 20 ms give-up time was repeated")
    # under it: measured as any call
    assert timing.measure(counted, (1,), 0.01, give_up_s=1.0)["runs"] >= 1


def test_a_warm_up_slow_only_because_it_waited_for_the_cpu_is_timed() -> None:
    """On a loaded machine a small call's wall time grows while it waits for a CPU; its
    CPU time does not. Waiting (here a sleep: the wall time of a 50 ms call with no
    CPU of its own) is not a cost that leaves the eager row out."""
    stats = timing.measure(_slow, (1,), 0.01, give_up_s=0.02)
    assert stats["runs"] >= 1


def test_a_small_budget_gets_its_batches_in_shorter_ones() -> None:
    """A batch is a share of the row's budget when 5 ms batches would not fit
    MIN_BATCHES of them: a small program's timing costs its budget, not 25 ms."""
    assert timing.batch_length(0.4) == timing.MIN_BATCH_S
    assert timing.batch_length(0.001) == timing.MIN_BATCH_FLOOR_S
    started = time.perf_counter()
    stats = timing.measure(lambda x: time.sleep(0.0003), (1,), 0.014, warm=True)
    took = time.perf_counter() - started
    assert stats["batches"] >= timing.MIN_BATCHES  # 5 ms batches: three at most
    assert took < 0.014 + 2 * timing.batch_length(0.014) + 0.005
