"""Setup's choice of .venv's interpreter (scripts/venv_python.sh), run in a scratch
directory with a controlled PATH and pyenv root: the newest Python >= 3.12 found, a
setting naming one, a .venv too old remade, and a clear message naming what to
install when there is none."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "venv_python.sh"
PYENV = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")


def _pyenv(minor: str) -> str | None:
    found = sorted(glob.glob(str(PYENV / "versions" / f"{minor}.*" / "bin" / f"python{minor}")))
    return found[-1] if found else None


def _tools(tmp_path: Path, with_python: str | None) -> Path:
    """A PATH directory holding the tools the script uses, and maybe one python3."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("ls", "sort", "rm", "cat", "dirname"):
        if (where := shutil.which(tool)) is not None:
            (bin_dir / tool).symlink_to(where)
    if with_python:
        (bin_dir / "python3").symlink_to(with_python)
    return bin_dir


def _run(cwd: Path, path: Path, pyenv_root: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/bash", str(SCRIPT)],
        cwd=cwd,
        env={"PATH": str(path), "PYENV_ROOT": str(pyenv_root), "HOME": str(cwd), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _minor(python: Path) -> str:
    out = subprocess.run(
        [str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


@pytest.mark.slow
def test_an_old_venv_is_remade_with_the_newest_python(tmp_path: Path) -> None:
    newest = _pyenv("3.13") or _pyenv("3.12")
    old = _pyenv("3.11") or shutil.which("python3.11")
    if newest is None or old is None:
        pytest.skip("needs pyenv's Python 3.12 or 3.13 and a Python 3.11")
    subprocess.run([old, "-m", "venv", "--without-pip", str(tmp_path / ".venv")], check=True)
    result = _run(tmp_path, _tools(tmp_path, old), PYENV)
    assert result.returncode == 0, result.stderr
    expected = _minor(Path(newest))
    assert f".venv has Python 3.11; recreating it with Python {expected}" in result.stdout
    assert _minor(tmp_path / ".venv" / "bin" / "python") == expected
    # again: nothing to do
    again = _run(tmp_path, tmp_path / "bin", PYENV)
    assert (
        again.returncode == 0
        and "recreating" not in again.stdout
        and "creating" not in again.stdout
    )


@pytest.mark.slow
def test_without_python_3_12_it_says_what_to_install(tmp_path: Path) -> None:
    old = _pyenv("3.11") or shutil.which("python3.11")
    if old is None:
        pytest.skip("needs a Python 3.11")
    empty = tmp_path / "no-pyenv"
    empty.mkdir()
    result = _run(tmp_path, _tools(tmp_path, old), empty)
    assert result.returncode == 0, result.stderr
    assert "no Python 3.12 or 3.13 found; using 3.11" in result.stderr
    assert "pyenv install 3.13" in result.stderr and "JAXPLAY_PYTHON" in result.stderr
    assert _minor(tmp_path / ".venv" / "bin" / "python") == "3.11"


def test_without_any_python_it_fails_naming_what_to_install(tmp_path: Path) -> None:
    empty = tmp_path / "no-pyenv"
    empty.mkdir()
    result = _run(tmp_path, _tools(tmp_path, None), empty)
    assert result.returncode == 1
    assert "no Python >= 3.11 found. Install Python 3.13" in result.stderr
    assert "JAXPLAY_PYTHON=/path/to/python3.13" in result.stderr
    assert not (tmp_path / ".venv").exists()


def test_a_named_python_must_be_recent_enough(tmp_path: Path) -> None:
    result = _run(tmp_path, _tools(tmp_path, None), tmp_path, JAXPLAY_PYTHON="/nonexistent/python")
    assert result.returncode == 1
    assert "JAXPLAY_PYTHON=/nonexistent/python is not a Python >= 3.11" in result.stderr
