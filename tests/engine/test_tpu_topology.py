"""Deviceless TPU compiles (``tpu_topology``): the request, and the engine's TPU HLO,
memory and collectives held to JAX compiling for the same topology directly
(tests/engine/tpu_topology_reference.py, a fresh process with the same libtpu and variables).

The compiles need JAX's TPU extra (libtpu, under Google's terms), which setup
installs only when asked (``JAXPLAY_TPU_EXTRA=1 make setup``; CI does): without it
they skip, saying so, except where ``JAXPLAY_TPU_EXTRA=1`` says it must be there.
The server's refusal is in tests/server/test_deviceless_targets.py, the jail's run in
tests/jail/test_tpu_topology_jail.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sandbox.environments import tpu_extra
from sandbox.protocol import RunRequest

REFERENCE = Path(__file__).resolve().parent / "tpu_topology_reference.py"
MESH = {"shape": [2, 2], "axis_names": ["x", "y"], "axis_types": ["auto", "auto"]}
CODE = "def f(x, w):\n    y = x @ w\n    return jnp.tanh(y).sum(0)\n"
ARGS = "(jnp.ones((1024, 512)), jnp.ones((512, 256)))"
OUTPUTS = ["stablehlo", "hlo", "memory", "sharding"]

needs_extra = pytest.mark.skipif(
    not tpu_extra.installed() and os.environ.get("JAXPLAY_TPU_EXTRA") != "1",
    reason="JAX's TPU extra (libtpu, Google's terms) is not installed: "
    "`JAXPLAY_TPU_EXTRA=1 make setup` installs it (CI does)",
)


def _request(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "code": CODE,
        "args": ARGS,
        "mesh": MESH,
        "in_shardings": [["x", "y"], ["y", None]],
        "tpu_topology": "v5e:2x2",
        "outputs": OUTPUTS,
        "timeout_s": 120,
    }
    base.update(fields)
    return base


def _of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def _error(events: list[dict[str, Any]]) -> dict[str, Any]:
    errors = _of(events, "error")
    assert len(errors) == 1, events
    return errors[0]


def _reference(request: dict[str, Any]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(REFERENCE), json.dumps(request)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.stdout)
    return result


# --- the request (no libtpu needed) -------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"mesh": None, "in_shardings": None}, "tpu_topology needs a `mesh`"),
        ({"outputs": ["hlo", "value"]}, "drop ['value']"),
        ({"outputs": ["hlo", "timing"]}, "drop ['timing']"),
        ({"lowering_platforms": ["tpu"], "outputs": ["stablehlo"]}, "leave lowering_platforms"),
        ({"tpu_topology": "v5e 2x2; rm -rf"}, "tpu_topology"),
    ],
)
def test_a_bad_topology_request_is_refused_saying_why(fields: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError) as info:
        RunRequest.model_validate(_request(**fields))
    assert says in " ".join(f"{e['loc']} {e['msg']}" for e in info.value.errors())


@pytest.mark.parametrize("name", ["v5e:2x2", "v5p:2x2x1", "v6e=4x4", "v4-8", "v4 lite:1x1"])
def test_topology_names_as_libtpu_spells_them_validate(name: str) -> None:
    assert RunRequest.model_validate(_request(tpu_topology=name)).tpu_topology == name


def test_the_extra_is_installed_where_ci_says_so() -> None:
    if os.environ.get("JAXPLAY_TPU_EXTRA") != "1":
        pytest.skip("JAXPLAY_TPU_EXTRA is not 1: the extra is optional here")
    assert tpu_extra.installed(), "JAXPLAY_TPU_EXTRA=1 but setup did not install libtpu"


# --- the engine against JAX (needs the extra) -----------------------------------------


@needs_extra
@pytest.mark.slow
def test_the_engine_compiles_for_the_topology_as_jax_does(run: Any) -> None:
    request = _request()
    events = run(request)
    assert not _of(events, "error"), _of(events, "error")
    assert events[-1]["status"] == "ok"
    assert not [e for e in _of(events, "stage") if e["stage"] == "execute"]  # nothing ran
    want = _reference(request)
    assert "error" not in want, want
    (stablehlo,) = _of(events, "stablehlo")
    assert stablehlo["text"] == want["stablehlo"]
    (hlo,) = _of(events, "hlo")
    assert hlo["text"] == want["hlo"]
    assert "T(8,128)" in hlo["text"]  # TPU tiled layouts: the TPU compiler's HLO, not the CPU's
    (memory,) = _of(events, "memory")
    assert memory["analysis"] == {k: want["analysis"][k] for k in memory["analysis"]}
    assert memory["device_kind"] == want["device_kind"] == "TPU v5 lite"
    assert 15 * 2**30 < memory["capacity_bytes"] <= 16 * 2**30  # a v5e chip has 16 GiB
    assert memory["peak_bytes"] < memory["capacity_bytes"]
    (sharding,) = _of(events, "sharding")
    assert sharding["devices"] == 4
    assert [c["kind"] for c in sharding["collectives"]] == want["collectives"] != []
    by_line = {c["line"]: c["replica_groups"] for c in sharding["collectives"]}
    assert by_line == {2: [[0, 1], [2, 3]], 3: [[0, 2], [1, 3]]}  # x @ w over y; sum over x


@needs_extra
@pytest.mark.slow
def test_capacity_bytes_is_where_the_tpu_compiler_draws_the_line(run: Any) -> None:
    """A program whose argument fits under ``capacity_bytes`` compiles; one that
    does not fails with the compiler's own out-of-memory report, at compile."""
    events = run(_request(code="def f(x):\n    return x.sum()\n", args="jnp.ones(4)",
                          in_shardings=[None], outputs=["memory"]))  # fmt: skip
    capacity = _of(events, "memory")[0]["capacity_bytes"]
    margin = 64 * 2**20  # over the report's 0.01 GiB and the program's own few KiB
    fits = _request(
        code="def f(x):\n    return x.sum()\n",
        args=f"jax.ShapeDtypeStruct(({(capacity - margin) // 4},), jnp.float32)",
        in_shardings=[None],
        outputs=["memory"],
    )
    assert not _of(run(fits), "error")
    too_big = {**fits, "args": f"jax.ShapeDtypeStruct(({(capacity + margin) // 4},), jnp.float32)"}
    error = _error(run(too_big))
    assert error["stage"] == "compile"
    assert "exceeds available HBM" in error["message"]
    assert "does not fit in one TPU device's HBM" in error["hint"]
    assert "error" in _reference({**too_big, "mesh": MESH, "in_shardings": [None]})


