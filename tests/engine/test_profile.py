"""profile: the compiled calls under JAX's profiler, on the warm engine (one run for
the module), checked against the run's own ``hlo`` text and against JAX directly."""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from sandbox.engine.outputs import profile
from sandbox.engine.outputs.profile import pass_times, profile_event
from sandbox.environments import tpu_extra
from sandbox.protocol.limits import MAX_TRACE_GZ_BYTES

CODE = """import jax
import jax.numpy as jnp

def mlp(params, x):
    for w, b in params:
        x = jnp.tanh(x @ w + b)
    return jnp.mean(x ** 2)
"""
ARGS = "([(jnp.ones((32, 64)), jnp.zeros(64)), (jnp.ones((64, 16)), jnp.zeros(16))], jnp.ones((8, 32)))"


@pytest.fixture(scope="module")
def events(warm_engine: Any) -> dict[str, Any]:
    got = warm_engine.run(
        {
            "backend": "cpu",
            "code": CODE,
            "entry": "mlp",
            "args": ARGS,
            "transforms": [{"name": "grad"}, {"name": "jit"}],
            "outputs": ["hlo", "profile"],
        }
    )
    assert not [e for e in got if e["type"] == "error"], got
    out = {e["type"]: e for e in got if e["type"] != "stage"}
    out["stages"] = {e["stage"]: e["ms"] for e in got if e["type"] == "stage"}
    return out


@pytest.mark.slow
def test_rows_name_instructions_of_the_hlo_at_their_line(events: dict[str, Any]) -> None:
    rows, hlo = events["profile"]["rows"], events["hlo"]["text"].split("\n")
    assert rows
    for row in rows:
        assert re.match(rf"\s*(ROOT )?%?{re.escape(row['name'])} = ", hlo[row["hlo_line"] - 1])
        assert row["calls"] >= events["profile"]["calls"] >= 1
    # the matmuls run on the user's line 6, and are timed
    assert {r["line"] for r in rows if r["opcode"] in ("dot", "fusion")} == {6}


def test_times_add_up_to_at_most_the_wall_time(events: dict[str, Any]) -> None:
    profile = events["profile"]
    assert 0 < sum(r["total_us"] for r in profile["rows"]) <= profile["wall_us"]
    timeline = profile["timeline"]
    assert {t["name"] for t in timeline} == {r["name"] for r in profile["rows"]}
    assert sum(t["dur_us"] for t in timeline) == pytest.approx(
        sum(r["total_us"] for r in profile["rows"]), rel=1e-3
    )


def test_the_trace_is_gzipped_chrome_json_under_its_bound(events: dict[str, Any]) -> None:
    blob = base64.b64decode(events["profile"]["trace_gz"])
    assert len(blob) <= MAX_TRACE_GZ_BYTES
    trace = json.loads(gzip.decompress(blob))
    ops = {e["args"]["hlo_op"] for e in trace["traceEvents"] if "hlo_op" in e.get("args", {})}
    assert ops == {r["name"] for r in events["profile"]["rows"]}


def test_pass_times_add_up_to_at_most_the_compile(events: dict[str, Any]) -> None:
    passes = events["profile"]["passes"]
    assert passes and all(p["total_us"] > 0 for p in passes)
    assert sum(p["total_us"] for p in passes) / 1000 <= events["stages"]["compile"]


def test_flops_per_instruction_add_up_to_xlas_own_count(events: dict[str, Any]) -> None:
    import jax
    import jax.numpy as jnp

    ns: dict[str, Any] = {}
    exec(CODE, ns)
    params = [(jnp.ones((32, 64)), jnp.zeros(64)), (jnp.ones((64, 16)), jnp.zeros(16))]
    compiled = jax.jit(jax.grad(ns["mlp"])).lower(params, jnp.ones((8, 32))).compile()
    cost: Any = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    assert sum(r["flops"] for r in events["profile"]["rows"]) == cost["flops"]
    peaks = events["profile"]["peaks"]
    assert peaks["device_kind"] == jax.devices()[0].device_kind
    assert peaks["flops_per_s"] > 0 and peaks["bytes_per_s"] > 0
    assert {r["bound"] for r in events["profile"]["rows"]} <= {"compute", "memory"}


def test_leaf_passes_are_the_spans_directly_inside_a_pipeline() -> None:
    src = {"_src": "xla/hlo/pass/hlo_pass_pipeline.cc"}

    def span(name: str, ts: float, dur: float, args: Any = None) -> dict[str, Any]:
        return {
            "ph": "X",
            "pid": 1,
            "tid": 1,
            "name": name,
            "ts": ts,
            "dur": dur,
            "args": args or {},
        }

    events = [
        span("CompileCpuExecutable", 0, 100),
        span("outer (jit_f)", 1, 90, src),
        span("RunInvariantCheckers", 2, 1),
        span("algsimp", 3, 10),
        span("simplification", 20, 40),  # a pass that runs a pipeline: not a leaf
        span("simplification (jit_f)", 21, 30, src),
        span("dce", 22, 5),
        span("algsimp", 30, 4),
    ]
    rows = {(r["pipeline"], r["pass"]): (r["calls"], r["total_us"]) for r in pass_times(events)}
    assert rows == {
        ("outer", "algsimp"): (1, 10.0),
        ("simplification", "dce"): (1, 5.0),
        ("simplification", "algsimp"): (1, 4.0),
    }


