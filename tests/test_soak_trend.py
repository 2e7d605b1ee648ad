"""The soak's verdict on its samples (benchmarks/server/soak_trend.py): what decides whether a
quantity grows without bound over hours, so it must fail a leak and pass noise."""

from __future__ import annotations

import math
import random

from benchmarks.server.soak_trend import fitted_rise, judge


def _series(values: list[float], every_s: float = 30.0) -> list[tuple[float, float]]:
    return [(i * every_s, v) for i, v in enumerate(values)]


def test_a_straight_line_s_rise_is_its_rise() -> None:
    rise, stderr = fitted_rise(_series([10.0 + 0.5 * i for i in range(11)]))
    assert math.isclose(rise, 5.0) and stderr < 1e-9


def test_a_leak_under_noise_fails_and_noise_alone_passes() -> None:
    rng = random.Random(52)
    # 60 samples (30 minutes at 30 s): RSS around 115 MB, ±3 MB of noise
    flat = [115 + rng.gauss(0, 3) for _ in range(60)]
    leak = [115 + 0.5 * i + rng.gauss(0, 3) for i in range(60)]  # +1 MB a minute
    start = 600.0  # the last two thirds
    assert judge("server.rss_mb", _series(flat), floor=8.0, start=start).ok
    verdict = judge("server.rss_mb", _series(leak), floor=8.0, start=start)
    assert not verdict.ok and 15 < verdict.rise < 25, verdict
    # the same leak, too small to matter over the window: under the floor
    small = [115 + 0.1 * i / 6 + rng.gauss(0, 0.01) for i in range(60)]
    assert judge("server.rss_mb", _series(small), floor=8.0, start=start).ok


def test_falling_passes_and_too_few_samples_are_not_judged() -> None:
    falling = _series([200 - 2.0 * i for i in range(30)])
    assert judge("server.fds", falling, floor=4.0, start=0.0).ok
    short = judge("server.fds", _series([1.0, 50.0, 100.0]), floor=4.0, start=30.0)
    assert short.ok and short.n == 2 and math.isnan(short.rise)


def test_the_first_third_is_left_out() -> None:
    # the pool filling up in the first minutes, then flat: no leak
    warming = [float(min(i, 8)) for i in range(60)]
    assert judge("pool.zygotes", _series(warming), floor=1.5, start=600.0).ok
    assert not judge("pool.zygotes", _series(warming), floor=1.5, start=0.0).ok
