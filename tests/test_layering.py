"""The architecture's one-way dependencies, enforced (STYLE.md habit 11).

The layering is written as import-linter contracts in pyproject.toml
(``[tool.importlinter]``: ``backend`` above ``sandbox``; within ``sandbox`` the pools
and queue, the zygote and supervisor, the jail, the engine, the protocol; no import
circles; the sandbox never imports the web stack, the server never JAX), which
``make lint`` checks; this test checks them too, and that they stay strict: every
sandbox package in a layer (``exhaustive``), nothing loose at the sandbox's root, no
contract that lets an import through another module. What a static graph cannot say is
checked here at run time: importing every backend module loads no JAX.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _python_files(package: str) -> list[Path]:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no Python files under {package}/"
    return files


def test_the_import_contracts_hold() -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    names = [c["name"] for c in contracts["contracts"]]
    assert {"layers", "acyclic_siblings", "forbidden"} <= {
        c["type"] for c in contracts["contracts"]
    }
    result = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    report = " ".join(result.stdout.split())  # it wraps long names
    assert all(f"{name} KEPT" in report for name in names), report[-4000:]


def test_the_contracts_are_strict() -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    by_id = {c["id"]: c for c in contracts["contracts"]}
    assert by_id["sandbox-layers"].get("exhaustive") is True
    lenient = [c["id"] for c in contracts["contracts"] if c.get("allow_indirect_imports")]
    assert lenient == [], f"contracts that let indirect imports through: {lenient}"
    # one way where the code goes one way: no layer of siblings that may import each other
    assert not [layer for layer in by_id["sandbox-layers"]["layers"] if ":" in layer]


def test_nothing_is_loose_at_the_sandboxs_root() -> None:
    loose = sorted(p.name for p in (ROOT / "sandbox").glob("*.py") if p.name != "__init__.py")
    assert loose == [], f"modules at sandbox/'s root, in no layer: {loose}"


def test_importing_every_backend_module_loads_no_jax() -> None:
    # Transitive imports count too: sandbox.protocol, sandbox.pool... must stay JAX-free.
    modules = sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in _python_files("backend")
    )
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib'))\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"backend pulled in JAX: {result.stdout.strip()[:300]}"
