"""passes, asm, memory and remarks through the real jail, on every installed JAX
version: properties that hold across versions (never pass names)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from tests.pool.test_versions_jail import DEFAULT, OTHERS, Versions
from tests.support.live_pool import needs_bwrap

CODE = """\
import jax
import jax.numpy as jnp

g = jax.jit(lambda x: x * 2)
g(jnp.ones(3))
g(jnp.ones(4))


def f(w, x):
    h = jnp.tanh(x @ w)
    return jnp.sum(jnp.sin(h) ** 2)
"""
BODY = {10, 11}  # the lines of f's body
OUTPUTS = ["hlo", "cost", "passes", "asm", "memory", "remarks"]


@pytest.fixture(scope="module")
def versions() -> Iterator[Versions]:
    live = Versions()
    yield live
    live.close()


def _by_type(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    assert events[-1]["type"] == "done" and events[-1]["status"] == "ok", events[-3:]
    assert not [e for e in events if e["type"] == "error"]
    return {e["type"]: e for e in events}


@needs_bwrap
@pytest.mark.slow
@pytest.mark.parametrize("version", [DEFAULT, *OTHERS])
def test_what_xla_did_on_every_version(versions: Versions, version: str) -> None:
    events = _by_type(
        versions.run(
            code=CODE,
            args="(jnp.ones((16, 16)), jnp.ones((8, 16)))",
            transforms=[{"name": "grad"}, {"name": "jit"}],
            outputs=OUTPUTS,
            jax_version=version,
            cost_before=True,
        )
    )
    assert events["accepted"]["worker"]["jax_version"] == version
    # passes: from the module before optimisation to exactly the hlo output, each a change
    items = events["passes"]["items"]
    assert len(items) >= 3 and "before" in items[0]["pass"]
    assert items[-1]["text"] == events["hlo"]["text"]
    texts = [item["text"] for item in items]
    assert all(a != b for a, b in itertools.pairwise(texts))
    assert {s["line"] for s in items[0]["sources"]} <= BODY
    # asm: instructions, tied to f's lines
    kernels = events["asm"]["kernels"]
    assert kernels and all(len(k["asm"].splitlines()) > 1 for k in kernels)
    assert any(k["lines"] for k in kernels)
    assert all(k["llvm_ir"] and k["llvm_ir_before"] for k in kernels)
    assert {line for k in kernels for line in k["lines"]} <= BODY
    # memory: the buffers' lines are the user's
    memory = events["memory"]
    assert memory["peak_bytes"] and memory["peak_bytes"] > 0
    lines = {b["line"] for b in memory["buffers"] if b["line"] is not None}
    assert lines and lines <= BODY
    assert {"argument", "output"} <= {b["kind"] for b in memory["buffers"]}
    # cost before optimisation beside after
    assert events["cost"]["before"]["flops"] > 0
    # remarks: g compiled again at line 6, for its new shape
    misses = [r for r in events["remarks"]["items"] if r["kind"] == "cache-miss"]
    assert any(r["line"] == 6 for r in misses), events["remarks"]


@needs_bwrap
@pytest.mark.slow
def test_compare_mode_compares_compiler_options(versions: Versions) -> None:
    events = versions.run(
        code=CODE,
        args="(jnp.ones((16, 16)), jnp.ones((8, 16)))",
        transforms=[{"name": "jit"}],
        compare=[[{"name": "jit"}]],
        compare_compiler_options=[{"xla_disable_all_hlo_passes": True}],
        outputs=["hlo", "passes"],
    )
    hlo = {e["pipeline"]: e["text"] for e in events if e["type"] == "hlo"}
    assert hlo["main"] != hlo["0"] and "fusion" in hlo["main"]
    passes = {e["pipeline"]: e["items"] for e in events if e["type"] == "passes"}
    assert len(passes["0"]) < len(passes["main"])
