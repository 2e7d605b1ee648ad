"""The ``autodiff`` output on the warm engine: each stage is the jaxpr JAX's own
functions print for the same function (computed here, in the test's process), the
residuals of a known function, and the checkpoint policies compared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import pytest
from jax._src import core
from jax._src.interpreters import partial_eval as pe

SIN_X = """import jax.numpy as jnp

def f(x):
    y = jnp.sin(x)
    return jnp.sum(y * x)
"""


def f(x: Any) -> Any:
    y = jnp.sin(x)
    return jnp.sum(y * x)


def _only(events: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [e for e in events if e["type"] == kind]
    assert len(found) == 1, [e for e in events if e["type"] in ("error", "done")]
    return found[0]


def _expected_stages(fn: Any, x: Any) -> dict[tuple[str, str], str]:
    """Each stage as JAX prints it, made here from JAX's own functions."""
    s = jax.ShapeDtypeStruct(x.shape, x.dtype)
    out_s = jax.ShapeDtypeStruct((), x.dtype)
    held: dict[str, Any] = {}

    def vjp_forward(a: Any) -> Any:
        out, pullback = jax.vjp(fn, a)
        leaves, held["vjp"] = jax.tree_util.tree_flatten(pullback)
        return out, leaves

    def lin_forward(a: Any) -> Any:
        out, f_jvp = jax.linearize(fn, a)
        leaves, held["lin"] = jax.tree_util.tree_flatten(f_jvp)
        return out, leaves

    forward = jax.make_jaxpr(vjp_forward)(x)
    lin = jax.make_jaxpr(lin_forward)(x)
    res = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in forward.out_avals[1:]]
    lin_res = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in lin.out_avals[1:]]
    linear = jax.make_jaxpr(lambda r, t: jax.tree_util.tree_unflatten(held["lin"], r)(t))(
        lin_res, s
    )
    backward = jax.make_jaxpr(lambda r, ct: jax.tree_util.tree_unflatten(held["vjp"], r)(ct))(
        res, out_s
    )
    jvp = jax.make_jaxpr(lambda p, t: jax.jvp(fn, p, t))((x,), (s,))
    known, unknown, _, res_avals = pe.partial_eval_jaxpr_nounits(jvp, [False, True], [False, True])
    classic_res = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in res_avals]

    def transpose(r: Any, ct: Any) -> Any:
        return jax.linear_transpose(
            lambda t: core.eval_jaxpr(unknown.jaxpr, unknown.consts, *r, t), s
        )(ct)

    classic_t = jax.make_jaxpr(transpose)(classic_res, [out_s])
    return {
        ("direct", "forward"): str(forward),
        ("direct", "linear"): str(linear),
        ("direct", "transpose"): str(backward),
        ("classic", "jvp"): str(jvp),
        ("classic", "known"): str(known),
        ("classic", "linear"): str(unknown),
        ("classic", "transpose"): str(classic_t),
    }


@pytest.mark.slow
def test_each_stage_is_the_jaxpr_jax_prints_and_the_residuals_are_sin_cos_x(run) -> None:
    events = run(
        {
            "code": SIN_X,
            "args": "jnp.ones(8)",
            "transforms": [{"name": "grad"}],
            "outputs": ["autodiff"],
        }
    )
    assert events[-1]["status"] == "ok", events
    event = _only(events, "autodiff")
    assert event["transform"] == "grad" and event["wrt"] == ["x"]
    shown = {(s["path"], s["stage"]): s["text"] for s in event["stages"]}
    assert shown == _expected_stages(f, jnp.ones(8))
    # every stage is source-mapped: the sin and the cos are line 4's, the mul line 5's
    for stage in event["stages"]:
        lines = {s["line"] for s in stage["sources"]}
        assert lines == {4, 5}, (stage["path"], stage["stage"], stage["sources"])
    paths = {p["path"]: p for p in event["paths"]}
    assert paths["direct"]["default"] is (jax.config.values.get("jax_use_direct_linearize") is True)
    for path in paths.values():
        assert path["status"] == "ok"
        rows = sorted(
            (r["source"], r["line"], r["shape"], r["dtype"], r["bytes"]) for r in path["residuals"]
        )
        assert rows == [
            ("cos", 4, [8], "float32", 32),
            ("input x", None, [8], "float32", 32),
            ("sin", 4, [8], "float32", 32),
        ]
        assert path["residual_bytes"] == 64  # sin x and cos x: x is the caller's


