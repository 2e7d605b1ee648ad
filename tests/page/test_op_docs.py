"""The page's op documentation (frontend/src/generated/*.json) is what the installed JAX
and jaxlib say: scripts/gen_op_docs.py --check regenerates it and compares."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_generated_op_docs_match_the_installed_jax() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_op_docs.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_tables_cover_what_the_panes_show() -> None:
    generated = ROOT / "frontend" / "src" / "generated"
    prims = json.loads((generated / "jaxpr-primitives.json").read_text())["primitives"]
    ops = json.loads((generated / "stablehlo-ops.json").read_text())["ops"]
    for name in ("sin", "mul", "dot_general", "reduce_sum", "jit", "cond", "scan", "while"):
        assert prims[name]["summary"] and prims[name]["url"].startswith("https://docs.jax.dev/")
        assert "lowering" in prims[name]["transforms"]
    assert {"jvp", "transpose", "vmap"} <= set(prims["mul"]["transforms"])
    for name in ("add", "dot_general", "while", "case", "reduce", "broadcast_in_dim"):
        assert ops[name]["summary"] and ops[name]["url"].startswith(
            "https://openxla.org/stablehlo/"
        )
