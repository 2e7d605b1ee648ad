"""A new tenant's first run in a warm child shows exactly what a fresh process shows.

A warm child has run the zygote's warm-ups before its first run (the worker's
``WARM_REQUEST``, its further steps, the heap frozen: the engine api's
``warm_backend`` and ``freeze_heap``, as sandbox/zygote/child.py ``warm_up`` runs them). What they leave in JAX's in-memory
caches is reused by the run: the fill value's conversion of ``jnp.ones``/``jnp.zeros``
(the same executable for every shape), and at the warm-up's own shape (2,) its
broadcast and its grad's eager operations. Reused or not, every output the run shows
(jaxpr, StableHLO, HLO, value, cost) must be byte for byte a fresh
``python -m sandbox.engine``'s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from sandbox.engine.worker import WARM_REQUEST
from sandbox.protocol import parse_event_line

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SHOWN_KINDS = ("jaxpr", "stablehlo", "hlo", "value", "cost")
VOLATILE = {"ms", "run_id", "seq"}
OUTPUTS = list(SHOWN_KINDS)

#: Requests that meet what the warm-ups cached: args by jnp.ones/jnp.zeros (some at
#: the warm-up's shape), an eager grad (its value op by op), the warm-up's own
#: program edited under grad+jit, and a vmap of grad.
REQUESTS: list[dict[str, Any]] = [
    {
        "code": "import jax.numpy as jnp\n\ndef f(w, x):\n    return jnp.sum(jnp.tanh(x @ w * 1.5) ** 2)\n",
        "args": "(jnp.ones((3, 2)), jnp.zeros((4, 3)) + 0.25)",
        "transforms": [{"name": "grad"}],
    },
    {
        "code": WARM_REQUEST["code"].replace("** 2", "** 2 * 1.25"),
        "args": WARM_REQUEST["args"],
        "transforms": WARM_REQUEST["transforms"],
    },
    {
        "code": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.sin(x) ** 2) * 3.0\n",
        "args": "(jnp.ones((2,)) * 0.75,)",
        "transforms": [{"name": "grad"}],
    },
    {
        "code": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.exp(x) * jnp.cos(x))\n",
        "args": "(jnp.zeros((2, 2)) + jnp.ones((2,)),)",
        "transforms": [{"name": "grad"}, {"name": "vmap"}],
    },
]

#: In a fresh interpreter: prepare as a zygote does, the warm child's warm-ups exactly
#: as the zygote runs them, then the run; its events as JSON lines on stdout.
WARM_CHILD = """
import json, os, sys
from sandbox.engine import api, worker
from sandbox.zygote import child

api.prepare()
for step in api.warm_backend():
    step()
child.freeze_heap()
out = os.dup(1)
os.dup2(2, 1)
message = {"protocol": 1, "run_id": "first", "request": json.loads(sys.argv[1])}
worker.run_message(message, out)
"""


def shown(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    assert events[-1]["type"] == "done" and events[-1]["status"] == "ok", events
    return [
        {k: v for k, v in e.items() if k not in VOLATILE}
        for e in events
        if e["type"] in SHOWN_KINDS
    ]


def warm_child_events(request: dict[str, Any]) -> list[dict[str, Any]]:
    body = {**request, "outputs": OUTPUTS}
    result = subprocess.run(
        [sys.executable, "-c", WARM_CHILD, json.dumps(body)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    # read as the pool reads a worker's events (validated, defaults filled in)
    return [parse_event_line(line.encode()) for line in result.stdout.splitlines()]


def both(
    run: Callable[[dict[str, Any]], list[dict[str, Any]]],
    fresh: dict[str, Any],
    warm: dict[str, Any],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A fresh worker's events for ``fresh`` and a warm child's for ``warm``, the two
    processes side by side (each spends most of its time importing JAX on one CPU)."""
    with ThreadPoolExecutor(2) as ex:
        a, b = ex.submit(run, fresh), ex.submit(warm_child_events, warm)
        return a.result(), b.result()


@pytest.mark.parametrize(
    "request_", REQUESTS, ids=["ones-zeros", "warm-program", "shape-2", "vmap"]
)
def test_a_warm_child_s_first_run_shows_what_a_fresh_process_shows(
    run: Any, request_: dict[str, Any]
) -> None:
    fresh_events, warm_events = both(run, {**request_, "outputs": OUTPUTS}, request_)
    fresh = shown(fresh_events)
    assert sorted(e["type"] for e in fresh) == sorted(SHOWN_KINDS)
    assert shown(warm_events) == fresh


def test_the_comparison_sees_a_different_value(run: Any) -> None:
    """Not vacuous: the same program on other arguments differs in its value only."""
    request = REQUESTS[2]
    fresh_events, other_events = both(
        run, {**request, "outputs": OUTPUTS}, {**request, "args": "(jnp.ones((2,)) * 0.5,)"}
    )
    fresh, other = shown(fresh_events), shown(other_events)
    differing = [a["type"] for a, b in zip(fresh, other, strict=True) if a != b]
    assert differing == ["value"]
