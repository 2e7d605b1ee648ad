"""The library set (sandbox/environments/libraries.py): its committed locks agree with the table,
and the pre-import leaves a process a zygote can still fork. Jailed runs of library
code: tests/zygote/test_libraries.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.environments import libraries, library_choices
from sandbox.environments.versions import default_version

ROOT = Path(__file__).resolve().parent.parent


def test_the_committed_library_locks_match_the_table() -> None:
    """The drift check, offline: every lock names each library of the table once
    (pinned, or not offered with pip's reason), pins with hashes, and pins nothing its
    version's own lock pins. (Resolving again needs the package index: `--check
    --resolve`.)"""
    out = subprocess.run(
        [sys.executable, "scripts/lock_libraries.py", "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr


def test_the_drift_check_fails_on_a_lock_that_lost_a_library(tmp_path: Path) -> None:
    lock = libraries.locks_of("0.12.0.1")[0]
    base = lock.parent / lock.name.removeprefix("libraries-")
    (tmp_path / base.name).write_text(base.read_text())
    lines = [ln for ln in lock.read_text().splitlines() if not ln.startswith("optax==")]
    (tmp_path / lock.name).write_text("\n".join(lines) + "\n")
    out = subprocess.run(
        [sys.executable, "scripts/lock_libraries.py", "--check", "--locks", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 1
    assert "optax must be pinned or not offered" in out.stderr


def test_a_lock_line_without_a_hash_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "libraries-jax-0.0.1-py3.13-x86_64.txt"
    bad.write_text("optax==0.2.8\n")
    with pytest.raises(ValueError, match="hash"):
        libraries.read_lock(bad)


def test_the_default_version_offers_the_main_libraries() -> None:
    version = default_version()
    assert version is not None
    offered = libraries.offered(version, f"{sys.version_info[0]}.{sys.version_info[1]}")
    for name in ("flax", "optax", "equinox", "chex", "jaxtyping", "numpyro", "diffrax"):
        assert name in offered, offered


def test_named_in_finds_the_libraries_a_snippet_imports() -> None:
    code = "import jax\nfrom flax import nnx\nimport optax, einops as E\nx = 'import chex'\n"
    assert libraries.named_in(code) == ["flax.nnx", "flax.linen", "optax", "einops"]
    assert libraries.named_in("import jax.numpy as jnp\n") == []


@pytest.mark.slow
def test_preimport_imports_the_set_and_starts_no_backend() -> None:
    """In a fresh process as the zygote has it (JAX imported, no backend): every
    preloaded module of the table is imported, no JAX backend is started
    and no thread (one CPU, as in a jail)."""
    script = (
        "import json, os, sys, jax, jax.numpy\n"
        "from sandbox.environments import libraries\n"
        "done = libraries.preimport()\n"
        "from jax._src import xla_bridge\n"
        "print(json.dumps({'imported': done.imported, 'skipped': done.skipped,\n"
        "  'threads': len(os.listdir('/proc/self/task')),\n"
        "  'backends': len(xla_bridge._backends),\n"
        "  'in_modules': [m for m in done.imported if m in sys.modules]}))\n"
    )
    out = subprocess.run(
        ["taskset", "-c", "0", sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"},
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["skipped"] == {}
    assert result["imported"] == result["in_modules"] == list(libraries.PRELOADED)
    assert result["backends"] == 0
    assert result["threads"] == 1


def test_jaxplay_versions_libraries_lists_each_version_s_set() -> None:
    from typer.testing import CliRunner

    from backend.cli.versions import versions_app

    out = CliRunner().invoke(versions_app, ["libraries", "0.12.0.1", "0.4.38"])
    assert out.exit_code == 0, out.output
    lines = [ln for ln in out.output.splitlines() if not ln.startswith("  alternative: ")]
    for line, version in zip(lines, ("0.4.38", "0.12.0.1"), strict=True):  # oldest first
        pinned = " ".join(f"{k}=={v}" for k, v in libraries.offered(version).items())
        assert line == f"jax {version}: {pinned}"
        assert "flax==" in line and "optax==" in line
    # an alternative the operator offers (sandbox/environments/library_choices.py), under its version
    alt = library_choices.listed("0.12.0.1")[0]
    assert out.output.splitlines()[-1].startswith(f"  alternative: {alt.name}=={alt.version} (")
