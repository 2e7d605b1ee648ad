"""passes, asm, memory, remarks and compiler_options, through the engine as a
worker runs it (a fresh ``python -m sandbox.engine`` under the supervisor): properties that hold across JAX
versions, never pass names."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from sandbox.protocol import RunRequest, validate_event
from tests.conftest import run_events

CODE = """import jax
import jax.numpy as jnp

def f(w, x):
    h = jnp.tanh(x @ w)
    return jnp.sum(jnp.sin(h) ** 2)
"""
ARGS = "(jnp.ones((16, 16)), jnp.ones((8, 16)))"


def run(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    events = run_events({"backend": "cpu", **request})
    assert not [e for e in events if e["type"] == "error"], events
    return {e["type"]: e for e in events}


@pytest.fixture(scope="module")
def events() -> dict[str, dict[str, Any]]:
    return run(
        {
            "code": CODE,
            "args": ARGS,
            "transforms": [{"name": "grad"}, {"name": "jit"}],
            "outputs": ["hlo", "passes", "asm", "memory", "cost"],
            "cost_before": True,
        }
    )


@pytest.mark.slow
def test_passes_run_from_before_optimisation_to_the_hlo(events: dict[str, Any]) -> None:
    items = events["passes"]["items"]
    assert len(items) >= 2
    first, last = items[0], items[-1]
    assert "before" in first["pass"] and first["text"] != last["text"]
    assert last["text"] == events["hlo"]["text"]
    texts = [i["text"] for i in items]
    assert all(a != b for a, b in itertools.pairwise(texts)), "a pass changed nothing"
    assert any(s["line"] == 5 for s in first["sources"])


def test_asm_has_instructions_of_the_users_lines(events: dict[str, Any]) -> None:
    kernels = events["asm"]["kernels"]
    assert kernels
    assert all(len(k["asm"].splitlines()) > 1 for k in kernels)
    assert {line for k in kernels for line in k["lines"]} <= {5, 6}
    assert any(k["lines"] for k in kernels)
    assert all("define " in (k["llvm_ir"] or "") for k in kernels)


def test_memory_lines_are_the_users(events: dict[str, Any]) -> None:
    memory = events["memory"]
    assert memory["peak_bytes"] and memory["peak_bytes"] > 0
    kinds = {b["kind"] for b in memory["buffers"]}
    assert {"argument", "output"} <= kinds
    lines = {b["line"] for b in memory["buffers"] if b["line"] is not None}
    assert lines and lines <= {5, 6}


@pytest.mark.slow
def test_cost_before_only_when_asked() -> None:
    """``before`` costs a second conversion of the module to HLO: a request that does
    not ask for it (``cost_before``) gets the optimised module's figures alone."""
    cost = run({"code": CODE, "args": ARGS, "transforms": [{"name": "jit"}], "outputs": ["cost"]})[
        "cost"
    ]
    assert cost["before"] is None and cost["flops"] and cost["flops"] > 0, cost


def test_cost_before_and_after(events: dict[str, Any]) -> None:
    """Both the optimised module's figures ("after": the event's own) and the
    unoptimised one's ("before") count what f's gradient must do, whatever XLA fused."""
    cost = events["cost"]
    after, before = cost, cost["before"]
    assert before is not None, cost
    matmuls = 2 * (2 * 8 * 16 * 16)  # x @ w, and x.T @ its cotangent for grad w.r.t. w
    elementwise = 2 * 8 * 16  # tanh and sin of each of h's elements at least
    # what the call must read and write: w and x in, the gradient (w's shape) out
    arguments, outputs = (16 * 16 + 8 * 16) * 4, 16 * 16 * 4
    for name, figures in (("after", after), ("before", before)):
        assert figures["flops"] is not None and figures["flops"] >= matmuls, (name, figures)
        assert figures["transcendentals"] is not None, (name, figures)
        assert figures["transcendentals"] >= elementwise, (name, figures)
        assert figures["bytes_accessed"] >= arguments + outputs, (name, figures)
    assert cost["memory"]["argument"] == arguments and cost["memory"]["output"] == outputs


