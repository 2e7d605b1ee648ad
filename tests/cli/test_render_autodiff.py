"""``jaxplay run --output autodiff``'s text: an autodiff event made in this process by
the engine's own function (JAX imported here), checked by the event model, rendered."""

from __future__ import annotations

import jax.numpy as jnp

from backend.cli.render.events import render_event
from sandbox.engine.outputs.autodiff import autodiff_event
from sandbox.protocol.events import AutodiffEvent
from sandbox.protocol.requests import Transform


def f(x):  # type: ignore[no-untyped-def]
    return jnp.sum(jnp.sin(x) * x)


def test_the_cli_shows_each_stage_the_residuals_and_the_policies() -> None:
    steps = [Transform(name="checkpoint"), Transform(name="grad")]
    event = autodiff_event(f, "f", steps, {}, (jnp.ones(8),))
    AutodiffEvent.model_validate(event)
    text = render_event(event)
    assert text is not None
    assert text.startswith("── autodiff: grad of checkpoint(f) with respect to x ──")
    for stage in event["stages"]:
        assert f"── {stage['path']} · {stage['stage']}: {stage['title']} ──" in text
        assert stage["text"].rstrip() in text
    assert "path direct (JAX's default)" in text and "path classic" in text
    # nothing_saveable keeps x alone (the caller's: 0 bytes computed); everything_saveable
    # keeps sin x and cos x too
    rows = [
        line.split()
        for line in text.splitlines()
        if line.strip().startswith(("nothing_", "everything_"))
    ]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("nothing_saveable", "1", "0"),
        ("everything_saveable", "3", "64"),
    ]
    assert "FLOPs: XLA's cost analysis" in text


def test_nothing_to_differentiate_is_one_note() -> None:
    event = autodiff_event(f, "f", [Transform(name="jit")], {}, (jnp.ones(8),))
    assert render_event(event) == (
        "── autodiff ──\n  note: nothing to differentiate: the pipeline has no grad, value_and_grad,"
        " vjp, jacrev, jacfwd, hessian, linearize or jvp step"
    )
