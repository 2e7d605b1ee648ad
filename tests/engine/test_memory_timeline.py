"""The memory output's timeline against XLA's own live-range dump: plain JAX in a fresh
process with ``XLA_FLAGS=--xla_dump_to`` compiles the same program, and its
``*-live-range.txt`` says the schedule's length, the peak's step, the values live
there and their bytes; the engine's timeline must say the same, per checkpoint
policy in compare mode too."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from sandbox.environments.versions import installed
from tests.conftest import run_events
from tests.support.warm_engine import WarmEngine

VERSIONS_DIR = Path(
    os.environ.get("JAXPLAY_JAX_VERSIONS_DIR")
    or Path(__file__).resolve().parents[2] / ".jaxplay" / "versions"
)
OTHERS = {v: env for v, env in installed(VERSIONS_DIR).items() if not env.default}

MLP = """import jax
import jax.numpy as jnp

def mlp(params, x):
    for w, b in params:
        x = jnp.tanh(x @ w + b)
    return jnp.sum(x)
"""
MLP_ARGS = "([(jnp.ones((64, 64)) * 0.01, jnp.zeros(64)) for _ in range(3)], jnp.ones((32, 64)))"

#: plain JAX in a fresh process: jit(grad(checkpoint?(mlp))) compiled with XLA's dump
#: on; prints the dump's figures, read with regular expressions of its own
REFERENCE = r"""
import glob, json, os, re, sys
import jax, jax.numpy as jnp
namespace = {}
exec(sys.argv[1], namespace)
entry, policy = sys.argv[5], sys.argv[2]
fn = namespace[entry]
if policy != "-":
    fn = jax.checkpoint(fn, policy=getattr(jax.checkpoint_policies, policy))
args = eval(sys.argv[3], namespace)
jax.jit(jax.grad(fn)).lower(*args).compile()
paths = glob.glob(os.path.join(sys.argv[4], f"*jit_{entry}*after_optimizations-live-range.txt"))
if not paths:
    print(json.dumps(None))
    sys.exit()
