"""A fresh virtual environment that holds only JAX: what a maintainer pastes a repro into.

Made with ``python -m venv`` on the interpreter .venv was made from, without pip, and
given the very wheels installed in .venv (jax and what it requires, by its metadata:
jaxlib, NumPy, SciPy, ml_dtypes, opt_einsum) without downloading anything: a ``.pth``
file in its site-packages names a folder of symlinks to exactly those distributions'
top-level files (their packages, ``*.libs`` folders and ``.dist-info``, as each
distribution's RECORD lists them). Nothing of jaxplay is there: not ``sandbox``, not
``backend``, not .venv's editable-install finder; ``import sandbox`` fails in it.
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

ROOT_DISTRIBUTION = "jax"


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def jax_distributions() -> list[importlib.metadata.Distribution]:
    """jax and every distribution it requires (extras aside), as installed in .venv."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = [ROOT_DISTRIBUTION]
    while todo:
        name = _name(todo.pop())
        if name in found:
            continue
        dist = importlib.metadata.distribution(name)
        found[name] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(found.values())


def top_level(dist: importlib.metadata.Distribution) -> set[Path]:
    """The site-packages entries a distribution installed (its scripts in bin/ aside)."""
    base = Path(str(dist.locate_file("")))
    names = {f.parts[0] for f in dist.files or [] if f.parts[0] not in ("..", "__pycache__")}
    return {base / name for name in names}


def base_python() -> str:
    """The interpreter .venv was made from (the same Python version, no packages)."""
    return getattr(sys, "_base_executable", sys.executable)


def make(root: Path) -> Path:
    """A fresh venv at ``root/venv`` holding only JAX's distributions; its python."""
    shelf = root / "jax-only"
    shelf.mkdir(parents=True)
    for dist in jax_distributions():
        for entry in top_level(dist):
            (shelf / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    venv = root / "venv"
    subprocess.run([base_python(), "-m", "venv", "--without-pip", str(venv)],
                   check=True, timeout=120)  # fmt: skip
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "jax-only.pth").write_text(f"{shelf}\n")
    return python
