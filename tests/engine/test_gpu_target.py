"""Deviceless GPU compiles (``gpu_target``): the request, and the engine's PTX held to
JAX compiling for the same target directly (tests/engine/gpu_target_reference.py, a fresh
process).

The compiles need JAX's CUDA plugin, which setup installs only when asked
(``JAXPLAY_CUDA_EXTRA=1 make setup``; CI does): without it they skip, saying so,
except where ``JAXPLAY_CUDA_EXTRA=1`` says it must be there. The server's refusal
is in tests/server/test_deviceless_targets.py, the jail's run in
tests/jail/test_gpu_target_jail.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sandbox.environments import cuda_extra
from sandbox.protocol import RunRequest
from sandbox.protocol.gpu_target_request import GPU_TARGETS
from tests.conftest import run_events

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "tests" / "engine" / "gpu_target_reference.py"
CODE = """import jax
import jax.numpy as jnp

def f(w, x):
    h = jnp.tanh(x @ w)
    return jnp.sum(jnp.sin(h) ** 2) + jnp.mean(jnp.exp(w) * w)
"""
BODY = {5, 6}
ARGS = "(jnp.ones((64, 64)), jnp.ones((32, 64)))"

needs_plugin = pytest.mark.skipif(
    not cuda_extra.installed() and os.environ.get("JAXPLAY_CUDA_EXTRA") != "1",
    reason="JAX's CUDA plugin is not installed: `JAXPLAY_CUDA_EXTRA=1 make setup` "
    "installs it (CI does)",
)


def engine(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The engine as a worker runs it (a fresh ``python -m sandbox.engine`` under the
    supervisor), on the CPU backend as in the jail."""
    return run_events({"backend": "cpu", **request})


def by_type(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    assert not [e for e in events if e["type"] == "error"], events
    assert events[-1]["type"] == "done" and events[-1]["status"] == "ok"
    return {e["type"]: e for e in events}


def reference(target: str) -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            str(REFERENCE),
            json.dumps({"code": CODE, "args": ARGS, "gpu_target": target}),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.stdout)
    return result


# --- the request (no plugin needed) ------------------------------------------------


def test_the_targets_are_the_data_files() -> None:
    assert set(GPU_TARGETS) >= {"a100", "h100"}
    assert RunRequest(code="x", gpu_target="h100", outputs=["asm"]).gpu_target == "h100"


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"gpu_target": "h200", "outputs": ["asm"]}, "unknown gpu_target 'h200'; known: a100"),
        ({"gpu_target": "h100"}, "nothing runs: drop ['timing', 'value'] from outputs"),
        ({"gpu_target": "h100", "outputs": ["asm"], "backend": "gpu"}, "backend cpu or auto"),
        (
            {"gpu_target": "h100", "outputs": ["hlo"], "mesh": {"shape": [1], "axis_names": ["x"]}},
            "a mesh is not supported",
        ),
        (
            {"gpu_target": "h100", "outputs": ["stablehlo"], "lowering_platforms": ["cuda"]},
            "do not go together",
        ),
    ],
)
def test_what_does_not_go_with_a_gpu_target_is_refused(fields: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError, match=says.replace("[", r"\[").replace("]", r"\]")):
        RunRequest(code="x", **fields)


def test_without_the_plugin_the_engine_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(cuda_extra.CudaExtraMissing, match="JAXPLAY_CUDA_EXTRA=1 make setup"):
        cuda_extra.plugin_dir("0.12.0.1", prefix=tmp_path)
    (tmp_path / cuda_extra.EXTRA_DIR).mkdir()
    stamp = {"jax": "0.10.2", "plugin": "0.10.2"}
    (tmp_path / cuda_extra.EXTRA_DIR / cuda_extra.STAMP).write_text(json.dumps(stamp))
    with pytest.raises(cuda_extra.CudaExtraMissing, match=r"installed for JAX 0\.10\.2, not 0\.12"):
        cuda_extra.plugin_dir("0.12.0.1", prefix=tmp_path)


@pytest.mark.slow
def test_a_run_without_an_array_argument_is_refused_before_the_plugin_loads() -> None:
    events = engine(
        {
            "code": "def f(x):\n    return x * 2\n",
            "args": "(2.0,)",
            "gpu_target": "h100",
            "outputs": ["hlo"],
        }
    )
    (error,) = [e for e in events if e["type"] == "error"]
    assert error["stage"] == "args"
    assert "needs at least one array argument" in error["message"]


