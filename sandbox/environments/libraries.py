"""The JAX libraries a run may import: one table, read by everything that needs it.

The table (``LIBRARIES``) names each library as pip does, the modules a jail's zygote
imports before it forks (so that ``from flax import nnx`` in a run costs nothing), and
what it is. Everything else reads it: the lock generator (scripts/lock_libraries.py)
resolves its names against each offered JAX version with pip's resolver;
``jaxplay versions add`` and ``make setup`` install what that lock pins; the API
(``GET /api/v1/backends``) and ``jaxplay versions`` list what each version offers;
the zygote calls ``preimport()``; docs/sandbox.md ("Libraries") describes it.

A version's library lock (``sandbox/environments/version_locks/libraries-jax-<version>-py<minor>-
<machine>.txt``) pins, each wheel by its sha256, the libraries pip resolved as
compatible with that JAX and everything they need beyond the version's own lock. A
library with no release compatible with that JAX (or its interpreter) is named on a
``# not offered:`` line instead: that version does not offer it.

This module never imports JAX or any library at import time: the server reads it.
"""

from __future__ import annotations

import ast
import importlib
import os
import platform
import re
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Library:
    """One library of the curated set."""

    #: pip's name for it (the distribution)
    name: str
    #: its modules that a run imports (``from flax import nnx``): the ones the zygote
    #: imports before it forks when ``preload`` (empty: none)
    imports: tuple[str, ...]
    #: what it is, for people
    what: str
    #: imported by every zygote before it forks, so that a run's import costs nothing;
    #: else by the first run that imports it (its kept process keeps it). The zygote's
    #: start pays the import (CPU) and every jail its memory: measured in
    #: benchmarks/engine/libraries.py
    preload: bool = True
    #: a PEP 440 specifier of the JAX versions that may offer it ("": the resolver
    #: alone decides, from the library's own declared requirements)
    jax: str = ""


#: The curated set. Order is the order of the docs and the API.
LIBRARIES: tuple[Library, ...] = (
    Library("flax", ("flax.nnx", "flax.linen"), "neural networks: NNX and Linen"),
    Library("optax", ("optax",), "gradient transformations and optimizers"),
    Library("equinox", ("equinox",), "neural networks as callable pytrees, filtered transforms"),
    Library("chex", ("chex",), "assertions and test utilities for JAX code"),
    Library("jaxtyping", ("jaxtyping",), "shape and dtype annotations for arrays"),
    Library("beartype", ("beartype",), "the runtime type checker jaxtyping works with"),
    Library("einops", ("einops",), "readable tensor rearrangements"),
    Library("diffrax", ("diffrax",), "differential equation solvers", preload=False),
    Library("lineax", ("lineax",), "linear solvers", preload=False),
    Library(
        "optimistix", ("optimistix",), "root finding, minimisation, least squares", preload=False
    ),
    Library(
        "numpyro", ("numpyro", "numpyro.distributions"), "probabilistic programming", preload=False
    ),
    Library(
        "distrax",
        ("distrax",),
        "probability distributions (TensorFlow Probability's JAX substrate)",
        preload=False,
    ),
    Library("dm-haiku", ("haiku",), "neural networks, the older Haiku API", preload=False),
    Library("treescope", ("treescope",), "pytree and array display"),
    Library(
        "penzai", ("penzai",), "neural networks built for display with treescope", preload=False
    ),
    Library("ml_dtypes", ("ml_dtypes",), "bfloat16, float8 and int4 dtypes for NumPy"),
)
BY_NAME: dict[str, Library] = {lib.name: lib for lib in LIBRARIES}
#: What every zygote imports before it forks.
PRELOADED: tuple[str, ...] = tuple(m for lib in LIBRARIES if lib.preload for m in lib.imports)

#: The top-level packages of the table's modules: the kept process's check compares
#: their classes' attributes as it does JAX's (sandbox/zygote/watch.py).
PACKAGES: frozenset[str] = frozenset(m.partition(".")[0] for lib in LIBRARIES for m in lib.imports)

