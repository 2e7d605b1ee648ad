"""The JAX versions a deployment offers, where each one lives, and how to install one.

The default version is the JAX installed in jaxplay's own environment (``.venv``): the
newest offered release the machine's interpreter can run (``setup_default``), pinned
by setup, never whatever PyPI released since. Every other version lives in an environment
of its own, ``<versions_dir>/<version>/``, a virtual environment made with an
interpreter that version has wheels for, holding ``jax``, ``jaxlib``, the NumPy of its
day and what the engine imports besides (pydantic). The ``sandbox`` package itself is
not copied: a ``.pth`` file puts this checkout on the environment's ``sys.path``, so
every version runs the same engine (which adapts to each version's API, see
``sandbox/engine/core/compat.py``).

An environment counts as installed only once its stamp file is written, last, after
a check that it imports JAX at the right version and the engine; a half-made one (an
install that failed or was interrupted) is wiped and made again by the next ``add``.

Installing is an operator's act (``jaxplay versions add``), never a run's: what it
installs is pinned, every wheel by its sha256, in a lock committed with jaxplay
(``sandbox/environments/version_locks/jax-<version>-py<minor>-<machine>.txt``, made by ``jaxplay
versions lock``, read by ``pip install --require-hashes``), and each of its steps has
a time limit (``install``'s ``timeout_s``). The JAX libraries runs may import (Flax,
Optax, Equinox...: sandbox/environments/libraries.py) come from a second lock beside it,
``libraries-jax-<version>-...``, installed after it the same way.

This module never imports JAX: the server reads versions from package metadata.
"""

from __future__ import annotations

import glob
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import sandbox
from sandbox.environments import libraries, library_choices

#: how a JAX version is spelled: a request's ``jax_version`` (``0.4.38``, ``0.12.0.1``),
#: an environment's folder, a lock's name
JAX_VERSION_PATTERN = r"^\d+\.\d+\.\d+(\.\d+)?$"
_VERSION = re.compile(JAX_VERSION_PATTERN)

#: written last into an environment: it is complete
STAMP = ".jaxplay-version.json"
#: puts this checkout (the ``sandbox`` package) on an environment's sys.path
PTH_NAME = "jaxplay-sandbox.pth"
#: what the engine imports besides JAX: pydantic (sandbox/protocol/); flatbuffers, which
#: ``jax.export`` needs to serialize an artifact (the ``export`` output)
ENGINE_REQUIREMENTS = ("flatbuffers>=24", "pydantic>=2.6")
#: the committed locks: every package of a version's environment, pinned with its hash
LOCKS = Path(__file__).resolve().parent / "version_locks"
#: how long one install (or lock) may take in all: a venv, ~600 MB of wheels, a check
INSTALL_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Release:
    """A JAX version jaxplay offers."""

    version: str
    #: interpreter versions it has wheels for, the one to use first
    pythons: tuple[str, ...]
    #: pins besides jax and jaxlib: the NumPy/SciPy/ml_dtypes of its day, which
    #: it was tested with (today's may have dropped what it uses)
    pins: tuple[str, ...]
    #: what users meet in it, for `jaxplay versions`
    note: str


_OLD = ("3.12", "3.11", "3.13", "3.10")
_MID = ("3.11", "3.12", "3.13")
_NEW = ("3.13", "3.12")