text = open(paths[0]).read()
peak = re.search(r"Live ranges at (\d+) \(peak\):\n((?:    .*\n?)*)", text)
values = re.findall(r"^    (\S+?)(?:\{\})?: (\d+) bytes", peak.group(2), re.M)
print(json.dumps({
    "steps": len(re.findall(r"^    \d+:\S+$", text, re.M)),
    "peak_step": int(peak.group(1)),
    "at_peak": {name: int(size) for name, size in values},
}))
"""


def reference(
    policy: str = "-",
    python: str = sys.executable,
    code: str = MLP,
    args: str = MLP_ARGS,
    entry: str = "mlp",
) -> dict[str, Any] | None:
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "XLA_FLAGS": f"--xla_dump_to={folder}", "JAX_PLATFORMS": "cpu"}
        out = subprocess.run(
            [python, "-c", REFERENCE, code, policy, args, folder, entry],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def memory_events(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    events = run_events(
        {"backend": "cpu", "code": MLP, "entry": "mlp", "args": MLP_ARGS, **request}
    )
    assert not [e for e in events if e["type"] == "error"], events
    return {e["pipeline"]: e for e in events if e["type"] == "memory"}


def assert_same_as_xla(timeline: dict[str, Any], xla: dict[str, Any] | None) -> None:
    assert xla is not None, "plain JAX's XLA wrote no live-range dump"
    assert timeline["steps"] == xla["steps"]
    assert timeline["peak_step"] == xla["peak_step"]
    assert timeline["peak_bytes"] == sum(xla["at_peak"].values())
    assert {v["name"]: v["bytes"] for v in timeline["at_peak"]} == xla["at_peak"]
    # the curve is the values live at each step: at XLA's peak step it is XLA's bytes
    assert timeline["stride"] == 1
    assert timeline["points"][timeline["peak_step"]] == timeline["peak_bytes"]


@pytest.fixture(scope="module")
def plain() -> dict[str, dict[str, Any]]:
    return memory_events({"transforms": [{"name": "grad"}, {"name": "jit"}], "outputs": ["memory"]})


def test_the_peak_is_xlas(plain: dict[str, dict[str, Any]]) -> None:
    timeline = plain["main"]["timeline"]
    assert_same_as_xla(timeline, reference())
    # measured on jax 0.12.0.1 CPU (docs/api.md): 25 steps, peak at 22, 115,972 bytes
    if (
        "0.12.0"
        in subprocess.run(
            [sys.executable, "-c", "import jax; print(jax.__version__)"],
            capture_output=True,
            text=True,
        ).stdout
    ):
        assert (timeline["steps"], timeline["peak_step"], timeline["peak_bytes"]) == (
            25,
            22,
            115_972,
        )


def test_bands_stack_to_the_points_and_name_the_users_lines(
    plain: dict[str, dict[str, Any]],
) -> None:
    timeline = plain["main"]["timeline"]
    for i, total in enumerate(timeline["points"]):
        assert sum(b["points"][i] for b in timeline["bands"]) == total
    lines = {b["line"] for b in timeline["bands"]} - {None}
    assert lines and lines <= {5, 6, 7}, timeline["bands"]
    kinds = {v["kind"] for v in timeline["at_peak"]}
    assert "argument" in kinds
    assert all(v["line"] in {5, 6, 7} for v in timeline["at_peak"] if v["kind"] == "temp")
    assert timeline["peak_instruction"]


@pytest.mark.slow
def test_each_checkpoint_policy_has_xlas_peak() -> None:
    policies = ["nothing_saveable", "everything_saveable"]
    by_pipeline = memory_events(
        {
            "transforms": [
                {"name": "checkpoint", "policy": policies[0]},
                {"name": "grad"},
                {"name": "jit"},
            ],
            "compare": [
                [{"name": "checkpoint", "policy": policies[1]}, {"name": "grad"}, {"name": "jit"}]
            ],
            "outputs": ["memory"],
        }
    )
    for pipeline, policy in zip(["main", "0"], policies, strict=True):
        assert_same_as_xla(by_pipeline[pipeline]["timeline"], reference(policy))


def test_a_long_schedule_is_cut_into_strides() -> None:
    """A 300-layer MLP's schedule is over 512 steps: each point is the busiest step of
    its stride, so XLA's peak is still a point's bytes or under one."""
    code = "import jax.numpy as jnp\n\ndef f(w, x):\n    for _ in range(300):\n        x = jnp.tanh(x @ w)\n    return jnp.sum(x)\n"
    events = run_events(
        {
            "backend": "cpu",
            "code": code,
            "args": "(jnp.eye(8), jnp.ones((4, 8)))",
            "transforms": [{"name": "grad"}, {"name": "jit"}],
            "outputs": ["memory"],
        }
    )
    (memory,) = [e for e in events if e["type"] == "memory"]
    timeline = memory["timeline"]
    assert timeline["steps"] > 512 and timeline["stride"] > 1
    assert len(timeline["points"]) == -(-timeline["steps"] // timeline["stride"])
    assert max(timeline["points"]) >= timeline["peak_bytes"]
    assert timeline["points"][timeline["peak_step"] // timeline["stride"]] >= timeline["peak_bytes"]


def test_the_dump_parser_reads_xlas_form() -> None:
    from sandbox.engine.outputs.memory import live_ranges

    text = Path(__file__).with_name("live_range_sample.txt").read_text()
    live = live_ranges.parse(text)
    assert (live.end, len(live.schedule), live.peak_step, live.peak_bytes) == (25, 25, 22, 115_972)
    assert re.fullmatch(r"\w+", live.schedule[0].split(".")[0])
    with pytest.raises(live_ranges.LiveRangeError):
        live_ranges.parse("BufferAssignment:\n")


@pytest.mark.slow
@pytest.mark.skipif(not OTHERS, reason=f"no other JAX version installed in {VERSIONS_DIR}")
@pytest.mark.parametrize("version", sorted(OTHERS))
def test_each_installed_version_has_xlas_peak_or_says_it_has_none(version: str) -> None:
    """Measured: jax 0.10.2's XLA writes the live-range dump; 0.6.2's and 0.4.38's write
    none, and the memory event says so in a note instead of drawing a timeline."""
    python = OTHERS[version].python
    engine = WarmEngine(python=python).start()
    try:
        events = engine.run(
            {
                "backend": "cpu",
                "code": MLP,
                "entry": "mlp",
                "args": MLP_ARGS,
                "transforms": [{"name": "grad"}, {"name": "jit"}],
                "outputs": ["memory"],
            }
        )
    finally:
        engine.stop()
    (memory,) = [e for e in events if e["type"] == "memory"]
    xla = reference(python=str(python))
    if xla is None:
        assert memory.get("timeline") is None
        assert any("no live-range dump" in n for n in memory["notes"]), memory["notes"]
    else:
        assert_same_as_xla(memory["timeline"], xla)


def test_the_smaller_bands_are_one_and_all_stack_to_the_points() -> None:
    """15 code lines' values: the 11 that hold most at their busiest are bands of their
    own, the other 4 one band, and at every point the bands add up to the bytes live."""
    from sandbox.engine.outputs.memory.live_ranges import LiveRanges, ValueRange
    from sandbox.engine.outputs.memory.timeline import timeline

    ranges = [ValueRange(f"v{i}", "{}", i, i + 3) for i in range(15)]
    live = LiveRanges(20, [f"v{i}" for i in range(15)] + ["t"] * 5, ranges, 5, [])
    sizes = {f"v{i}{{}}": 100 * (i + 1) for i in range(15)}
    lines_of = {f"v{i}": {i + 1} for i in range(15)}
    notes: list[str] = []
    result = timeline(live, sizes, lines_of, {}, notes)
    bands = result["bands"]
    assert [b["line"] for b in bands[:11]] == list(range(15, 4, -1))
    assert bands[-1] == {
        "line": None,
        "label": "4 more",
        "points": [sum(100 * (i + 1) for i in range(4) if i <= t <= i + 3) for t in range(20)],
    }
    for t, total in enumerate(result["points"]):
        assert sum(b["points"][t] for b in bands) == total
    # XLA listed nothing at its peak here: its bytes are 0 and the curve is higher
    assert result["peak_bytes"] == 0 and any("add up to more" in n for n in notes)


SCAN = """import jax
import jax.numpy as jnp