LOCKS = Path(__file__).resolve().parent / "version_locks"
_NOT_OFFERED = re.compile(r"^# not offered: (?P<name>[A-Za-z0-9_.-]+): (?P<why>.*)$")
_PIN = re.compile(
    r"^(?P<name>[A-Za-z0-9_.-]+)==(?P<version>\S+)\s+--hash=sha256:(?P<sha>[0-9a-f]{64})$"
)


def canonical(name: str) -> str:
    """pip's normal form of a distribution name (PEP 503): ``ml_dtypes`` is ``ml-dtypes``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins(path: Path) -> dict[str, str]:
    """Canonical name -> version of every ``name==version`` line of a lock or
    constraints file (its hash, comments and blank lines are not pins)."""
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        spec = line.split("#", 1)[0].strip()
        if spec:
            name, _, rest = spec.partition("==")
            pins[canonical(name)] = rest.split()[0]
    return pins


def lock_path(version: str, python_version: str, locks: Path = LOCKS) -> Path:
    """The library lock of JAX ``version`` for an interpreter of ``python_version``
    (3.13 or 3.13.0) on this kind of machine, beside the version's own lock."""
    minor = ".".join(python_version.split(".")[:2])
    return locks / f"libraries-jax-{version}-py{minor}-{platform.machine()}.txt"


@dataclass(frozen=True)
class LibraryLock:
    """What one library lock says."""

    path: Path
    #: every package it pins: canonical name -> (version, sha256)
    pins: dict[str, tuple[str, str]]
    #: the table's libraries it does not offer, with pip's reason
    not_offered: dict[str, str] = field(default_factory=dict)
    #: what the version's own lock pins (canonical name -> version): a library of the
    #: table that JAX itself needs (``ml_dtypes``) is offered at that pin
    base: dict[str, str] = field(default_factory=dict)

    def offered(self) -> dict[str, str]:
        """The table's libraries this lock offers: name -> version, in table order."""
        found: dict[str, str] = {}
        for lib in LIBRARIES:
            pin = self.pins.get(canonical(lib.name))
            if pin is not None:
                found[lib.name] = pin[0]
            elif (version := self.base.get(canonical(lib.name))) is not None:
                found[lib.name] = version
        return found


def read_lock(path: Path) -> LibraryLock:
    """Parse a library lock (``ValueError`` on a line it does not understand)."""
    pins: dict[str, tuple[str, str]] = {}
    not_offered: dict[str, str] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if m := _NOT_OFFERED.match(line):
            not_offered[m["name"]] = m["why"]
        elif line.startswith("#"):
            continue
        elif m := _PIN.match(line):
            pins[canonical(m["name"])] = (m["version"], m["sha"])
        else:
            raise ValueError(f"{path}:{n}: not a pinned requirement with its hash: {line!r}")
    version_lock = path.with_name(path.name.removeprefix("libraries-"))
    base = lock_pins(version_lock) if version_lock.is_file() else {}
    return LibraryLock(path, pins, not_offered, base)


def locks_of(version: str, locks: Path = LOCKS) -> list[Path]:
    """Every library lock committed for JAX ``version`` (one per interpreter)."""
    pattern = f"libraries-jax-{version}-py*-{platform.machine()}.txt"
    return sorted(locks.glob(pattern))


def offered(version: str, python_version: str | None = None, locks: Path = LOCKS) -> dict[str, str]:
    """The libraries JAX ``version`` offers and their versions, from its committed lock
    for ``python_version`` (or the first lock committed for it); {} without one."""
    path = lock_path(version, python_version, locks) if python_version else None
    if path is None or not path.is_file():
        found = locks_of(version, locks)
        if not found:
            return {}
        path = found[0]
    return read_lock(path).offered()


