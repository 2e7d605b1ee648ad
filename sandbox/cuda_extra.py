"""JAX's CUDA plugin for deviceless GPU compiles (``gpu_target``): where it lives,
and installing it (``JAXPLAY_CUDA_EXTRA=1 make setup``, or ``python -m
sandbox.cuda_extra``).

Free of JAX. The plugin (``jax-cuda12-plugin`` and ``jax-cuda12-pjrt``, about
490 MB, Apache-2.0; without NVIDIA's CUDA library wheels, which a compile without a
GPU does not load) goes into a folder of the virtual environment that is not on
``sys.path`` (``<venv>/cuda-extra``): JAX registers every plugin it can import
whenever it starts its backends, which would load the plugin's 490 MB library into
every CPU run. The engine registers it for the runs that name a ``gpu_target``
(sandbox/engine/gpu_target.py). Being inside the environment, it is bound
read-only into every jail with it.

A GPU worker does not use this: its JAX is installed with the plugin and the CUDA
libraries (``jax[cuda12]``, docs/deploy.md), and compiles for its own GPU.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

#: the folder of a virtual environment that holds the extra (not on sys.path)
EXTRA_DIR = "cuda-extra"
#: what the install wrote: the JAX version it was installed for, and the plugin's
STAMP = "jaxplay-cuda.json"
#: jax's extra that names the plugin without NVIDIA's library wheels
JAX_EXTRA = "cuda12-local"
PLUGIN = "jax-cuda12-plugin"
#: the plugin's PJRT library (the compiler); released with the plugin, same version
PJRT = "jax-cuda12-pjrt"


class CudaExtraMissing(RuntimeError):
    """The environment has no (or a mismatched) CUDA plugin; the message says what to do."""


def extra_dir(prefix: str | Path | None = None) -> Path:
    """Where the extra of the environment at ``prefix`` (default: this one) lives."""
    return Path(sys.prefix if prefix is None else prefix) / EXTRA_DIR


def installed(prefix: str | Path | None = None) -> bool:
    return (extra_dir(prefix) / STAMP).is_file()


def plugin_dir(jax_version: str, prefix: str | Path | None = None) -> Path:
    """The folder to put on ``sys.path`` for the plugin installed for ``jax_version``;
    CudaExtraMissing otherwise."""
    folder = extra_dir(prefix)
    how = (
        "the operator installs it for the default JAX version with "
        "`JAXPLAY_CUDA_EXTRA=1 make setup` (docs/api.md)"
    )
    if not (folder / STAMP).is_file():
        raise CudaExtraMissing(
            f"gpu_target needs JAX's CUDA plugin ({PLUGIN}), which this worker's JAX "
            f"{jax_version} does not have: {how}"
        )
    stamp = json.loads((folder / STAMP).read_text())
    if stamp.get("jax") != jax_version:
        raise CudaExtraMissing(
            f"this worker's {PLUGIN} {stamp.get('plugin')} was installed for JAX "
            f"{stamp.get('jax')}, not {jax_version}: {how}"
        )
    return folder


def requirement() -> str:
    """The plugin this environment's JAX asks for in its ``cuda12-local`` extra
    (``jax-cuda12-plugin<=0.12.0.1,>=0.12.0.1``): JAX and the plugin are released in
    lockstep."""
    for line in metadata.requires("jax") or ():
        spec, _, marker = line.partition(";")
        if re.match(rf"\s*{PLUGIN}\b", spec) and re.search(
            rf"extra\s*==\s*[\"']{JAX_EXTRA}[\"']", marker
        ):
            return spec.replace(" ", "")
    raise CudaExtraMissing(
        f"JAX {metadata.version('jax')} names no {PLUGIN} in its `{JAX_EXTRA}` extra"
    )


def install() -> Path:
    """Install the plugin this JAX asks for, and its PJRT library, into
    ``extra_dir()`` (again only when the JAX version changed). Returns the folder."""
    folder = extra_dir()
    jax_version = metadata.version("jax")
    if installed():
        stamp = json.loads((folder / STAMP).read_text())
        if stamp.get("jax") == jax_version:
            return folder
    wanted = requirement()
    pjrt = f"{PJRT}=={metadata.version('jaxlib')}"
    print(f"setup: installing {wanted} and {pjrt} (JAX's CUDA plugin, ~490 MB) into {folder}")
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--upgrade"]
    subprocess.run([*pip, "--target", str(folder), wanted, pjrt], check=True)
    stamp = {"jax": jax_version, "plugin": _version_in(folder), "requirement": wanted}
    (folder / STAMP).write_text(json.dumps(stamp) + "\n")
    return folder


def _version_in(folder: Path) -> str:
    (dist,) = metadata.distributions(name=PLUGIN, path=[str(folder)])
    return str(dist.version)


if __name__ == "__main__":
    install()
