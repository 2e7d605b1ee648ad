"""``jaxplay run --output profile``'s text: a profile event made in this process by the
engine's own functions (JAX imported here, its profiler run here), checked by the
event model, rendered."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from backend.cli.render.events import render_event
from sandbox.engine.outputs.profile import profile_event, profiled_calls
from sandbox.protocol.events import ProfileEvent


def test_the_cli_shows_each_instruction_its_time_and_roofline() -> None:
    x = jnp.ones((64, 64))
    compiled = jax.jit(lambda a: jnp.tanh(a @ a)).lower(x).compile()
    trace, wall_us, calls, printed = profiled_calls(compiled, lambda: (x,))
    event = profile_event(compiled, trace.events, wall_us, calls, None)
    ProfileEvent.model_validate(event)
    assert event["rows"] and printed == 0
    text = render_event(event)
    assert text is not None
    assert text.startswith(f"── profile: {calls} calls, ")
    for row in event["rows"]:
        assert row["name"][:32] in text
    assert f"peaks ({jax.devices()[0].device_kind})" in text
