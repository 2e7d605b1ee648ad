"""The editor's completion index (scripts/gen_completions.py): what the generator makes
of a module is what JAX itself says of its names, and the committed index of the
default version holds it (checked on jax.nn: the whole --check imports the libraries)."""

from __future__ import annotations

import importlib.util
import inspect
import json
from pathlib import Path
from types import ModuleType

import jax

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "frontend" / "src" / "generated" / "completions"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_completions", ROOT / "scripts" / "gen_completions.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_index_of_a_module_is_what_jax_says_of_its_names() -> None:
    index = _generator().module_index("jax.nn")
    assert set(index) == {n for n in jax.nn.__dict__ if not n.startswith("_")} & set(dir(jax.nn))
    kind, signature, doc = index["relu"]
    assert kind == "f"
    assert signature == "(x)"  # relu(x: ArrayLike) -> Array, without its annotations
    assert index["softmax"][1] == "(x, axis=-1, where=None)"
    assert doc == inspect.getdoc(jax.nn.relu).splitlines()[0].strip()
    assert index["initializers"][0] == "m"


def test_the_committed_default_index_is_in_step_with_the_installed_jax() -> None:
    default = (GENERATED / "default.ts").read_text()
    assert f'"{jax.__version__}"' in default
    committed = json.loads((GENERATED / f"{jax.__version__}.json").read_text())
    assert committed["jax"] == jax.__version__
    assert committed["modules"]["jax.nn"] == _generator().module_index("jax.nn")
    assert {"jax", "jax.numpy", "jax.lax", "jax.random", "flax.nnx", "optax", "equinox"} <= set(
        committed["modules"]
    )
