"""``jaxplay run --output trace_values``'s text: the event of grad of the where/sqrt
function at 0, made in this process by the engine's stepper (JAX imported here),
checked by the event model, rendered."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from backend.cli.render.events import render_event
from sandbox.engine.core.emitter import json_safe
from sandbox.engine.outputs.trace_values import trace_values_event
from sandbox.protocol.events import TraceValuesEvent


def f(x):  # type: ignore[no-untyped-def]
    return jnp.where(x > 0, jnp.sqrt(x), 0.0)


def test_the_cli_names_the_first_nan_and_inf_and_marks_their_rows() -> None:
    event = json_safe(trace_values_event(jax.make_jaxpr(jax.grad(f))(0.0), (0.0,)))
    TraceValuesEvent.model_validate(event)
    text = render_event(event)
    assert text is not None
    lines = text.splitlines()
    rows = event["rows"]
    assert (
        lines[0]
        == f"── trace_values: {len(rows)} rows, {event['evaluated_steps']} equations evaluated ──"
    )
    nan, inf = event["first_nan"], event["first_inf"]
    assert lines[1].startswith(
        f"  first NaN: row {nan}, mul (eqn {rows[nan]['eqn']}), fed by rows "
    )
    assert lines[2].startswith(f"  first Inf: row {inf}, div (eqn {rows[inf]['eqn']})")
    table = lines[4 : 4 + len(rows)]
    # one line per row, "!" on those whose outputs hold a NaN or an Inf
    marked = [int(line.split()[1]) for line in table if line.startswith("!")]
    assert inf in marked and nan in marked
    assert [line.split()[0 if not line.startswith("!") else 1] for line in table] == [
        str(n) for n in range(len(rows))
    ]