def f(w, x):
    def body(c, _):
        return jnp.tanh(c @ w), None
    c, _ = jax.lax.scan(body, x, None, length=5)
    return c.sum()
"""
SCAN_ARGS = "(jnp.ones((16, 16)), jnp.ones((8, 16)))"


def test_a_loops_values_are_counted_and_the_peak_is_xlas() -> None:
    """A scan's while loop: its parameter tuples share the loop's buffers, so the buffer
    assignment lists no size of them; their shapes' bytes count instead (no value
    counted as 0), and the peak is still XLA's."""
    events = run_events(
        {
            "backend": "cpu",
            "code": SCAN,
            "args": SCAN_ARGS,
            "transforms": [{"name": "grad"}, {"name": "jit"}],
            "outputs": ["memory"],
        }
    )
    (memory,) = [e for e in events if e["type"] == "memory"]
    assert not any("counted as 0" in n for n in memory["notes"]), memory["notes"]
    assert_same_as_xla(memory["timeline"], reference(code=SCAN, args=SCAN_ARGS, entry="f"))


def test_shape_bytes_as_xla_counts_them() -> None:
    from sandbox.engine.outputs.memory.shape_sizes import byte_size, instruction_shapes

    hlo = (
        "ENTRY %main.7 (x: f32[8,16]) -> f32[] {\n"
        "  %t = (s32[], f32[8,16]{1,0}, /*index=2*/(bf16[3], pred[2])) parameter(0)\n"
        '  ROOT %r = f32[5,8,16]{2,1,0} copy(%y), metadata={op_name="a, b"}\n'
        "}\n"
    )
    shapes = instruction_shapes(hlo)
    assert shapes["r"] == "f32[5,8,16]{2,1,0}"
    assert byte_size(shapes["r"], "{}") == 5 * 8 * 16 * 4
    assert byte_size(shapes["t"], "{}") == 3 * 8  # a tuple: its pointers
    assert byte_size(shapes["t"], "{0}") == 4
    assert byte_size(shapes["t"], "{1}") == 8 * 16 * 4
    assert byte_size(shapes["t"], "{2}") == 2 * 8
    assert byte_size(shapes["t"], "{2,0}") == 3 * 2
    assert byte_size(shapes["t"], "{2,1}") == 2
    assert byte_size(shapes["t"], "{3}") is None