MLP = """import jax
import jax.numpy as jnp

def f(w1, w2, x):
    h = jnp.tanh(x @ w1)
    return jnp.sum(jnp.tanh(h @ w2) ** 2)
"""


def test_checkpoint_policies_save_more_bytes_and_recompute_fewer_flops(run) -> None:
    events = run(
        {
            "code": MLP,
            "args": "(jnp.ones((16, 32)), jnp.ones((32, 8)), jnp.ones((4, 16)))",
            "transforms": [
                {"name": "checkpoint", "policy": "dots_saveable"},
                {"name": "grad", "argnums": [0, 1]},
            ],
            "outputs": ["autodiff"],
        }
    )
    assert events[-1]["status"] == "ok", events
    event = _only(events, "autodiff")
    assert event["wrt"] == ["w1", "w2"] and event["function"].startswith("checkpoint(f")
    policies = {p["policy"]: p for p in event["policies"]}
    nothing, dots, everything = (
        policies["nothing_saveable"],
        policies["dots_saveable"],
        policies["everything_saveable"],
    )
    assert dots["current"] and not nothing["current"]
    # what the forward pass computes and keeps: nothing; the two matmuls' outputs (f32[4,32]
    # and f32[4,8]); those and the tanh outputs. The inputs saved are listed, not counted.
    assert (nothing["residual_bytes"], dots["residual_bytes"]) == (0, (4 * 32 + 4 * 8) * 4)
    assert dots["residual_bytes"] < everything["residual_bytes"]
    assert nothing["residuals"] < dots["residuals"] < everything["residuals"]
    # nothing saved: the backward pass recomputes both matmuls (2*4*16*32 + 2*4*32*8 flops at least)
    assert nothing["flops_recomputed"] >= 2 * 4 * 16 * 32 + 2 * 4 * 32 * 8
    assert everything["flops_recomputed"] == 0
    assert "cost analysis" in event["flops_source"]


def test_a_pipeline_without_differentiation_says_there_is_nothing(run) -> None:
    events = run(
        {
            "code": SIN_X,
            "args": "jnp.ones(8)",
            "transforms": [{"name": "jit"}],
            "outputs": ["autodiff"],
        }
    )
    assert events[-1]["status"] == "ok", events
    event = _only(events, "autodiff")
    assert event["transform"] is None and event["stages"] == [] and event["paths"] == []
    assert event["notes"][0].startswith("nothing to differentiate")


def _older_version() -> tuple[str, Any] | None:
    """An installed JAX version before 0.7 (classic linearization is its default)."""
    import os

    from sandbox.environments.versions import installed

    root = Path(__file__).resolve().parents[2]
    folder = Path(os.environ.get("JAXPLAY_JAX_VERSIONS_DIR") or root / ".jaxplay" / "versions")
    older = {
        v: env
        for v, env in installed(folder).items()
        if tuple(int(p) for p in v.split(".")[:2]) < (0, 7)
    }
    return max(older.items()) if older else None