#: Oldest first. Checked against PyPI's wheels when this list was made: 0.4.38 to
#: 0.6.2 have wheels for CPython 3.10-3.13, 0.7.x to 0.10.x for 3.11 and later,
#: 0.11 and later for 3.12 and later.
RELEASES: tuple[Release, ...] = (
    Release(
        "0.4.38",
        _OLD,
        ("numpy<2.3", "scipy<1.15", "ml_dtypes<0.6"),
        "the last 0.4 release",
    ),
    Release(
        "0.5.3",
        _OLD,
        ("numpy<2.3", "scipy<1.16", "ml_dtypes<0.6"),
        "",
    ),
    Release(
        "0.6.2",
        _OLD,
        ("numpy<2.4", "scipy<1.17", "ml_dtypes<0.6"),
        "",
    ),
    Release(
        "0.7.2",
        _MID,
        ("numpy<2.4", "scipy<1.17"),
        "Shardy partitioner by default, direct linearization (new grad jaxprs)",
    ),
    Release("0.8.3", _MID, (), "pmap implemented as jit + shard_map"),
    Release("0.9.2", _MID, (), ""),
    Release("0.10.2", _MID, (), "the newest JAX for Python 3.11"),
    Release("0.11.2", _NEW, (), "needs Python 3.12"),
    Release("0.12.0.1", _NEW, (), ""),
)
OFFERED: dict[str, Release] = {r.version: r for r in RELEASES}


def version_key(version: str) -> tuple[int, ...]:
    """For sorting: 0.4.38 before 0.10.2 (a part that is not a number sorts first)."""
    return tuple(int(part) if part.isdigit() else -1 for part in version.split("."))


def default_version() -> str | None:
    """The JAX of jaxplay's own environment (read from its metadata, never imported)."""
    try:
        return importlib.metadata.version("jax")
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class Environment:
    """Where one JAX version runs: its interpreter, venv and base runtime."""

    version: str
    python: str  # <prefix>/bin/python
    prefix: str  # the virtual environment
    base_prefix: str  # the interpreter's own installation (sys.base_prefix)
    python_version: str
    default: bool


def default_environment() -> Environment | None:
    version = default_version()
    if version is None:
        return None
    return Environment(
        version=version,
        python=str(Path(sys.prefix).absolute() / "bin" / "python"),
        prefix=str(Path(sys.prefix).absolute()),
        base_prefix=os.path.realpath(sys.base_prefix),
        python_version=".".join(map(str, sys.version_info[:3])),
        default=True,
    )


