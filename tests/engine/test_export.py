"""The ``export`` output (sandbox/engine/outputs/export.py) on the warm engine, against
``jax.export`` called directly in a fresh process (tests/engine/understand_reference.py):
the same avals, platforms, calling convention and StableHLO; the round trip's outputs
equal to the pipeline's; symbolic-shape errors as errors at the user's line."""

from __future__ import annotations

import base64
import re

import numpy as np
import pytest

from tests.engine.test_recompiles import reference, the

CONCAT = """import jax
import jax.numpy as jnp

def f(x, y):
    return jnp.concatenate([x, x], 1) * y
"""


def without_locations(module: str) -> str:
    lines = [line for line in module.splitlines() if not line.startswith("#loc")]
    return re.sub(r" loc\(#loc\d*\)| loc\([^()]*\)", "", "\n".join(lines))


INCONCLUSIVE = """import jax
import jax.numpy as jnp

def f(x):
    if x.shape[0] > 2:
        return x * 2
    return x
"""


@pytest.mark.slow
def test_avals_stablehlo_and_round_trip_are_jaxs(run) -> None:
    args = "(jnp.arange(12.0).reshape(4, 3), jnp.float32(2.0))"
    shapes, platforms = ["b, 3", None], ["cpu", "cuda", "tpu"]
    events = run(
        {
            "code": CONCAT,
            "args": args,
            "outputs": ["export"],
            "export_shapes": shapes,
            "export_platforms": platforms,
            "timeout_s": 120,
        }
    )
    assert events[-1]["status"] == "ok", events[-3:]
    event = the(events, "export")
    jax_says = reference(
        "export",
        {"code": CONCAT, "args": args, "entry": "f", "shapes": shapes, "platforms": platforms},
    )
    assert event["in_avals"] == jax_says["in_avals"] == ["float32[b,3]", "float32[]"]
    assert event["out_avals"] == jax_says["out_avals"] == ["float32[b,6]"]
    assert event["platforms"] == jax_says["platforms"] == platforms
    assert event["calling_convention_version"] == jax_says["calling_convention_version"]
    # the same module; its debug locations name the calling frames, which differ
    # between the engine and a plain script
    assert without_locations(event["stablehlo"]) == without_locations(jax_says["stablehlo"])
    assert "tensor<?x3xf32>" in event["stablehlo"]
    assert base64.b64decode(event["artifact"])[:4] and event["artifact_bytes"] == len(
        base64.b64decode(event["artifact"])
    )
    arguments, fitted = event["roundtrip"]
    assert arguments == {
        "source": "arguments",
        "inputs": ["float32[4,3]", "float32[]"],
        "outputs": ["float32[4,6]"],
        "equal": True,
        "max_abs_diff": 0.0,
        "error": None,
    }
    # JAX's own deserialized call on the same arguments gives the outputs compared with
    x = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    assert np.array_equal(np.asarray(jax_says["outputs"][0]), np.concatenate([x, x], 1) * 2)
    assert fitted["source"] == "fitted" and fitted["inputs"] == ["float32[5,3]", "float32[]"]
    assert fitted["outputs"] == ["float32[5,6]"] and fitted["equal"] is True


@pytest.mark.slow
def test_an_inconclusive_comparison_is_an_error_at_its_line(run) -> None:
    events = run(
        {"code": INCONCLUSIVE, "args": "(jnp.ones((4, 3)),)", "outputs": ["export"],
         "export_shapes": ["b, 3"], "timeout_s": 120}
    )  # fmt: skip
    (error,) = [e for e in events if e["type"] == "error"]
    assert error["kind"] == "InconclusiveDimensionOperation"
    assert error["line"] == 5 and error["stage"] == "trace"
    assert error["message"].startswith("Symbolic dimension comparison 'b' > '2' is inconclusive")
    assert not [e for e in events if e["type"] == "export"]


@pytest.mark.slow
def test_bad_shape_strings_are_said_with_jaxs_message(run) -> None:
    events = run(
        {"code": CONCAT, "args": "(jnp.ones((4, 3)), 1.0)", "outputs": ["export"],
         "export_shapes": ["b, 3+"], "timeout_s": 120}
    )  # fmt: skip
    errors = [e for e in events if e["type"] == "error"]
    assert errors and "export_shapes gives 1 shape(s) for 2 argument(s)" in errors[0]["message"]
    events = run(
        {"code": CONCAT, "args": "(jnp.ones((4, 3)), 1.0)", "outputs": ["export"],
         "export_shapes": ["b, 3+", None], "timeout_s": 120}
    )  # fmt: skip
    (error,) = [e for e in events if e["type"] == "error"]
    assert (
        error["stage"] == "trace" and "syntax error in symbolic shape 'b, 3+'" in error["message"]
    )


@pytest.mark.slow
def test_python_numbers_and_own_shapes_round_trip(run) -> None:
    events = run(
        {"code": CONCAT, "args": "(jnp.ones((4, 3)), 1.0)", "outputs": ["export"], "timeout_s": 120}
    )  # fmt: skip
    event = the(events, "export")
    assert event["shapes"] == [None, None] and event["in_avals"] == ["float32[4,3]", "float32[]"]
    (call,) = event["roundtrip"]
    assert call["equal"] is True and call["outputs"] == ["float32[4,6]"]


@pytest.mark.slow
def test_an_artifact_for_other_hardware_is_not_called(run) -> None:
    events = run(
        {"code": CONCAT, "args": "(jnp.ones((4, 3)), 1.0)", "outputs": ["export"],
         "export_platforms": ["tpu"], "timeout_s": 120}
    )  # fmt: skip
    event = the(events, "export")
    assert event["platforms"] == ["tpu"] and event["roundtrip"] == []
    assert event["in_avals"] == ["float32[4,3]", "float32[]"]
    assert any("this worker (cpu) cannot call it" in n for n in event["notes"])
