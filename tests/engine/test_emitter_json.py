"""The emitter writes each event as one JSON line (sandbox/engine/core/emitter.py):
most events are written as they are, and one holding a NaN or an infinity anywhere
has it written as a string, the JSON valid either way."""

from __future__ import annotations

import json
import math
import os

import numpy as np

from sandbox.engine.core.emitter import Emitter


def _written(event: dict) -> dict:
    read, write = os.pipe()
    try:
        Emitter(write).emit(event)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            (line,) = pipe.read().splitlines()
    finally:
        try:
            os.close(write)
        except OSError:
            pass
    return json.loads(line, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))


def test_non_finite_floats_anywhere_are_strings() -> None:
    event = {
        "type": "value",
        "tree": [{"summary": {"min": -math.inf, "max": math.inf, "mean": math.nan}}],
        "data": [1.5, (2.0, float("nan"))],
    }
    out = _written(event)
    assert out["tree"][0]["summary"] == {"min": "-inf", "max": "inf", "mean": "nan"}
    assert out["data"] == [1.5, [2.0, "nan"]]
    assert out["pipeline"] == "main"


def test_a_finite_event_is_written_as_it_is() -> None:
    event = {"type": "cost", "flops": 12.5, "memory": {"temp": np.int64(7)}, "rows": (1, 2)}
    assert _written(event) == {
        "type": "cost", "flops": 12.5, "memory": {"temp": 7}, "rows": [1, 2], "pipeline": "main"
    }  # fmt: skip
