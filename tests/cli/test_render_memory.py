"""``jaxplay run --output memory``'s text: a memory event made in this process by the
engine's own function from XLA's dump of a compile done here, checked by the event
model, rendered."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp

from backend.cli.render.events import render_event
from sandbox.engine.core.xla_dump import Dump
from sandbox.engine.outputs.memory import memory_event
from sandbox.protocol.events import MemoryEvent


def mlp(w: jax.Array, x: jax.Array) -> jax.Array:
    for _ in range(3):
        x = jnp.tanh(x @ w)
    return jnp.sum(x)


def test_the_cli_draws_the_timeline_and_names_xlas_peak() -> None:
    with tempfile.TemporaryDirectory() as folder:
        dump = Dump(Path(folder))
        lowered = jax.jit(jax.grad(mlp)).lower(jnp.ones((16, 16)), jnp.ones((8, 16)))
        compiled = lowered.compile(dump.compiler_options(("module",)))
        event = memory_event(dump, compiled)
    MemoryEvent.model_validate(event)
    timeline = event["timeline"]
    assert timeline is not None, event["notes"]
    text = render_event(event)
    assert text is not None
    assert text.startswith(f"── memory: peak {event['peak_bytes']:,} B (memory_analysis()) ──")
    assert f"{timeline['steps']} steps of XLA's schedule" in text
    assert f"XLA's peak: step {timeline['peak_step']} ({timeline['peak_instruction']}" in text
    assert f"{timeline['peak_bytes']:,} B live" in text
    # one bar per point (a short schedule: every step), the peak's marked
    bars = re.findall(r"^ +(\d+) █* +([\d,]+) B(  ◀ peak)?$", text, re.M)
    assert [int(step) for step, _, _ in bars] == list(range(timeline["steps"]))
    assert [int(step) for step, _, peak in bars if peak] == [timeline["peak_step"]]
    for value in timeline["at_peak"]:
        assert re.search(
            rf"{value['bytes']:>12,} B  {value['kind']:<8} {re.escape(value['name'])}", text
        )