@pytest.mark.slow
def test_remarks_name_the_line_and_reason() -> None:
    code = "import jax\nimport jax.numpy as jnp\n\ng = jax.jit(lambda x: x * 2)\ng(jnp.ones(3))\ng(jnp.ones(4))\n\ndef f(x):\n    return x\n"
    remarks = run({"code": code, "args": "(1.0,)", "outputs": ["remarks"]})["remarks"]
    misses = [r for r in remarks["items"] if r["kind"] == "cache-miss"]
    assert any(r["line"] == 6 and "f32[4]" in r["message"] for r in misses), remarks


@pytest.mark.slow
def test_compiler_options_change_the_compile() -> None:
    plain = run({"code": CODE, "args": ARGS, "outputs": ["hlo"]})["hlo"]["text"]
    off = run(
        {
            "code": CODE,
            "args": ARGS,
            "outputs": ["hlo"],
            "compiler_options": {"xla_disable_all_hlo_passes": True},
        }
    )["hlo"]["text"]
    assert "kind=kLoop, calls=%fused" in plain and off != plain


@pytest.mark.parametrize("name", ["xla_dump_to", "xla_gpu_per_fusion_autotune_cache_dir"])
def test_options_that_touch_files_are_refused_by_name(name: str) -> None:
    with pytest.raises(ValidationError, match=name):
        RunRequest.model_validate({"code": "", "compiler_options": {name: "/tmp/x"}})


def test_a_module_over_the_budget_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from sandbox.engine.outputs import passes

    steps = [("p", f"pass{i}", "".join(f"line {j} of {i}\n" for j in range(40))) for i in range(30)]
    whole = sum(len(text) for _, _, text in steps)
    monkeypatch.setattr(passes, "MAX_PASSES_CHARS", whole // 3)
    items, notes = passes._items_within_budget(steps)
    assert items[0]["text"] == steps[0][2] and items[-1]["text"] == steps[-1][2]
    assert all("diff" in item for item in items[1:-1]) and len(items) < len(steps)
    assert any("not shown" in note and "too large" in note for note in notes)
    validate_event({"type": "passes", "items": items, "notes": notes})


def test_the_dump_folder_is_deleted_whatever_happens() -> None:
    from sandbox.engine.core import xla_dump

    with pytest.raises(RuntimeError), xla_dump.dump_folder(True) as dump:
        assert dump is not None
        (dump.folder / "module_0001.x.before_optimizations.txt").write_text("x")
        kept = dump.folder
        raise RuntimeError
    assert not kept.exists()


def test_a_dump_that_filled_its_tmp_is_not_shown(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from sandbox.engine.core import xla_dump
    from sandbox.engine.outputs import asm, passes

    (tmp_path / "module_0001.f.before_optimizations.txt").write_text("HloModule f\n")
    (tmp_path / "module_0001.f.obj-file.k.o").write_bytes(b"cut short")
    dump = xla_dump.Dump(tmp_path)
    monkeypatch.setattr(xla_dump, "MIN_FREE_BYTES", 2**62)  # as if the tmpfs were full
    for event in (passes.passes_event(dump, "HloModule f\n"), asm.asm_event(dump, "")):
        assert not event.get("items") and not event.get("kernels")
        assert "did not fit the run's /tmp" in event["notes"][0]
        validate_event(event)


@pytest.mark.slow
def test_remarks_list_a_checkpoints_residuals_and_warnings() -> None:
    code = (
        "import warnings\nimport jax.numpy as jnp\n\ndef f(x):\n    y = jnp.sin(x)\n"
        "    warnings.warn('careful')\n    return jnp.sum(jnp.cos(y) * x)\n"
    )
    remarks = run(
        {
            "code": code,
            "args": "(jnp.ones(3),)",
            "transforms": [{"name": "checkpoint", "policy": "nothing_saveable"}, {"name": "grad"}],
            "outputs": ["remarks"],
        }
    )["remarks"]["items"]
    kinds = {(r["kind"], r["line"]) for r in remarks}
    assert ("warning", 6) in kinds
    residuals = [r for r in remarks if r["kind"] == "residual"]
    # nothing_saveable: only the argument is kept, every intermediate recomputed
    assert residuals and all("argument" in r["message"] for r in residuals), residuals
