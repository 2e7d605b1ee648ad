"""JAX's TPU extra (``libtpu``) for deviceless TPU compiles: where it lives, and
installing it (``JAXPLAY_TPU_EXTRA=1 make setup``, or ``python -m sandbox.environments.tpu_extra``).

Free of JAX: the jail (sandbox/jail/bwrap.py) asks whether an environment has it
(how an extra is kept and installed: sandbox/environments/extras.py).
libtpu is Google's binary, under Google Cloud's terms, not an open-source licence
(docs/api.md, "Deviceless TPU compiles"): it is installed only when the operator
asks, never by default. It goes into a folder of the virtual environment that is
not on ``sys.path`` (``<venv>/libtpu-extra``), so that no JAX process finds it on
its own: JAX loads an importable libtpu whenever it looks for backends without
``JAX_PLATFORMS``, costing every such process 200 MiB and the host-wide
``/tmp/libtpu_lockfile``. The engine points ``TPU_LIBRARY_PATH`` at it for the
runs that name a ``tpu_topology`` (sandbox/engine/core/tpu_topology.py). Being inside the
environment, it is bound read-only into every jail with it.
"""

from __future__ import annotations

from pathlib import Path

from sandbox.environments.extras import Extra, ExtraMissing

#: libtpu's own allocator (tcmalloc) aborts at load unless it can read this host file
#: (the CPUs that may exist); a jail with the extra has it bound read-only
#: (docs/sandbox.md, "The jail")
CPU_POSSIBLE = "/sys/devices/system/cpu/possible"


class TpuExtraMissing(ExtraMissing):
    """The environment has no (or a mismatched) TPU extra; the message says what to do."""


TPU = Extra(
    field="tpu_topology",
    package="libtpu",
    jax_extra="tpu",
    folder="libtpu-extra",
    stamp="jaxplay-libtpu.json",
    switch="JAXPLAY_TPU_EXTRA",
    what="JAX's TPU extra, Google's terms",
    error=TpuExtraMissing,
)
EXTRA_DIR, STAMP = TPU.folder, TPU.stamp


def installed(prefix: str | Path | None = None) -> bool:
    return TPU.installed(prefix)


def library_path(jax_version: str, prefix: str | Path | None = None) -> Path:
    """The ``libtpu.so`` installed for ``jax_version``; TpuExtraMissing otherwise."""
    return TPU.checked_dir(jax_version, prefix) / "libtpu" / "libtpu.so"


if __name__ == "__main__":
    TPU.install()