def installed(prefix: str | Path) -> dict[str, str]:
    """The table's libraries installed in the environment at ``prefix``, by reading its
    packages' metadata directories (nothing is imported): name -> version."""
    wanted = {canonical(lib.name): lib.name for lib in LIBRARIES}
    found: dict[str, str] = {}
    for site in Path(prefix).glob("lib/python*/site-packages"):
        for info in site.glob("*.dist-info"):
            dist, _, version = info.name.removesuffix(".dist-info").partition("-")
            name = wanted.get(canonical(dist))
            if name is not None:
                found[name] = version
    return {lib.name: found[lib.name] for lib in LIBRARIES if lib.name in found}


_HERE: dict[str, str] | None = None
#: written last into a library overlay (sandbox/environments/library_choices.py): it is complete
OVERLAY_STAMP = ".jaxplay-overlay"


def installed_here() -> dict[str, str]:
    """The table's libraries in this interpreter's environment (read once per process:
    ``accepted`` says them on every run, and the result cache's key covers them)."""
    global _HERE
    if _HERE is None:
        _HERE = {**installed(sys.prefix), **overlaid(sys.path)}
    return dict(_HERE)


def overlaid(path: Iterable[str]) -> dict[str, str]:
    """The table's libraries in the overlay directories on ``path`` (``sys.path``):
    another version of a library, put before the environment's own by a request's
    choice (sandbox/environments/library_choices.py); the first found wins, as for an import."""
    wanted = {canonical(lib.name): lib.name for lib in LIBRARIES}
    found: dict[str, str] = {}
    for entry in path:
        directory = Path(entry or ".")
        if not (directory / OVERLAY_STAMP).is_file():
            continue
        for info in directory.glob("*.dist-info"):
            dist, _, version = info.name.removesuffix(".dist-info").partition("-")
            name = wanted.get(canonical(dist))
            if name is not None:
                found.setdefault(name, version)
    return found


# --- importing the set before the fork -----------------------------------------------


def named_in(code: str) -> list[str]:
    """The table's modules whose top-level package ``code`` imports (``import optax``,
    ``from flax import nnx``, at any depth), in table order: what would be imported
    for a request if only the libraries it names were ([] for code that does not parse)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.partition(".")[0])
    return [mod for lib in LIBRARIES for mod in lib.imports if mod.partition(".")[0] in roots]


@dataclass
class Preimported:
    """What ``preimport`` did."""

    imported: list[str] = field(default_factory=list)
    #: module -> why it was not imported (not installed here, or its import failed)
    skipped: dict[str, str] = field(default_factory=dict)
    ms: float = 0.0
    #: threads the imports started (a BLAS's pool where the process may use several
    #: CPUs): a zygote reports its thread count before it forks
    threads_started: int = 0


def preimport(modules: Iterable[str] | None = None) -> Preimported:
    """Import the table's preloaded modules (or ``modules``) that this environment has,
    before a zygote forks, so that a run's own import of them finds them in ``sys.modules``.

    A library missing here (a JAX version that does not offer it) is skipped, and so is
    one whose import fails. Raises ``RuntimeError`` if an import started a JAX backend:
    a zygote must not fork after that."""
    done = Preimported()
    threads = (threading.active_count(), _os_threads())
    started = time.monotonic()
    wanted = list(modules) if modules is not None else list(PRELOADED)
    for module in wanted:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            done.skipped[module] = f"{type(exc).__name__}: {exc}"[:200]
            continue
        except Exception as exc:  # a library broken against this JAX: not offered here
            done.skipped[module] = f"{type(exc).__name__}: {exc}"[:200]
            continue
        done.imported.append(module)
    done.ms = (time.monotonic() - started) * 1000
    done.threads_started = threading.active_count() + _os_threads() - sum(threads)
    if _backend_started():
        raise RuntimeError(f"importing {done.imported} started a JAX backend before the fork")
    return done


def _os_threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def _backend_started() -> bool:
    bridge = sys.modules.get("jax._src.xla_bridge")
    backends = getattr(bridge, "_backends", None)
    return bool(backends)
