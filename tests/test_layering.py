"""The architecture's one-way dependencies, enforced (STYLE.md habit 11).

``sandbox`` never imports ``backend`` or the web stack; ``backend`` never imports
JAX, directly or through anything it imports.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WEB_STACK = {"backend", "fastapi", "starlette", "uvicorn"}
JAX = {"jax", "jaxlib"}


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def _python_files(package: str) -> list[Path]:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no Python files under {package}/"
    return files


def test_sandbox_never_imports_backend_or_the_web_stack() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imported_roots(path) & WEB_STACK)
        for path in _python_files("sandbox")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_backend_never_imports_jax_in_its_source() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imported_roots(path) & JAX)
        for path in _python_files("backend")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


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
