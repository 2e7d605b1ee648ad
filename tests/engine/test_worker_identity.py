"""``accepted`` says the libraries beside the run's JAX (the result cache's key covers
them: an answer made with another Flax is another answer)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Any

from sandbox.environments import libraries
from sandbox.protocol import RunRequest


def test_accepted_names_the_installed_libraries_and_their_versions(
    run: Callable[[Any], list[dict[str, Any]]],
) -> None:
    events = run(RunRequest(code="def f(x):\n    return x\n", args="(1.0,)", outputs=["jaxpr"]))
    worker = next(e for e in events if e["type"] == "accepted")["worker"]
    said = worker["libraries"]
    assert said["flax"] == importlib.metadata.version("flax")
    assert said["optax"] == importlib.metadata.version("optax")
    assert set(said) <= {lib.name for lib in libraries.LIBRARIES}


def test_accepted_says_the_matmul_precision(run: Callable[[Any], list[dict[str, Any]]]) -> None:
    """What a TPU's or GPU's values are computed at (issue 50; on a CPU float32's)."""
    code = "def f(x):\n    return x\n"
    events = run(RunRequest(code=code, args="(1.0,)", outputs=["jaxpr"]))
    assert next(e for e in events if e["type"] == "accepted")["worker"]["matmul_precision"] == (
        "default"
    )