# --- the compiles (the plugin) -----------------------------------------------------


@needs_plugin
@pytest.mark.parametrize("target", GPU_TARGETS)
@pytest.mark.slow
def test_the_ptx_is_what_jax_compiles_for_the_target(target: str) -> None:
    request = {
        "code": CODE,
        "args": ARGS,
        "transforms": [{"name": "grad"}, {"name": "jit"}],
        "outputs": ["jaxpr", "hlo", "asm", "memory", "passes"],
        "gpu_target": target,
    }
    # the engine's fresh worker and the reference's fresh Python, side by side
    with ThreadPoolExecutor(2) as ex:
        ran, referenced = ex.submit(engine, request), ex.submit(reference, target)
        events, expected = by_type(ran.result()), referenced.result()
    assert "value" not in events and "timing" not in events  # nothing ran
    assert events["hlo"]["text"] == expected["hlo"]
    assert events["passes"]["items"][-1]["text"] == expected["hlo"]
    asm = events["asm"]
    assert {k["name"]: k["asm"] for k in asm["kernels"]} == expected["kernels"]
    (target_line,) = expected["targets"]
    assert any(f"for {target_line}:" in note for note in asm["notes"]), asm["notes"]
    assert any("could not autotune" in note for note in asm["notes"]), asm["notes"]
    for kernel in asm["kernels"]:
        # each kernel is an instruction of the HLO, under its own name or with the
        # '.' PTX does not allow made '_'
        assert kernel["fusion"], kernel["name"]
        assert f"%{kernel['fusion']} = " in expected["hlo"]
        assert kernel["name"] == kernel["fusion"].replace(".", "_").replace("-", "_")
        assert "define ptx_kernel" in (kernel["llvm_ir"] or "")
        assert set(kernel["lines"]) <= BODY
    assert {line for k in asm["kernels"] for line in k["lines"]} == BODY
    memory = events["memory"]
    assert memory["peak_bytes"] and memory["peak_bytes"] > 0
    assert {b["line"] for b in memory["buffers"] if b["line"]} <= BODY
    assert memory["device_kind"].startswith("NVIDIA " + target.upper())
    assert memory["capacity_bytes"] == 80 * 2**30
    # the timeline's peak is the one XLA's live-range dump of the GPU compile names
    timeline, xla_peak = memory["timeline"], expected["live_range_peak"]
    assert xla_peak is not None and timeline is not None, memory["notes"]
    assert timeline["peak_step"] == xla_peak["step"]
    assert sorted(v["bytes"] for v in timeline["at_peak"]) == xla_peak["values"]
    assert timeline["peak_bytes"] == sum(xla_peak["values"])
    assert all("adds up" in n or "add up" in n for n in memory["notes"]), memory["notes"]


@needs_plugin
@pytest.mark.slow
def test_a_program_over_the_gpus_memory_compiles_and_a_note_says_it_would_not_fit() -> None:
    events = by_type(
        engine(
            {
                "code": "import jax\nimport jax.numpy as jnp\n\ndef f(x):\n    return jnp.sin(x) @ x\n",
                "args": "(jax.ShapeDtypeStruct((200_000, 200_000), jnp.float32),)",
                "outputs": ["memory"],
                "gpu_target": "h100",
            }
        )
    )
    memory = events["memory"]
    assert memory["peak_bytes"] >= 2 * 200_000**2 * 4 > memory["capacity_bytes"]
    assert any("would not fit" in note for note in memory["notes"]), memory["notes"]


@needs_plugin
@pytest.mark.slow
def test_a_cpu_run_beside_it_still_disassembles_x86() -> None:
    """The plugin is registered only for a gpu_target run: a plain run in the same
    environment compiles for the CPU as before."""
    events = by_type(
        engine(
            {
                "code": CODE,
                "args": ARGS,
                "transforms": [{"name": "jit"}],
                "outputs": ["asm", "memory", "value"],
            }
        )
    )
    kernels = events["asm"]["kernels"]
    assert kernels and not any(".entry" in k["asm"] for k in kernels)
    assert events["memory"]["device_kind"] is None
    assert events["asm"]["notes"] == []
