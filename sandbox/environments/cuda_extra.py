"""JAX's CUDA plugin for deviceless GPU compiles (``gpu_target``): where it lives,
and installing it (``JAXPLAY_CUDA_EXTRA=1 make setup``, or ``python -m
sandbox.environments.cuda_extra``).

Free of JAX (how an extra is kept and installed: sandbox/environments/extras.py). The plugin (``jax-cuda12-plugin`` and ``jax-cuda12-pjrt``, about
490 MB, Apache-2.0; without NVIDIA's CUDA library wheels, which a compile without a
GPU does not load) goes into a folder of the virtual environment that is not on
``sys.path`` (``<venv>/cuda-extra``): JAX registers every plugin it can import
whenever it starts its backends, which would load the plugin's 490 MB library into
every CPU run. The engine registers it for the runs that name a ``gpu_target``
(sandbox/engine/core/gpu_target.py). Being inside the environment, it is bound
read-only into every jail with it.

A GPU worker does not use this: its JAX is installed with the plugin and the CUDA
libraries (``jax[cuda12]``, docs/deploy.md), and compiles for its own GPU.
"""

from __future__ import annotations

from pathlib import Path

from sandbox.environments.extras import Extra, ExtraMissing


class CudaExtraMissing(ExtraMissing):
    """The environment has no (or a mismatched) CUDA plugin; the message says what to do."""


CUDA = Extra(
    field="gpu_target",
    package="jax-cuda12-plugin",
    # jax's extra that names the plugin without NVIDIA's library wheels
    jax_extra="cuda12-local",
    folder="cuda-extra",
    stamp="jaxplay-cuda.json",
    switch="JAXPLAY_CUDA_EXTRA",
    what="JAX's CUDA plugin, ~490 MB",
    error=CudaExtraMissing,
    # the plugin's PJRT library (the compiler), released with it
    pjrt="jax-cuda12-pjrt",
)
EXTRA_DIR, STAMP = CUDA.folder, CUDA.stamp


def installed(prefix: str | Path | None = None) -> bool:
    return CUDA.installed(prefix)


def plugin_dir(jax_version: str, prefix: str | Path | None = None) -> Path:
    """The folder to put on ``sys.path`` for the plugin installed for ``jax_version``;
    CudaExtraMissing otherwise."""
    return CUDA.checked_dir(jax_version, prefix)


if __name__ == "__main__":
    CUDA.install()
