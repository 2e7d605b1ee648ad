"""The ``recompiles`` output (sandbox/engine/outputs/recompiles.py) on the warm engine,
against JAX itself in a fresh process (tests/engine/understand_reference.py): the same
explanations, word for word, at the lines JAX names; as many misses per function as
JAX traced it; hits where the calls outnumber them; JAX's silence said plainly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REFERENCE = Path(__file__).with_name("understand_reference.py")

RECOMPILING = """import jax
import jax.numpy as jnp

def g(x):
    return x * 2

k = jax.jit(g)
for n in (3, 4, 4):
    k(jnp.ones(n))
s = jax.jit(jnp.sin)
s(jnp.ones(3))

def f(x):
    for n in (2, 2):
        k(jnp.ones(n))
    return x + 1
"""
LOOP_LINE, SIN_LINE, ENTRY_CALL_LINE = 9, 11, 15


def reference(what: str, message: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(REFERENCE), what],
        input=json.dumps(message),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout)


def the(events: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (event,) = [e for e in events if e["type"] == kind]
    return event


@pytest.mark.slow
def test_explanations_misses_and_hits_are_jaxs(run) -> None:
    events = run(
        {"code": RECOMPILING, "args": "(1.0,)", "outputs": ["recompiles"], "timeout_s": 120}
    )
    assert events[-1]["status"] == "ok", events[-3:]
    sites = {(s["line"], s["function"]): s for s in the(events, "recompiles")["sites"]}
    jax_says = reference("recompiles", {"code": RECOMPILING, "args": "(1.0,)", "entry": "f"})

    loop = sites[(LOOP_LINE, "g")]
    assert (loop["calls"], loop["hits"], loop["miss_count"]) == (3, 1, 2)
    assert loop["summary"] == "2 compiles, 1 hit — x: f32[3] → f32[4]"
    # the entry's own call site: k on ones(2), once new then a hit
    entry = sites[(ENTRY_CALL_LINE, "g")]
    assert (entry["calls"], entry["hits"], entry["miss_count"], entry["caller"]) == (2, 1, 1, "f")
    sin = sites[(SIN_LINE, "sin")]
    assert sin["miss_count"] == 1 and sin["misses"][0]["explanation"] is None
    assert "target is itself jitted" in sin["silent"]

    # every explanation JAX logged, word for word, and only those
    ours = [m["explanation"] for s in sites.values() for m in s["misses"] if m["explanation"]]
    assert sorted(ours) == sorted(jax_says["explanations"])
    assert any("* at x, now f32[4] and before f32[3]" in e for e in ours)
    # as many misses of each jitted function as JAX traced it
    for name in ("g", "sin"):
        ours_n = sum(s["miss_count"] for (_, fn), s in sites.items() if fn == name)
        assert ours_n == jax_says["traced"][name], name
    # each miss's times are JAX's own durations: present and positive for a real compile
    for miss in loop["misses"]:
        assert miss["trace_ms"] > 0 and miss["lower_ms"] > 0 and miss["compile_ms"] > 0
    assert loop["compile_ms"] == pytest.approx(
        sum(m["compile_ms"] for m in loop["misses"]), abs=0.01
    )


def test_reason_in_a_few_words() -> None:
    from sandbox.engine.outputs.recompiles import SILENT, reason

    assert reason(None) == SILENT
    assert (
        reason(
            "TRACING CACHE MISS at snippet.py:9:4 (<module>):\n  never seen function:\n    g defined at snippet.py:4"
        )
        == "first call"
    )
    two = "TRACING CACHE MISS at x:\n  different input types:\n  * at x, now f32[4] and before f32[3]\n  * at y, now i32[] and before f32[]"
    assert reason(two) == "x: f32[3] → f32[4]; y: f32[] → i32[]"
    jax_04 = "TRACING CACHE MISS at snippet.py:9:4 (<module>) because:\n  closest seen input type signature has 1 mismatches, including:\n    * at x, seen f32[3], but now given f32[4]"
    assert reason(jax_04) == "x: f32[3] → f32[4]"


@pytest.mark.slow
def test_abstract_arguments_count_the_module_alone(run) -> None:
    events = run(
        {
            "code": RECOMPILING,
            "args": "(jax.ShapeDtypeStruct((), jnp.float32),)",
            "outputs": ["recompiles", "jaxpr"],
            "timeout_s": 120,
        }
    )
    event = the(events, "recompiles")
    assert any("shapes and dtypes only" in n for n in event["notes"])
    assert not [s for s in event["sites"] if s["line"] == ENTRY_CALL_LINE]