def environment(root: Path, version: str) -> Environment | None:
    """The environment of ``version`` under ``root`` if installed (stamped) there."""
    prefix = root / version
    try:
        stamp = json.loads((prefix / STAMP).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(stamp, dict) or stamp.get("jax") != version:
        return None
    return Environment(
        version=version,
        python=str(prefix.absolute() / "bin" / "python"),
        prefix=str(prefix.absolute()),
        base_prefix=str(stamp.get("base_prefix", "")),
        python_version=str(stamp.get("python", "")),
        default=False,
    )


def installed(root: Path) -> dict[str, Environment]:
    """Every version that can run here: the default and each stamped environment."""
    found: dict[str, Environment] = {}
    if root.is_dir():
        for child in root.iterdir():
            if _VERSION.match(child.name) and (env := environment(root, child.name)):
                found[env.version] = env
    default = default_environment()
    if default is not None:
        found[default.version] = default  # the default's own env wins over a copy
    return dict(sorted(found.items(), key=lambda item: version_key(item[0])))


@dataclass(frozen=True)
class Row:
    """One line of `jaxplay versions` and of /api/v1/backends' ``versions``."""

    version: str
    installed: bool
    default: bool
    python: str  # the interpreter it runs (installed) or would use (not installed)
    note: str


def listing(root: Path, default: str | None = None) -> list[Row]:
    """Offered and installed versions, oldest first. ``default``: the version runs get
    when they name none (by default, that of jaxplay's own environment)."""
    have = installed(root)
    default = default or default_version()
    rows: list[Row] = []
    versions = set(OFFERED) | set(have) | ({default} if default else set())
    for version in sorted(versions, key=version_key):
        env = have.get(version)
        release = OFFERED.get(version)
        is_default = version == default
        if env is not None:
            python = env.python_version
        elif is_default:
            python = ".".join(map(str, sys.version_info[:3]))
        else:
            found = find_python(release.pythons) if release else None
            python = f"{found[1]} (would use)" if found else "none found"
        rows.append(
            Row(
                version=version,
                installed=env is not None or is_default,
                default=is_default,
                python=python,
                note=release.note if release else "",
            )
        )
    return rows


# --- interpreters --------------------------------------------------------------------


#: interpreter path -> (its file's mtime, its version): the server lists the versions
#: for every page (GET /api/v1/backends), and starting each candidate interpreter
#: there took ~1 s on its event loop; one that is replaced gets a new mtime
_PYTHON_VERSIONS: dict[str, tuple[int, str | None]] = {}


def _python_version(python: str) -> str | None:
    try:
        mtime = os.stat(python).st_mtime_ns
    except OSError:
        return None
    known = _PYTHON_VERSIONS.get(python)
    if known is not None and known[0] == mtime:
        return known[1]
    version = _ask_python_version(python)
    _PYTHON_VERSIONS[python] = (mtime, version)
    return version


def _ask_python_version(python: str) -> str | None:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _candidates(minor: str) -> list[str]:
    """Interpreters of one minor version: a setting, pyenv's (newest patch first), PATH."""
    named = os.environ.get(f"JAXPLAY_PYTHON_{minor.replace('.', '_')}")
    found = [named] if named else []
    pyenv_root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    builds = glob.glob(os.path.join(pyenv_root, "versions", f"{minor}.*", "bin", f"python{minor}"))
    found += sorted(builds, key=_build_key, reverse=True)
    if on_path := shutil.which(f"python{minor}"):
        found.append(on_path)
    return found


def _build_key(python: str) -> tuple[int, ...]:
    """pyenv's ``versions/3.12.1/bin/python3.12`` -> (3, 12, 1); odd names sort first."""
    name = Path(python).parents[1].name
    return version_key(name) if re.match(r"^\d+(\.\d+)*$", name) else (0,)


def find_python(minors: Iterable[str]) -> tuple[str, str] | None:
    """(interpreter, its version) of the first minor version found, in the order given."""
    for minor in minors:
        for python in _candidates(minor):
            version = _python_version(python)
            if version is not None and version.rsplit(".", 1)[0] == minor:
                return python, version
    return None


# --- installing ----------------------------------------------------------------------


class InstallError(RuntimeError):
    pass


def unknown_version_message(version: str) -> str:
    return f"jax {version} is not offered; offered: {', '.join(OFFERED)}"


def requirements(release: Release) -> list[str]:
    """What a version's environment asks for, before it is pinned by a lock."""
    return [
        f"jax=={release.version}",
        f"jaxlib=={release.version}",
        *release.pins,
        *ENGINE_REQUIREMENTS,
    ]


def setup_default(python_version: str) -> Release:
    """The JAX that setup installs into jaxplay's own environment, the default version:
    the newest offered release with wheels for that interpreter. Offered, not PyPI's
    newest: a JAX released after this list was never run through the tests (nor the
    library lock made for it), and its extras may not be published yet."""
    minor = ".".join(python_version.split(".")[:2])
    for release in reversed(RELEASES):
        if minor in release.pythons:
            return release
    raise InstallError(f"no offered JAX version has wheels for Python {minor}")


def setup_constraints(python_version: str, locks: Path = LOCKS) -> list[str]:
    """Pip constraints that hold the default environment at ``setup_default``: every
    package of its committed lock at the lock's version, or just jax and jaxlib where
    none is committed for this interpreter."""
    release = setup_default(python_version)
    path = lock_path(release.version, python_version, locks)
    if not path.is_file():
        return [f"jax=={release.version}", f"jaxlib=={release.version}"]
    return [f"{name}=={version}" for name, version in libraries.lock_pins(path).items()]


def lock_path(version: str, python_version: str, locks: Path = LOCKS) -> Path:
    """The lock of ``version`` for an interpreter of ``python_version`` (3.11 or
    3.11.7) on this kind of machine: wheels differ by both."""
    minor = ".".join(python_version.split(".")[:2])
    return locks / f"jax-{version}-py{minor}-{platform.machine()}.txt"


def no_lock_message(version: str, looked: list[Path]) -> str:
    shown = ", ".join(str(p) for p in looked) or "(no interpreter found)"
    return (
        f"jax {version} has no committed lock of pinned hashes for an interpreter found here "
        f"(looked for {shown}): an operator makes one with `jaxplay versions lock {version}`, "
        "reviews and commits it, then runs `jaxplay versions add` again"
    )


class _Deadline:
    def __init__(self, version: str, timeout_s: float) -> None:
        self.version, self.timeout_s = version, timeout_s
        self.at = time.monotonic() + timeout_s

    def left(self) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise self.error()
        return left

    def error(self) -> InstallError:
        return InstallError(
            f"jax {self.version}: stopped after the {self.timeout_s:g} s time limit"
        )


def lock(
    version: str,
    *,
    locks: Path = LOCKS,
    say: Callable[[str], None] = print,
    timeout_s: float = INSTALL_TIMEOUT_S,
    pip_output: int | None = None,
) -> Path:
    """Resolve ``version``'s environment (pip, in a scratch venv of the interpreter it
    would use, downloading nothing it does not need) and write every package pinned
    with its sha256: the lock ``install`` requires. The operator reviews and commits it."""
    release = OFFERED.get(version)
    if release is None:
        raise InstallError(unknown_version_message(version))
    found = find_python(release.pythons)
    if found is None:
        raise InstallError(_no_python_message(release))
    python, python_version = found
    deadline = _Deadline(version, timeout_s)
    with tempfile.TemporaryDirectory(prefix="jaxplay-lock-") as tmp:
        say(
            f"jax {version}: resolving {' '.join(requirements(release))} with Python {python_version}"
        )
        _check_call([python, "-m", "venv", f"{tmp}/venv"], pip_output, deadline)
        report = Path(tmp, "report.json")
        _check_call(
            [
                f"{tmp}/venv/bin/python", "-m", "pip", "install",
                "--disable-pip-version-check", "--dry-run", "--ignore-installed",
                "--only-binary=:all:", "--report", str(report), *requirements(release),
            ],
            pip_output,
            deadline,
        )  # fmt: skip
        resolved = json.loads(report.read_text())["install"]
    lines = []
    for item in resolved:
        meta, info = item["metadata"], item.get("download_info") or {}
        digest = ((info.get("archive_info") or {}).get("hashes") or {}).get("sha256")
        if not digest:
            raise InstallError(f"jax {version}: pip gave no sha256 for {meta['name']}")
        lines.append(f"{meta['name'].lower()}=={meta['version']} --hash=sha256:{digest}")
    path = lock_path(version, python_version, locks)
    locks.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"# jax {version} for CPython {'.'.join(python_version.split('.')[:2])} on "
        f"{platform.machine()}: every package of its environment, pinned by hash.\n"
        f"# Made by `jaxplay versions lock {version}`; `jaxplay versions add` installs "
        "exactly this (pip --require-hashes).\n" + "\n".join(sorted(lines)) + "\n"
    )
    say(f"jax {version}: wrote {path} ({len(lines)} packages): review and commit it")
    return path


