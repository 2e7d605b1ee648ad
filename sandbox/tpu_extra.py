"""JAX's TPU extra (``libtpu``) for deviceless TPU compiles: where it lives, and
installing it (``JAXPLAY_TPU_EXTRA=1 make setup``, or ``python -m sandbox.tpu_extra``).

Free of JAX: the jail (sandbox/jail/bwrap.py) asks whether an environment has it.
libtpu is Google's binary, under Google Cloud's terms, not an open-source licence
(docs/api.md, "Deviceless TPU compiles"): it is installed only when the operator
asks, never by default. It goes into a folder of the virtual environment that is
not on ``sys.path`` (``<venv>/libtpu-extra``), so that no JAX process finds it on
its own: JAX loads an importable libtpu whenever it looks for backends without
``JAX_PLATFORMS``, costing every such process 200 MiB and the host-wide
``/tmp/libtpu_lockfile``. The engine points ``TPU_LIBRARY_PATH`` at it for the
runs that name a ``tpu_topology`` (sandbox/engine/tpu_topology.py). Being inside the
environment, it is bound read-only into every jail with it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

#: the folder of a virtual environment that holds the extra (not on sys.path)
EXTRA_DIR = "libtpu-extra"
#: what the install wrote: the JAX version it was installed for, and libtpu's
STAMP = "jaxplay-libtpu.json"
#: libtpu's own allocator (tcmalloc) aborts at load unless it can read this host file
#: (the CPUs that may exist); a jail with the extra has it bound read-only
#: (docs/sandbox.md, "The jail")
CPU_POSSIBLE = "/sys/devices/system/cpu/possible"


class TpuExtraMissing(RuntimeError):
    """The environment has no (or a mismatched) TPU extra; the message says what to do."""


def extra_dir(prefix: str | Path | None = None) -> Path:
    """Where the extra of the environment at ``prefix`` (default: this one) lives."""
    return Path(sys.prefix if prefix is None else prefix) / EXTRA_DIR


def installed(prefix: str | Path | None = None) -> bool:
    return (extra_dir(prefix) / STAMP).is_file()


def library_path(jax_version: str, prefix: str | Path | None = None) -> Path:
    """The ``libtpu.so`` installed for ``jax_version``; TpuExtraMissing otherwise."""
    folder = extra_dir(prefix)
    how = "the operator installs it with `JAXPLAY_TPU_EXTRA=1 make setup` (docs/api.md)"
    if not (folder / STAMP).is_file():
        raise TpuExtraMissing(
            f"tpu_topology needs JAX's TPU extra (libtpu), which this worker's JAX "
            f"{jax_version} does not have: {how}"
        )
    stamp = json.loads((folder / STAMP).read_text())
    if stamp.get("jax") != jax_version:
        raise TpuExtraMissing(
            f"this worker's libtpu {stamp.get('libtpu')} was installed for JAX "
            f"{stamp.get('jax')}, not {jax_version}: {how}"
        )
    return folder / "libtpu" / "libtpu.so"


def requirement() -> str:
    """The libtpu that this environment's JAX asks for in its ``tpu`` extra
    (``libtpu==0.0.50.*``): JAX and libtpu are released in lockstep."""
    for line in metadata.requires("jax") or ():
        spec, _, marker = line.partition(";")
        if re.match(r"\s*libtpu\b", spec) and re.search(r"extra\s*==\s*[\"']tpu[\"']", marker):
            return spec.replace(" ", "")
    raise TpuExtraMissing(f"JAX {metadata.version('jax')} names no libtpu in its `tpu` extra")


def install() -> Path:
    """Install the libtpu this JAX asks for into ``extra_dir()`` (again only when the
    JAX version changed). Returns the folder."""
    folder = extra_dir()
    jax_version = metadata.version("jax")
    if installed():
        stamp = json.loads((folder / STAMP).read_text())
        if stamp.get("jax") == jax_version:
            return folder
    wanted = requirement()
    print(f"setup: installing {wanted} (JAX's TPU extra, Google's terms) into {folder}")
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--upgrade"]
    subprocess.run([*pip, "--target", str(folder), wanted], check=True)
    stamp = {"jax": jax_version, "libtpu": _version_in(folder), "requirement": wanted}
    (folder / STAMP).write_text(json.dumps(stamp) + "\n")
    return folder


def _version_in(folder: Path) -> str:
    (dist,) = metadata.distributions(name="libtpu", path=[str(folder)])
    return str(dist.version)


if __name__ == "__main__":
    install()
