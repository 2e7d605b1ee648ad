"""Alternative versions of the curated libraries: a request may pick one (issue 22).

Each JAX version's library set (sandbox/environments/libraries.py) has one version of each library,
its default. An operator may offer others, like Compiler Explorer's menu: they are
listed in ``ALTERNATIVES`` (per JAX version: library -> extra versions), then
``scripts/lock_libraries.py --alternatives V`` resolves each with pip together with
V's own lock and the rest of its library set (it must need nothing else: the rest of
the set stays as it is) and writes ``sandbox/environments/version_locks/alternatives-jax-<V>-py<M>-
<machine>.txt``, one line per alternative, its wheel pinned by sha256. ``make setup``
(for the default version) and ``jaxplay versions add V`` install each line alone as an
overlay directory::

    pip install --no-deps --require-hashes --only-binary=:all: --target .jaxplay/libs/<V>/<name>-<version>

A run whose request asks for one (``"libraries": {"optax": "0.2.6"}``) runs in a zygote
started with the overlay first on ``sys.path`` (bwrap.Runtime.path_first), imported
before the fork like the default set; the versioned pool keys its pools by (JAX
version, library choices) and every one of them takes from the machine's one budget.
What ``accepted`` says (``worker.libraries``) is what that zygote's first warm child
found on its ``sys.path`` before any run, never a run's claim.

This module never imports JAX or any library: the server reads it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sandbox.environments import libraries
from sandbox.environments.libraries import LOCKS, canonical

#: The alternatives an operator offers: JAX version -> library (the table's name) ->
#: versions besides the default. Each needs a line in that version's alternatives lock
#: (scripts/lock_libraries.py --alternatives V writes it; --check says when they differ).
ALTERNATIVES: dict[str, dict[str, tuple[str, ...]]] = {
    # an older optax (pure Python, ~370 KB): works with this JAX, Flax and Chex
    "0.12.0.1": {"optax": ("0.2.6",)},
}
#: where the overlays live, beside the versions' environments (.jaxplay/versions)
LIBS = Path(__file__).resolve().parents[2] / ".jaxplay" / "libs"
#: written last into an overlay: the lock line it installed (it is complete)
STAMP = libraries.OVERLAY_STAMP
#: at most this many libraries chosen in one request
MAX_CHOICES = 8

_PIN = re.compile(
    r"^(?P<name>[A-Za-z0-9_.-]+)==(?P<version>\S+)\s+--hash=sha256:(?P<sha>[0-9a-f]{64})$"
)


class LibraryUnavailable(ValueError):
    """A request's library choice this server cannot run; the message says what it offers."""


@dataclass(frozen=True)
class Alternative:
    """One line of an alternatives lock."""

    name: str  # the table's name (``optax``, ``dm-haiku``)
    version: str
    sha256: str

    @property
    def line(self) -> str:
        return f"{canonical(self.name)}=={self.version} --hash=sha256:{self.sha256}"


def pool_name(version: str, picked: Iterable[tuple[str, str]]) -> str:
    """The name of the pool a run goes to: its JAX version and the alternatives its
    zygotes import, sorted (``0.12.0.1 optax==0.2.6``); the version alone for the
    default set. The versioned pool keys its pools by it, the result cache its workers."""
    return " ".join([version, *(f"{name}=={v}" for name, v in sorted(picked))])


def lock_path(version: str, python_version: str, locks: Path = LOCKS) -> Path:
    """The alternatives lock of JAX ``version`` for an interpreter of ``python_version``."""
    minor = ".".join(python_version.split(".")[:2])
    return locks / f"alternatives-jax-{version}-py{minor}-{platform.machine()}.txt"


def read_lock(path: Path) -> list[Alternative]:
    """Parse an alternatives lock (``ValueError`` on a line it does not understand, or
    one naming a package that is not a library of the table)."""
    tables = {canonical(lib.name): lib.name for lib in libraries.LIBRARIES}
    found: list[Alternative] = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _PIN.match(line)
        if m is None:
            raise ValueError(f"{path}:{n}: not a pinned requirement with its hash: {line!r}")
        name = tables.get(canonical(m["name"]))
        if name is None:
            raise ValueError(
                f"{path}:{n}: {m['name']} is not a library of sandbox/environments/libraries.py"
            )
        found.append(Alternative(name, m["version"], m["sha"]))
    return found


def listed(
    version: str, python_version: str | None = None, locks: Path = LOCKS
) -> list[Alternative]:
    """The alternatives committed for JAX ``version`` (its lock for ``python_version``,
    or the first one committed for it); [] without one."""
    if python_version:
        path = lock_path(version, python_version, locks)
        return read_lock(path) if path.is_file() else []
    found = sorted(locks.glob(f"alternatives-jax-{version}-py*-{platform.machine()}.txt"))
    return read_lock(found[0]) if found else []


