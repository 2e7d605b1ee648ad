"""Optional extras of JAX that jaxplay installs only when the operator asks: where
one lives in a virtual environment, whether it is there for this JAX, installing it.

Free of JAX (the jail asks whether an environment has one). An extra goes into a
folder of the virtual environment that is not on ``sys.path``, so that no JAX
process finds it on its own (JAX loads every plugin it can import whenever it starts
its backends); the engine points JAX at it only for the runs that ask for it. Being
inside the environment, it is bound read-only into every jail with it. A stamp file,
written last, says which JAX it was installed for: JAX and its extras are released
in lockstep, so another JAX version is refused with what to do.
sandbox/environments/tpu_extra.py and sandbox/environments/cuda_extra.py are the two extras.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path


class ExtraMissing(RuntimeError):
    """The environment has no (or a mismatched) extra; the message says what to do."""


@dataclass(frozen=True)
class Extra:
    field: str  # the request field that needs it ("tpu_topology")
    package: str  # what JAX's extra names ("libtpu")
    jax_extra: str  # the extra of JAX's own metadata that pins it ("tpu")
    folder: str  # the folder of the virtual environment it goes into
    stamp: str  # the stamp file in that folder
    switch: str  # the setup switch ("JAXPLAY_TPU_EXTRA")
    what: str  # words for the install's line ("JAX's TPU extra, Google's terms")
    error: type[ExtraMissing]
    #: the PJRT library released with it, installed at jaxlib's version ("" for none)
    pjrt: str = ""

    def dir(self, prefix: str | Path | None = None) -> Path:
        """Where it lives in the environment at ``prefix`` (default: this one)."""
        return Path(sys.prefix if prefix is None else prefix) / self.folder

    def installed(self, prefix: str | Path | None = None) -> bool:
        return (self.dir(prefix) / self.stamp).is_file()

    def checked_dir(self, jax_version: str, prefix: str | Path | None = None) -> Path:
        """Its folder, when it was installed for ``jax_version``; ``error`` otherwise."""
        folder = self.dir(prefix)
        how = (
            f"the operator installs it for the default JAX version with "
            f"`{self.switch}=1 make setup` (docs/api.md)"
        )
        if not self.installed(prefix):
            raise self.error(
                f"{self.field} needs JAX's {self.package}, which this worker's JAX "
                f"{jax_version} does not have: {how}"
            )
        stamp = json.loads((folder / self.stamp).read_text())
        if stamp.get("jax") != jax_version:
            raise self.error(
                f"this worker's {self.package} {stamp.get('version')} was installed for JAX "
                f"{stamp.get('jax')}, not {jax_version}: {how}"
            )
        return folder

    def requirement(self) -> str:
        """What this environment's JAX asks for in its extra (``libtpu==0.0.50.*``)."""
        for line in metadata.requires("jax") or ():
            spec, _, marker = line.partition(";")
            if re.match(rf"\s*{re.escape(self.package)}\b", spec) and re.search(
                rf"extra\s*==\s*[\"']{re.escape(self.jax_extra)}[\"']", marker
            ):
                return spec.replace(" ", "")
        raise self.error(
            f"JAX {metadata.version('jax')} names no {self.package} in its `{self.jax_extra}` extra"
        )

    def install(self) -> Path:
        """Install what this JAX asks for into ``dir()`` (again only when the JAX
        version changed). Returns the folder."""
        folder = self.dir()
        jax_version = metadata.version("jax")
        if (
            self.installed()
            and json.loads((folder / self.stamp).read_text()).get("jax") == jax_version
        ):
            return folder
        wanted = [self.requirement()]
        if self.pjrt:
            wanted.append(f"{self.pjrt}=={metadata.version('jaxlib')}")
        print(f"setup: installing {' and '.join(wanted)} ({self.what}) into {folder}")
        pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--upgrade"]
        subprocess.run([*pip, "--target", str(folder), *wanted], check=True)
        (dist,) = metadata.distributions(name=self.package, path=[str(folder)])
        stamp = {"jax": jax_version, "version": str(dist.version), "requirement": wanted[0]}
        (folder / self.stamp).write_text(json.dumps(stamp) + "\n")
        return folder