@needs_extra
def test_an_unknown_topology_is_libtpus_clear_error(run: Any) -> None:
    error = _error(run(_request(tpu_topology="v5e:3x3")))
    assert error["stage"] == "args" and error["kind"] == "TopologyError"
    assert "libtpu does not know the TPU topology 'v5e:3x3'" in error["message"]
    assert "not divisible" in error["message"]  # libtpu's own reason
    error = _error(run(_request(tpu_topology="v9z:2x2")))
    assert "libtpu does not know the TPU topology 'v9z:2x2'" in error["message"]


@needs_extra
def test_a_mesh_larger_than_the_topology_says_so(run: Any) -> None:
    mesh = {"shape": [2, 4], "axis_names": ["x", "y"], "axis_types": ["auto", "auto"]}
    error = _error(run(_request(mesh=mesh)))
    assert error["stage"] == "args"
    assert "needs 8 devices; the TPU topology 'v5e:2x2' has 4 (TPU v5 lite)" in error["message"]


@needs_extra
def test_a_run_without_an_array_argument_is_refused_not_compiled_for_the_cpu(run: Any) -> None:
    error = _error(run(_request(code="def f():\n    return 1.0\n", args="()", in_shardings=None)))
    assert error["stage"] == "args" and "at least one array argument" in error["message"]