def _no_python_message(release: Release) -> str:
    first = release.pythons[0]
    return (
        f"jax {release.version} needs Python {' or '.join(sorted(release.pythons))} and none is "
        f"installed: install one (e.g. `pyenv install {first}`) or name it with "
        f"JAXPLAY_PYTHON_{first.replace('.', '_')}=/path/to/python{first}"
    )


def _locked_python(release: Release, locks: Path) -> tuple[str, str, Path]:
    """(interpreter, its version, the lock) for the first of ``release``'s interpreters
    found here that has a committed lock."""
    looked: list[Path] = []
    any_python = False
    for minor in release.pythons:
        found = find_python([minor])
        if found is None:
            continue
        any_python = True
        path = lock_path(release.version, found[1], locks)
        if path.is_file():
            return found[0], found[1], path
        looked.append(path)
    if not any_python:
        raise InstallError(_no_python_message(release))
    raise InstallError(no_lock_message(release.version, looked))


def install(
    root: Path,
    version: str,
    *,
    say: Callable[[str], None] = print,
    pip_output: int | None = None,
    locks: Path = LOCKS,
    timeout_s: float = INSTALL_TIMEOUT_S,
) -> Environment:
    """Make ``root/version``: a venv with exactly the packages of the version's
    committed lock (every wheel checked against its sha256), checked, then stamped.
    Every step together within ``timeout_s``.

    ``say`` gets one line per step; pip's own output (its download progress) goes to
    ``pip_output`` (inherit by default)."""
    release = OFFERED.get(version)
    if release is None:
        raise InstallError(unknown_version_message(version))
    if (env := environment(root, version)) is not None:
        say(f"jax {version}: already installed ({env.prefix})")
        deadline = _Deadline(version, timeout_s)
        _sync_engine_lock(env, locks, say, pip_output, deadline)
        _install_libraries(env, locks, say, pip_output, deadline)
        return env
    python, python_version, pinned = _locked_python(release, locks)
    deadline = _Deadline(version, timeout_s)
    prefix = root / version
    if prefix.exists():
        say(f"jax {version}: removing an unfinished environment at {prefix}")
        shutil.rmtree(prefix)
    root.mkdir(parents=True, exist_ok=True)
    say(f"jax {version}: [1/4] creating {prefix} with Python {python_version} ({python})")
    _check_call([python, "-m", "venv", str(prefix)], pip_output, deadline)
    venv_python = str(prefix.absolute() / "bin" / "python")
    say(f"jax {version}: [2/4] pip install --require-hashes -r {pinned}")
    _pip_install_lock(venv_python, pinned, pip_output, deadline)
    say(f"jax {version}: [3/4] linking the engine (sandbox package) into it")
    site = subprocess.run(
        [venv_python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=deadline.left(),
    ).stdout.strip()
    Path(site, PTH_NAME).write_text(str(Path(sandbox.__file__).resolve().parents[1]) + "\n")
    say(f"jax {version}: [4/4] checking that it imports jax {version} and the engine")
    try:
        probe = subprocess.run(
            [
                venv_python,
                "-I",
                "-c",
                "import json, sys, jax, jaxlib, sandbox.engine.worker; print(json.dumps("
                "{'jax': jax.__version__, 'jaxlib': jaxlib.__version__, "
                "'python': '%d.%d.%d' % sys.version_info[:3], 'base_prefix': sys.base_prefix}))",
            ],
            capture_output=True,
            text=True,
            timeout=deadline.left(),
        )
    except subprocess.TimeoutExpired:
        raise deadline.error() from None
    try:
        stamp = json.loads(probe.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise InstallError(
            f"jax {version}: the new environment does not import: {probe.stderr.strip()[-2000:]}"
        ) from None
    if stamp.get("jax") != version:
        raise InstallError(f"jax {version}: the environment imports jax {stamp.get('jax')}")
    stamp["base_prefix"] = os.path.realpath(stamp["base_prefix"])
    stamp["lock"] = pinned.name
    stamp["lock_sha256"] = _digest(pinned)
    (prefix / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
    env = environment(root, version)
    assert env is not None
    _install_libraries(env, locks, say, pip_output, deadline)
    say(f"jax {version}: installed ({_size(prefix)})")
    return env


def _install_libraries(
    env: Environment,
    locks: Path,
    say: Callable[[str], None],
    pip_output: int | None,
    deadline: _Deadline,
) -> None:
    """Install the library set its committed library lock pins (sandbox/environments/libraries.py),
    once: the stamp names the lock it installed. Without a library lock, none."""
    pinned = libraries.lock_path(env.version, env.python_version, locks)
    stamp_path = Path(env.prefix) / STAMP
    stamp = json.loads(stamp_path.read_text())
    # the other versions of some libraries a request may pick, each in an overlay of
    # its own (sandbox/environments/library_choices.py): those not installed yet
    library_choices.install(env.version, env.python_version, env.python, locks=locks, say=say)
    if not pinned.is_file() or (
        stamp.get("libraries_lock") == pinned.name
        and stamp.get("libraries_lock_sha256") == _digest(pinned)
    ):
        return
    say(f"jax {env.version}: the libraries: pip install --require-hashes -r {pinned}")
    _pip_install_lock(env.python, pinned, pip_output, deadline)
    stamp["libraries_lock"] = pinned.name
    stamp["libraries_lock_sha256"] = _digest(pinned)
    stamp["libraries"] = libraries.installed(env.prefix)
    stamp_path.write_text(json.dumps(stamp, indent=1) + "\n")
    say(
        f"jax {env.version}: libraries {' '.join(f'{k}=={v}' for k, v in stamp['libraries'].items())}"
    )


def _sync_engine_lock(
    env: Environment,
    locks: Path,
    say: Callable[[str], None],
    pip_output: int | None,
    deadline: _Deadline,
) -> None:
    """Bring an installed environment to its committed lock once the lock changed (a
    package added to every lock, as ``flatbuffers`` was for export): the stamp keeps the
    lock's sha256, and pip installs, hash-checked, only what is missing or different."""
    stamp_path = Path(env.prefix) / STAMP
    stamp = json.loads(stamp_path.read_text())
    pinned = locks / str(stamp.get("lock", ""))
    if not stamp.get("lock") or not pinned.is_file():
        return
    digest = _digest(pinned)
    if stamp.get("lock_sha256") == digest:
        return
    say(f"jax {env.version}: its lock changed: pip install --require-hashes -r {pinned}")
    _pip_install_lock(env.python, pinned, pip_output, deadline)
    stamp["lock_sha256"] = digest
    stamp_path.write_text(json.dumps(stamp, indent=1) + "\n")


def _pip_install_lock(python: str, lock: Path, pip_output: int | None, deadline: _Deadline) -> None:
    """Exactly what ``lock`` pins, every wheel checked against its sha256, nothing else."""
    _check_call(
        [
            python, "-m", "pip", "install", "--disable-pip-version-check",
            "--require-hashes", "--no-deps", "--only-binary=:all:", "-r", str(lock),
        ],
        pip_output,
        deadline,
    )  # fmt: skip


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_call(argv: list[str], output: int | None, deadline: _Deadline) -> None:
    try:
        result = subprocess.run(
            argv,
            stdout=output,
            stderr=subprocess.STDOUT if output else None,
            timeout=deadline.left(),
        )
    except subprocess.TimeoutExpired:
        raise deadline.error() from None
    if result.returncode != 0:
        raise InstallError(f"{' '.join(argv[:4])} ... failed with status {result.returncode}")


def _size(path: Path) -> str:
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return f"{total / 2**20:.0f} MiB"


def remove(root: Path, version: str) -> bool:
    """Delete an installed environment (never the default's)."""
    prefix = root / version
    if not _VERSION.match(version) or not prefix.is_dir():
        return False
    shutil.rmtree(prefix)
    return True


def grant_jail_access(env: Environment, user: str) -> list[str]:
    """As root: let the jail's user search (``x``) every directory on the way to
    ``env``'s interpreter and venv, as scripts/setup.sh does for ``.venv`` (pyenv under
    /root is mode 700); nothing else. Returns the directories granted."""
    if os.geteuid() != 0 or shutil.which("setfacl") is None:
        return []
    import grp
    import pwd

    try:
        gid = grp.getgrnam(user).gr_gid  # the group every jail uid is in (setup.sh)
    except KeyError:
        return []
    try:
        uid = pwd.getpwnam(user).pw_uid
    except KeyError:  # only per-slot users exist: test as nobody in that group
        uid = 65534
    granted: list[str] = []
    for target in (env.base_prefix, env.prefix):
        path = Path("/")
        for part in Path(target).parts[1:]:
            path = path / part
            if not _jail_user_can(uid, gid, "-x", path):
                subprocess.run(["setfacl", "-m", f"g:{user}:x", str(path)], check=True)
                granted.append(str(path))
    return granted


def _jail_user_can(uid: int, gid: int, test: str, path: Path) -> bool:
    argv = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", "test", test]
    return subprocess.run([*argv, str(path)]).returncode == 0
