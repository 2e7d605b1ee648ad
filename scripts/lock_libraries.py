"""Pin the library set (sandbox/environments/libraries.py) for each offered JAX version, by hash.

    .venv/bin/python scripts/lock_libraries.py 0.12.0.1 0.10.2   # resolve and write
    .venv/bin/python scripts/lock_libraries.py --all             # every version with a lock
    .venv/bin/python scripts/lock_libraries.py --check           # offline drift check
    .venv/bin/python scripts/lock_libraries.py --alternatives 0.12.0.1  # its alternatives

For each committed version lock (``sandbox/environments/version_locks/jax-V-pyM-MACHINE.txt``) it
resolves, with pip's resolver in a scratch environment of that interpreter, the
version's own pins (exactly) together with every library of the table, and writes
``libraries-jax-V-pyM-MACHINE.txt``: each package the libraries need beyond the
version's own lock, pinned with its sha256. A library that pip cannot resolve with that
JAX and interpreter (no release of it is compatible) is tried alone to be sure, then
written as ``# not offered: NAME: reason``: that version does not offer it.

``--check`` regenerates nothing (resolving needs the package index): it checks that
every library lock names each library of the table exactly once (pinned or not
offered), pins nothing the version's own lock pins, has a hash on every line and
belongs to a committed version lock. ``--check --resolve`` also resolves each lock
again and compares (needs the index; the index may have newer releases since).
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandbox.environments import libraries, library_choices
from sandbox.environments.versions import LOCKS, find_python

PIP_TIMEOUT_S = 900


def base_locks(version: str | None = None, locks: Path = LOCKS) -> list[Path]:
    """The committed version locks (of ``version``, or all)."""
    pattern = f"jax-{version or '*'}-py*-{platform.machine()}.txt"
    return sorted(locks.glob(pattern))


def parse_base(path: Path) -> tuple[str, str, dict[str, str]]:
    """(JAX version, Python minor, canonical name -> pinned version) of a version lock."""
    stem = path.name.removesuffix(".txt").removeprefix("jax-")
    version, minor = stem.rsplit("-", 1)[0].rsplit("-py", 1)
    return version, minor, libraries.lock_pins(path)


def _resolve(python: str, requirements: list[str], tmp: Path) -> tuple[list[dict], str]:
    """pip's resolution of ``requirements`` (its report's ``install``), or [] and why not."""
    report = tmp / "report.json"
    report.unlink(missing_ok=True)
    out = subprocess.run(
        [
            python, "-m", "pip", "install", "--disable-pip-version-check", "--dry-run",
            "--ignore-installed", "--only-binary=:all:", "--quiet", "--report", str(report),
            *requirements,
        ],
        capture_output=True, text=True, timeout=PIP_TIMEOUT_S,
    )  # fmt: skip
    if out.returncode != 0:
        lines = [ln.strip() for ln in out.stderr.splitlines() if ln.strip()]
        reason = next((ln for ln in lines if "conflict" in ln.lower() or "No matching" in ln), "")
        return [], (reason or (lines[-1] if lines else f"pip exited {out.returncode}"))[:300]
    return json.loads(report.read_text())["install"], ""


def lock_one(base: Path, say=print, locks: Path = LOCKS) -> Path:
    version, minor, base_pins = parse_base(base)
    found = find_python([minor])
    if found is None:
        raise SystemExit(f"jax {version}: no Python {minor} here to resolve with")
    python, _ = found
    pinned = [f"{name}=={v}" for name, v in sorted(base_pins.items())]
    wanted = {lib.name: lib for lib in libraries.LIBRARIES}
    not_offered: dict[str, str] = {}
    for lib in libraries.LIBRARIES:
        if lib.jax and not _in_spec(version, lib.jax):
            not_offered[lib.name] = f"the table offers it for jax {lib.jax} only"
    with tempfile.TemporaryDirectory(prefix="jaxplay-liblock-") as tmp_dir:
        tmp = Path(tmp_dir)
        subprocess.run([python, "-m", "venv", str(tmp / "venv")], check=True)
        venv_python = str(tmp / "venv" / "bin" / "python")
        names = [n for n in wanted if n not in not_offered]
        say(f"jax {version} (Python {minor}): resolving {' '.join(names)}")
        resolved, why = _resolve(venv_python, pinned + names, tmp)
        if why:  # find which libraries cannot come with this JAX: each alone
            say(f"jax {version}: the whole set does not resolve ({why}); trying each alone")
            for name in names:
                _, alone = _resolve(venv_python, [*pinned, name], tmp)
                if alone:
                    say(f"jax {version}: {name} not offered: {alone}")
                    not_offered[name] = alone
            names = [n for n in names if n not in not_offered]
            resolved, why = _resolve(venv_python, pinned + names, tmp)
            if why:
                raise SystemExit(
                    f"jax {version}: {' '.join(names)} resolve alone but not together: {why}"
                )
    lines = []
    for item in resolved:
        meta = item["metadata"]
        name = libraries.canonical(meta["name"])
        if name in base_pins:
            if base_pins[name] != meta["version"]:
                raise SystemExit(f"jax {version}: pip moved the version lock's {name}")
            continue
        digest = _sha256(item, f"jax {version}: pip gave no sha256 for {name}")
        lines.append(f"{meta['name'].lower()}=={meta['version']} --hash=sha256:{digest}")
    path = libraries.lock_path(version, minor, locks)
    header = [
        f"# The library set (sandbox/environments/libraries.py) for jax {version}, CPython {minor} on "
        f"{platform.machine()}: what it needs beyond {base.name}, pinned by hash.",
        "# Made by scripts/lock_libraries.py; installed with pip --require-hashes --no-deps.",
        *(f"# not offered: {n}: {why}" for n, why in sorted(not_offered.items())),
    ]
    path.write_text("\n".join(header + sorted(lines)) + "\n")
    offered = libraries.read_lock(path).offered()
    say(f"jax {version}: wrote {path.name}: {' '.join(f'{k}=={v}' for k, v in offered.items())}")
    return path


def _sha256(item: dict, missing: str) -> str:
    """The sha256 pip's report gives for one resolved wheel; SystemExit(missing) if none."""
    info = item.get("download_info") or {}
    digest = ((info.get("archive_info") or {}).get("hashes") or {}).get("sha256")
    if not digest:
        raise SystemExit(missing)
    return str(digest)


