"""The ``export`` output's request fields and the two events' models (issue 36): what the
protocol accepts and refuses, and the events the engine makes pass the gate's models."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sandbox.protocol import RunRequest
from sandbox.protocol.events import EVENT_ADAPTER
from sandbox.protocol.output_table import OUTPUT_TABLE


def test_export_fields_take_jax_shape_syntax_and_platform_names() -> None:
    request = RunRequest(
        code="x", outputs=["export"], export_shapes=["b, 3", None, "2*b, (n + 1)"],
        export_platforms=["cpu", "cuda", "tpu"],
    )  # fmt: skip
    assert request.export_shapes == ["b, 3", None, "2*b, (n + 1)"]
    for bad in (["b; import os"], ["x" * 201], ['b"']):
        with pytest.raises(ValidationError):
            RunRequest(code="x", export_shapes=bad)
    for bad_platforms in ([], ["gpu"], ["cpu"] * 5):
        with pytest.raises(ValidationError):
            RunRequest(code="x", export_platforms=bad_platforms)


def test_the_outputs_rows() -> None:
    assert not OUTPUT_TABLE["recompiles"].per_pipeline and not OUTPUT_TABLE["recompiles"].cached
    assert OUTPUT_TABLE["export"].per_pipeline and OUTPUT_TABLE["export"].stages == ("trace",)
    assert not OUTPUT_TABLE["export"].default and not OUTPUT_TABLE["recompiles"].default


def test_the_events_validate_and_are_bounded() -> None:
    site = {
        "line": 9, "function": "g", "caller": "<module>", "jitted": True, "calls": 3, "hits": 1,
        "miss_count": 1, "misses": [{"explanation": None, "reason": "first call", "trace_ms": 1.0,
        "lower_ms": None, "compile_ms": 2.0}], "trace_ms": 1.0, "lower_ms": 0.0,
        "compile_ms": 2.0, "summary": "1 compile, 2 hits — first call",
    }  # fmt: skip
    EVENT_ADAPTER.validate_python({"type": "recompiles", "sites": [site], "counts_calls": True})
    with pytest.raises(ValidationError):  # a negative time is not JAX's
        EVENT_ADAPTER.validate_python(
            {"type": "recompiles", "sites": [{**site, "compile_ms": -1}], "counts_calls": True}
        )
    event = {
        "type": "export", "function": "f", "shapes": ["b, 3"], "in_avals": ["float32[b,3]"],
        "out_avals": ["float32[b,6]"], "platforms": ["cpu"], "calling_convention_version": 10,
        "stablehlo": "module {}", "roundtrip": [{"source": "fitted", "inputs": ["float32[5,3]"],
        "outputs": ["float32[5,6]"], "equal": True}],
    }  # fmt: skip
    EVENT_ADAPTER.validate_python(event)
    with pytest.raises(ValidationError):
        EVENT_ADAPTER.validate_python(
            {**event, "roundtrip": [{"source": "elsewhere", "inputs": [], "outputs": []}]}
        )