def overlay_dir(version: str, alt: Alternative, root: Path = LIBS) -> Path:
    return root / version / f"{canonical(alt.name)}-{alt.version}"


def is_installed(version: str, alt: Alternative, root: Path = LIBS) -> bool:
    """Whether the overlay of ``alt`` is installed, complete, from this very lock line."""
    stamp = overlay_dir(version, alt, root) / STAMP
    return stamp.is_file() and stamp.read_text().strip() == alt.line


def offered(
    version: str, python_version: str | None = None, root: Path = LIBS, locks: Path = LOCKS
) -> dict[str, dict[str, object]]:
    """What a request on JAX ``version`` may choose: library -> ``default`` (the set's
    version) and ``alternatives`` (installed overlays), in table order."""
    defaults = libraries.offered(version, python_version, locks)
    extra: dict[str, list[str]] = {}
    for alt in listed(version, python_version, locks):
        if alt.name in defaults and is_installed(version, alt, root):
            extra.setdefault(alt.name, []).append(alt.version)
    return {
        name: {"default": v, "alternatives": extra.get(name, [])} for name, v in defaults.items()
    }


def resolve(
    version: str,
    choices: dict[str, str] | None,
    python_version: str | None = None,
    root: Path = LIBS,
    locks: Path = LOCKS,
) -> tuple[tuple[str, str], ...]:
    """A request's ``libraries`` for JAX ``version``: the alternatives it picks, sorted
    (a default named explicitly drops out: it is the version's own set). Raises
    LibraryUnavailable naming what is offered."""
    if not choices:
        return ()
    return choose(version, choices, offered(version, python_version, root, locks))


def choose(
    version: str, choices: dict[str, str], menu: dict[str, dict[str, object]]
) -> tuple[tuple[str, str], ...]:
    """resolve's answer against ``menu`` (offered's shape: what the machine that runs
    the request has installed; a Redis pool's is what its workers registered)."""
    picked: list[tuple[str, str]] = []
    for name, wanted in sorted(choices.items()):
        entry = menu.get(name)
        if entry is None:
            have = ", ".join(menu) or "none"
            raise LibraryUnavailable(
                f"jax {version} does not offer {name}; it offers: {have} (GET /api/v1/backends)"
            )
        alternatives = entry["alternatives"]
        assert isinstance(alternatives, list)
        if wanted == entry["default"]:
            continue
        if wanted not in alternatives:
            versions = [f"{entry['default']} (default)", *alternatives]
            raise LibraryUnavailable(
                f"{name} {wanted} is not offered with jax {version}; it offers "
                f"{name} {' or '.join(versions)}"
            )
        picked.append((name, wanted))
    return tuple(picked)


def overlays(
    version: str, picked: tuple[tuple[str, str], ...], python_version: str | None = None,
    root: Path = LIBS, locks: Path = LOCKS,
) -> tuple[str, ...]:  # fmt: skip
    """The overlay directories of ``picked`` (resolve's answer), in its order."""
    by = {(a.name, a.version): a for a in listed(version, python_version, locks)}
    return tuple(str(overlay_dir(version, by[choice], root)) for choice in picked)


def install(
    version: str, python_version: str, python: str, root: Path = LIBS, locks: Path = LOCKS,
    say=print,
) -> list[Path]:  # fmt: skip
    """Install each alternative of JAX ``version``'s lock not yet installed, alone
    (``--no-deps --require-hashes``), into its overlay directory; written into a
    scratch directory first and stamped last. Returns the directories installed."""
    done: list[Path] = []
    for alt in listed(version, python_version, locks):
        if is_installed(version, alt, root):
            continue
        target = overlay_dir(version, alt, root)
        target.parent.mkdir(parents=True, exist_ok=True)
        say(f"jax {version}: the alternative {alt.name} {alt.version} into {target}")
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".installing-") as tmp:
            requirement = Path(tmp) / "requirement.txt"
            requirement.write_text(alt.line + "\n")
            into = Path(tmp) / "overlay"
            subprocess.run(
                [
                    python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--no-deps", "--require-hashes", "--only-binary=:all:",
                    "--target", str(into), "-r", str(requirement),
                ],
                check=True,
            )  # fmt: skip
            (into / STAMP).write_text(alt.line + "\n")
            if target.exists():
                shutil.rmtree(target)
            os.replace(into, target)
            os.chmod(target, 0o755)
        done.append(target)
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description="Install the default JAX version's alternatives.")
    parser.add_argument("--root", type=Path, default=LIBS, help="where the overlays go")
    args = parser.parse_args()
    try:
        version = importlib.metadata.version("jax")
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit("no JAX in this environment")
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    install(version, minor, sys.executable, args.root)


if __name__ == "__main__":
    main()