@pytest.mark.skipif(
    not tpu_extra.installed() and os.environ.get("JAXPLAY_TPU_EXTRA") != "1",
    reason="JAX's TPU extra (libtpu) is not installed: `JAXPLAY_TPU_EXTRA=1 make setup`",
)
@pytest.mark.slow
def test_a_topology_compile_is_placed_against_the_tpus_published_peaks(run: Any) -> None:
    code = "import jax.numpy as jnp\n\ndef f(x, w):\n    return jnp.tanh(x @ w).sum(0)\n"
    events = run(
        {
            "code": code,
            "args": "(jnp.ones((1024, 512)), jnp.ones((512, 256)))",
            "mesh": {"shape": [2, 2], "axis_names": ["x", "y"], "axis_types": ["auto", "auto"]},
            "in_shardings": [["x", "y"], ["y", None]],
            "tpu_topology": "v5e:2x2",
            "outputs": ["hlo", "profile"],
            "timeout_s": 120,
        }
    )
    assert not [e for e in events if e["type"] == "error"], events
    by = {e["type"]: e for e in events}
    profile, hlo = by["profile"], by["hlo"]["text"].split("\n")
    assert profile["peaks"]["device_kind"] == "TPU v5 lite" and profile["calls"] == 0
    assert "cloud.google.com/tpu/docs/v5e" in profile["peaks"]["source"]
    dots = [r for r in profile["rows"] if r["flops"] and r["flops"] >= 2 * 512 * 256 * 256]
    # the matmul per device: x's block (512, 256) @ w's (256, 256), at line 4; its
    # intensity (~51 FLOP/byte) is under v5e's ridge point (197 TFLOP/s / 819 GB/s)
    assert [(d["line"], d["bound"]) for d in dots] == [(4, "memory")]
    for row in profile["rows"]:
        assert row["name"] in hlo[row["hlo_line"] - 1] and row["total_us"] == 0


def test_every_gpu_target_has_published_peaks() -> None:
    """A gpu_target compile's device kind is its target file's device_description_str
    (what XLA reports); the roofline needs that device's peaks in the table."""
    from sandbox.engine.outputs.profile import roofline
    from sandbox.protocol.gpu_target_request import GPU_TARGETS_DIR

    kinds = [
        re.search(r'device_description_str: "([^"]+)"', p.read_text()).group(1)  # type: ignore[union-attr]
        for p in sorted(GPU_TARGETS_DIR.glob("*.txtpb"))
    ]
    assert kinds
    for kind in kinds:
        peaks = roofline.published_peaks(kind)
        assert peaks is not None and "nvidia.com" in peaks["source"], kind


#: a real TPU's trace: examples/profile_mlp_step.py's f under jit, its compiled call
#: run three times under JAX's profiler on a TPU v5e (JAX 0.10.2), and the compiled
#: module's text (benchmarks/engine/on_accelerator.py's machine, docs/deploy.md)
TPU_TRACE = Path(__file__).with_name("tpu_v5e_profile_trace.json.gz")
TPU_HLO = Path(__file__).with_name("tpu_v5e_profile_hlo.txt")


class _Compiled:
    """What the profile reads of a compiled program: its text and XLA's cost."""

    def __init__(self, text: str) -> None:
        self.text = text

    def as_text(self) -> str:
        return self.text

    def cost_analysis(self) -> dict[str, float]:
        return {"flops": 0.0, "bytes accessed": 0.0}


def test_a_tpu_trace_s_instructions_are_its_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a TPU the instructions the chip ran are the events of its ``XLA Ops`` line,
    named as in the module (no ``hlo_op`` argument, as the CPU's thunks have)."""
    monkeypatch.setattr(profile, "_peaks", lambda: None)  # this machine's are not the TPU's
    with gzip.open(TPU_TRACE, "rt") as file:
        events = json.load(file)
    hlo = TPU_HLO.read_text()
    event = profile_event(_Compiled(hlo), events, wall_us=3000.0, calls=3, passes=None)
    rows = event["rows"]
    assert {"convolution_tanh_fusion", "multiply_reduce_fusion", "copy-start"} <= {
        r["name"] for r in rows
    }
    assert len(rows) == 15 and all(r["calls"] == 3 for r in rows)  # 45 events, 3 calls
    lines = hlo.split("\n")
    for row in rows:
        assert re.match(rf"\s*(ROOT )?%{re.escape(row['name'])} = ", lines[row["hlo_line"] - 1])
        assert row["total_us"] > 0
    assert {t["name"] for t in event["timeline"]} == {r["name"] for r in rows}
    assert not [n for n in event["notes"] if "no executed HLO instruction" in n]
    trace = json.loads(gzip.decompress(base64.b64decode(event["trace_gz"])))
    assert {e["name"] for _, e in profile.executed(trace["traceEvents"])} == {
        r["name"] for r in rows
    }


def test_the_compiled_device_kind_is_read_through_a_pytree_argument() -> None:
    """A model's parameters (a dict) first: the kind is its first leaf's device's. It
    read the first argument's sharding as a sharding, found none, and a deviceless TPU
    compile of the Flax step and the 6-block transformer had no roofline (issue 50)."""
    import jax
    import jax.numpy as jnp

    params = {"b": jnp.zeros(3), "w": jnp.ones((3, 3))}
    compiled = jax.jit(lambda p, x: p["w"] @ x + p["b"]).lower(params, jnp.ones(3)).compile()
    assert profile._compiled_device_kind(compiled) == jax.devices()[0].device_kind