def lock_alternatives(base: Path, say=print, locks: Path = LOCKS) -> Path | None:
    """Resolve the alternatives ``library_choices.ALTERNATIVES`` lists for ``base``'s
    JAX version, each with pip together with the version's own pins and the rest of its
    library set (pinned): each must need nothing but itself (it is installed alone, as
    an overlay over the set). Writes ``alternatives-jax-...``; None where none is listed."""
    version, minor, base_pins = parse_base(base)
    wanted = library_choices.ALTERNATIVES.get(version, {})
    if not wanted:
        return None
    found = find_python([minor])
    if found is None:
        raise SystemExit(f"jax {version}: no Python {minor} here to resolve with")
    lock = libraries.read_lock(libraries.lock_path(version, minor, locks))
    defaults = lock.offered()
    lines = []
    with tempfile.TemporaryDirectory(prefix="jaxplay-altlock-") as tmp_dir:
        tmp = Path(tmp_dir)
        subprocess.run([found[0], "-m", "venv", str(tmp / "venv")], check=True)
        venv_python = str(tmp / "venv" / "bin" / "python")
        for name, versions in wanted.items():
            if name not in defaults:
                raise SystemExit(f"jax {version}: {name} is not in its library set")
            rest = {n: v for n, (v, _) in lock.pins.items() if n != libraries.canonical(name)}
            others = {**base_pins, **rest}  # everything but the library, as pinned
            pinned = [f"{n}=={v}" for n, v in sorted(others.items())]
            for alt in versions:
                if alt == defaults[name]:
                    raise SystemExit(f"jax {version}: {name} {alt} is the default already")
                say(f"jax {version}: resolving {name}=={alt} with the set")
                resolved, why = _resolve(venv_python, [*pinned, f"{name}=={alt}"], tmp)
                if why:
                    raise SystemExit(f"jax {version}: {name} {alt} does not resolve: {why}")
                for item in resolved:
                    meta = item["metadata"]
                    got = libraries.canonical(meta["name"])
                    if got != libraries.canonical(name):
                        if others.get(got) != meta["version"]:
                            raise SystemExit(
                                f"jax {version}: {name} {alt} needs {got} {meta['version']}: "
                                "an overlay holds only the library itself"
                            )
                        continue
                    digest = _sha256(item, f"jax {version}: pip gave no sha256 for {name} {alt}")
                    lines.append(f"{got}=={alt} --hash=sha256:{digest}")
    path = library_choices.lock_path(version, minor, locks)
    header = [
        f"# Alternative library versions (sandbox/environments/library_choices.py) for jax {version}, "
        f"CPython {minor} on {platform.machine()}: each resolved with {base.name} and the rest "
        "of its library set, pinned by hash.",
        "# Made by scripts/lock_libraries.py --alternatives; each installed alone "
        "(pip --no-deps --require-hashes --target .jaxplay/libs/<jax>/<name>-<version>).",
    ]
    path.write_text("\n".join(header + lines) + "\n")
    say(f"jax {version}: wrote {path.name}: {' '.join(ln.split()[0] for ln in lines)}")
    return path


