"""A run's process collects its garbage as any Python does.

The zygote imports JAX and the libraries with the cyclic collector off (its boot line,
sandbox/zygote/handle.py) and turns it on before it forks: a run that found it off
would keep every reference cycle it makes until the process ends."""

from __future__ import annotations

import gc

import pytest

from tests.support.live_pool import LivePool

pytestmark = pytest.mark.slow

CODE = """
import gc

def f(x):
    print("collector", gc.isenabled(), gc.get_threshold()[0])
    return x
"""


def test_every_run_s_process_has_the_collector_on(shared_pool: LivePool) -> None:
    expected = f"collector True {gc.get_threshold()[0]}\n"
    first = shared_pool.run(CODE, tenant="collector")  # the warm child forked at start
    again = shared_pool.run(CODE + "# edited\n", tenant="collector")  # kept, or forked later
    for result in (first, again):
        assert result.status == "ok", result.events
        assert result.out == expected