@pytest.mark.slow
def test_an_older_jax_takes_the_classic_path_by_default_and_has_both() -> None:
    """One engine process of an installed JAX before 0.7 (its own interpreter, as
    tests/engine/test_golden_versions.py runs them): both paths, classic the default,
    the same residuals (a few seconds: that process imports its JAX)."""
    import json
    import subprocess

    from sandbox.protocol import RunRequest
    from sandbox.supervisor import worker_message
    from tests.gates import missing_requirement

    found = _older_version()
    if found is None:
        missing_requirement(
            "no JAX version before 0.7 installed", ".venv/bin/jaxplay versions add 0.6.2"
        )
    version, env = found
    request = RunRequest.model_validate(
        {
            "code": SIN_X,
            "args": "jnp.ones(8)",
            "transforms": [{"name": "grad"}],
            "outputs": ["autodiff"],
        }
    )
    proc = subprocess.run(
        [env.python, "-I", "-m", "sandbox.engine"],
        input=worker_message("older-autodiff", request),
        capture_output=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
    )
    events = [
        json.loads(line) for line in proc.stdout.decode().splitlines() if line.startswith("{")
    ]
    assert events and events[-1]["status"] == "ok", proc.stderr.decode()[-2000:]
    event = _only(events, "autodiff")
    assert _only(events, "accepted")["worker"]["jax_version"] == version
    paths = {p["path"]: p for p in event["paths"]}
    assert (paths["classic"]["default"], paths["direct"]["default"]) == (True, False)
    for path in paths.values():
        assert path["status"] == "ok"
        assert sorted((r["source"], r["line"]) for r in path["residuals"]) == [
            ("cos", 4),
            ("input x", None),
            ("sin", 4),
        ]
    stages = [(s["path"], s["stage"]) for s in event["stages"]]
    assert stages == [
        ("direct", "forward"),
        ("direct", "linear"),
        ("direct", "transpose"),
        ("classic", "jvp"),
        ("classic", "known"),
        ("classic", "linear"),
        ("classic", "transpose"),
    ]


def test_a_lowering_only_run_gives_the_stages(run) -> None:
    """Autodiff only traces: a run lowered for a platform it does not have gives it too."""
    events = run(
        {
            "code": SIN_X,
            "args": "jnp.ones(8)",
            "transforms": [{"name": "grad"}, {"name": "jit"}],
            "outputs": ["stablehlo", "autodiff"],
            "lowering_platforms": ["tpu"],
        }
    )
    assert events[-1]["status"] == "ok", events
    event = _only(events, "autodiff")
    assert [p["status"] for p in event["paths"]] == ["ok", "ok"] and len(event["stages"]) == 7


def test_per_example_gradients_show_the_stages_of_one_example(run) -> None:
    """``[grad, vmap]``: the stages are grad's at one example (each mapped axis at 0)."""
    events = run(
        {
            "code": SIN_X,
            "args": "jnp.ones((3, 8))",
            "transforms": [{"name": "grad"}, {"name": "vmap"}],
            "outputs": ["autodiff"],
        }
    )
    assert events[-1]["status"] == "ok", events
    event = _only(events, "autodiff")
    assert {(s["path"], s["stage"]): s["text"] for s in event["stages"]} == _expected_stages(
        f, jnp.ones(8)
    )
    assert event["notes"][0].startswith("vmap is applied after grad: the stages are shown for one")


def test_a_python_float_argument_is_differentiated_as_jax_does() -> None:
    """``grad(f)(0.0)``: JAX differentiates a Python float; the stages are those of
    the same float as an array (in this process: autodiff_event called directly)."""
    from sandbox.engine.outputs.autodiff import autodiff_event
    from sandbox.protocol.requests import Transform

    def where_sqrt(x: Any) -> Any:
        return jnp.where(x > 0, jnp.sqrt(x), 0.0)

    assert jnp.isnan(jax.grad(where_sqrt)(0.0))  # JAX takes the float
    event = autodiff_event(where_sqrt, "f", [Transform(name="grad")], {}, (0.0,))
    assert event["wrt"] == ["x"] and not event["notes"], event["notes"]
    shown = {(s["path"], s["stage"]): s["text"] for s in event["stages"]}
    assert shown == _expected_stages(where_sqrt, jnp.asarray(0.0))
    for path in event["paths"]:
        assert path["status"] == "ok"
        assert "div" in [r["source"] for r in path["residuals"]], path["residuals"]