def check_alternatives(where: Path = LOCKS) -> list[str]:
    """What is wrong with the committed alternatives locks (empty: nothing): each must
    belong to a library lock, list exactly what ALTERNATIVES lists for its version, and
    offer versions other than the set's own."""
    problems: list[str] = []
    found = sorted(where.glob(f"alternatives-jax-*-py*-{platform.machine()}.txt"))
    locked: dict[str, set[tuple[str, str]]] = {}
    for path in found:
        stem = path.name.removeprefix("alternatives-jax-").removesuffix(".txt")
        version, minor = stem.rsplit("-", 1)[0].rsplit("-py", 1)
        libs = libraries.lock_path(version, minor, where)
        if not libs.is_file():
            problems.append(f"{path.name}: no library lock {libs.name}")
            continue
        try:
            alts = library_choices.read_lock(path)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        defaults = libraries.read_lock(libs).offered()
        for alt in alts:
            if alt.name not in defaults:
                problems.append(f"{path.name}: {alt.name} is not in {libs.name}'s set")
            elif alt.version == defaults[alt.name]:
                problems.append(f"{path.name}: {alt.name} {alt.version} is the default")
        locked.setdefault(version, set()).update((a.name, a.version) for a in alts)
    for version in sorted(set(locked) | set(library_choices.ALTERNATIVES)):
        listed = {
            (name, v)
            for name, versions in library_choices.ALTERNATIVES.get(version, {}).items()
            for v in versions
        }
        if listed != locked.get(version, set()):
            problems.append(
                f"jax {version}: ALTERNATIVES lists {sorted(listed)}, the locks "
                f"{sorted(locked.get(version, set()))} (run scripts/lock_libraries.py "
                f"--alternatives {version})"
            )
    return problems


def _in_spec(version: str, spec: str) -> bool:
    from packaging.specifiers import SpecifierSet

    return version in SpecifierSet(spec)


def check(resolve: bool, where: Path = LOCKS) -> list[str]:
    """What is wrong with the committed library locks (empty: nothing)."""
    problems: list[str] = []
    bases = {parse_base(b)[:2]: b for b in base_locks(locks=where)}
    found = sorted(where.glob(f"libraries-jax-*-py*-{platform.machine()}.txt"))
    if not found:
        problems.append("no library lock committed")
    for path in found:
        stem = path.name.removeprefix("libraries-jax-").removesuffix(".txt")
        version, minor = stem.rsplit("-", 1)[0].rsplit("-py", 1)
        base = bases.get((version, minor))
        if base is None:
            problems.append(f"{path.name}: no version lock jax-{version}-py{minor}")
            continue
        try:
            lock = libraries.read_lock(path)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        base_pins = parse_base(base)[2]
        for name in sorted(set(lock.pins) & set(base_pins)):
            problems.append(f"{path.name}: pins {name}, which {base.name} pins already")
        for lib in libraries.LIBRARIES:
            name = libraries.canonical(lib.name)
            here = (name in lock.pins) + (lib.name in lock.not_offered) + (name in base_pins)
            if here != 1:
                problems.append(
                    f"{path.name}: {lib.name} must be pinned or not offered exactly once "
                    "(the table changed? run scripts/lock_libraries.py)"
                )
        for name in sorted(set(lock.not_offered) - {lib.name for lib in libraries.LIBRARIES}):
            problems.append(f"{path.name}: {name} is not in the table")
        if resolve:
            with tempfile.TemporaryDirectory() as tmp:
                again = lock_one(base, say=lambda _: None, locks=Path(tmp))
                if again.read_text() != path.read_text():
                    problems.append(f"{path.name}: resolving again gives another lock")
    return problems + check_alternatives(where)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="*", help="JAX versions to lock")
    parser.add_argument("--all", action="store_true", help="every version with a version lock")
    parser.add_argument("--check", action="store_true", help="check the committed locks")
    parser.add_argument("--resolve", action="store_true", help="with --check: resolve again")
    parser.add_argument("--locks", type=Path, default=LOCKS, help="with --check: where they are")
    parser.add_argument(
        "--alternatives", action="store_true", help="lock the versions' alternatives only"
    )
    args = parser.parse_args()
    if args.check:
        problems = check(args.resolve, args.locks)
        for p in problems:
            print(p, file=sys.stderr)
        raise SystemExit(1 if problems else 0)
    bases = base_locks() if args.all else [b for v in args.versions for b in base_locks(v)]
    if not bases:
        raise SystemExit("name JAX versions that have a version lock (or --all)")
    for base in bases:
        if args.alternatives:
            lock_alternatives(base)
        else:
            lock_one(base)


if __name__ == "__main__":
    main()
