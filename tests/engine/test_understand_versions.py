"""``recompiles`` and ``export`` on every installed JAX version (the default's and those
``jaxplay versions add`` installed: tests/engine/test_golden_versions.py finds them the
same way), each on a warm engine of that version's interpreter: where JAX has the
facility the figures are there, and where it has not the event says so plainly."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator

import pytest

from sandbox.environments.versions import installed
from tests.engine.test_golden_versions import VERSIONS_DIR, _older
from tests.engine.test_recompiles import LOOP_LINE, RECOMPILING, SIN_LINE, the
from tests.support.warm_engine import WarmEngine

VERSIONS = installed(VERSIONS_DIR)
CONCAT = """import jax.numpy as jnp

def f(x):
    return jnp.concatenate([x, x], 1)
"""


def _has(python: str, module: str) -> bool:
    return (
        subprocess.run(
            [python, "-c", f"import {module}"], capture_output=True, check=False
        ).returncode
        == 0
    )


def _minor(python: str) -> tuple[int, int]:
    out = subprocess.run(
        [python, "-c", "import sys; print(sys.version_info[0], sys.version_info[1])"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return int(out[0]), int(out[1])


@pytest.fixture(scope="module", params=sorted(VERSIONS))
def version(request: pytest.FixtureRequest) -> Iterator[tuple[str, str, WarmEngine]]:
    env = VERSIONS[request.param]
    engine = WarmEngine(python=env.python).start()
    try:
        yield request.param, env.python, engine
    finally:
        engine.stop()


@pytest.mark.slow
def test_recompiles_on_each_version(version: tuple[str, str, WarmEngine]) -> None:
    name, python, engine = version
    events = engine.run({"code": RECOMPILING, "args": "(1.0,)", "outputs": ["recompiles"],
                         "timeout_s": 180, "jax_version": name})  # fmt: skip
    assert events[0]["worker"]["jax_version"] == name
    event = the(events, "recompiles")
    sites = {(s["line"], s["function"]): s for s in event["sites"]}
    loop = sites[(LOOP_LINE, "g")]
    assert loop["miss_count"] == 2
    assert loop["misses"][1]["reason"] == "x: f32[3] → f32[4]"
    if _older(name, "0.5"):  # durations without the function's name: explanations only
        assert loop["hits"] is None and loop["misses"][1]["compile_ms"] is None
        assert any("without naming the function" in n for n in event["notes"])
        return
    assert sites[(SIN_LINE, "sin")]["misses"][0]["explanation"] is None
    assert loop["misses"][1]["compile_ms"] > 0
    if _minor(python) >= (3, 12):
        assert event["counts_calls"] and (loop["calls"], loop["hits"]) == (3, 1)
    else:  # no sys.monitoring: the misses only, and a note says so
        assert not event["counts_calls"] and loop["calls"] is None
        assert any("sys.monitoring" in n for n in event["notes"])


@pytest.mark.slow
def test_export_on_each_version(version: tuple[str, str, WarmEngine]) -> None:
    name, python, engine = version
    events = engine.run({"code": CONCAT, "args": "(jnp.ones((4, 3)),)", "outputs": ["export"],
                         "export_shapes": ["b, 3"], "export_platforms": ["cpu", "cuda", "tpu"],
                         "timeout_s": 180, "jax_version": name})  # fmt: skip
    event = the(events, "export")
    assert event["in_avals"] == ["float32[b,3]"] and event["out_avals"] == ["float32[b,6]"]
    assert "tensor<?x3xf32>" in event["stablehlo"]
    assert event["calling_convention_version"] >= 9
    if _has(python, "flatbuffers"):
        assert base64.b64decode(event["artifact"])
        assert [c["equal"] for c in event["roundtrip"]] == [True, True]
    else:  # an environment made before its lock named flatbuffers: said, not hidden
        assert event["artifact"] is None and event["roundtrip"] == []
        assert any("flatbuffers" in n for n in event["notes"])
