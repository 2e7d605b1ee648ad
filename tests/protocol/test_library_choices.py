"""A request's choice of library versions (sandbox/environments/library_choices.py), in process: the
request field's checks, what a JAX version offers and refuses, the alternatives lock's
drift check, and how a zygote's interpreter is given the overlay. Through the API:
tests/server/test_library_choices.py; in a real jail: tests/pool/test_library_choices_jail.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from sandbox.environments import libraries, library_choices
from sandbox.jail.bwrap import Runtime, python_command
from sandbox.protocol import RunRequest

ROOT = Path(__file__).resolve().parents[2]
VERSION = "0.12.0.1"  # the version ALTERNATIVES offers one for (optax)
ALT = library_choices.listed(VERSION)[0]
DEFAULT = libraries.offered(VERSION)[ALT.name]


def overlay(root: Path, alt: library_choices.Alternative = ALT, *, stamped: bool = True) -> Path:
    """An installed-looking overlay: its dist-info, and the stamp written last."""
    where = library_choices.overlay_dir(VERSION, alt, root)
    (where / f"{alt.name}-{alt.version}.dist-info").mkdir(parents=True)
    if stamped:
        (where / library_choices.STAMP).write_text(alt.line + "\n")
    return where


def test_the_committed_alternative_is_another_version_of_a_library_of_the_set() -> None:
    assert ALT.name in libraries.BY_NAME and ALT.version != DEFAULT
    assert library_choices.ALTERNATIVES[VERSION][ALT.name] == (ALT.version,)


def test_a_request_names_libraries_of_the_set_and_versions_only() -> None:
    assert RunRequest(code="", libraries={"optax": "0.2.6"}).libraries == {"optax": "0.2.6"}
    assert RunRequest(code="").libraries == {}
    with pytest.raises(ValidationError, match="not a library of the set: flax, optax, "):
        RunRequest(code="", libraries={"optaxx": "0.2.6"})
    for bad in ("../../etc", "0.2.6 --index-url x", "", "x" * 50):
        with pytest.raises(ValidationError, match="libraries"):
            RunRequest(code="", libraries={"optax": bad})


def test_an_alternative_is_offered_only_once_its_overlay_is_installed(tmp_path: Path) -> None:
    menu = library_choices.offered(VERSION, root=tmp_path)
    assert menu[ALT.name] == {"default": DEFAULT, "alternatives": []}
    overlay(tmp_path, stamped=False)  # half-installed: not offered
    assert library_choices.offered(VERSION, root=tmp_path)[ALT.name]["alternatives"] == []
    (library_choices.overlay_dir(VERSION, ALT, tmp_path) / library_choices.STAMP).write_text(
        ALT.line
    )
    assert library_choices.offered(VERSION, root=tmp_path)[ALT.name] == {
        "default": DEFAULT,
        "alternatives": [ALT.version],
    }


def test_resolve_picks_the_alternative_drops_the_default_and_refuses_the_rest(
    tmp_path: Path,
) -> None:
    overlay(tmp_path)
    assert library_choices.resolve(VERSION, {ALT.name: ALT.version}, root=tmp_path) == (
        (ALT.name, ALT.version),
    )
    assert library_choices.resolve(VERSION, {ALT.name: DEFAULT}, root=tmp_path) == ()
    assert library_choices.resolve(VERSION, {}, root=tmp_path) == ()
    with pytest.raises(library_choices.LibraryUnavailable) as caught:
        library_choices.resolve(VERSION, {ALT.name: "0.0.1"}, root=tmp_path)
    assert str(caught.value) == (
        f"{ALT.name} 0.0.1 is not offered with jax {VERSION}; it offers "
        f"{ALT.name} {DEFAULT} (default) or {ALT.version}"
    )
    # another version offers no alternative of it: only its own default
    old_default = libraries.offered("0.10.2")[ALT.name]
    with pytest.raises(library_choices.LibraryUnavailable, match=f"{old_default} \\(default\\)$"):
        library_choices.resolve("0.10.2", {ALT.name: ALT.version}, root=tmp_path)
    # a library the version does not offer at all (its lock says "not offered")
    locks = tmp_path / "locks"
    locks.mkdir()
    (locks / libraries.lock_path("9.9.9", "3.13").name).write_text(
        f"# not offered: flax: no release for this JAX\n{ALT.line}\n"
    )
    with pytest.raises(
        library_choices.LibraryUnavailable, match=f"does not offer flax; it offers: {ALT.name} "
    ):
        library_choices.resolve("9.9.9", {"flax": "0.10.4"}, root=tmp_path, locks=locks)
    assert library_choices.overlays(VERSION, ((ALT.name, ALT.version),), root=tmp_path) == (
        str(library_choices.overlay_dir(VERSION, ALT, tmp_path)),
    )


def test_the_zygote_interpreter_gets_the_overlay_first_on_sys_path(tmp_path: Path) -> None:
    where = overlay(tmp_path)
    runtime = Runtime.discover().with_path_first([str(where)])
    argv = python_command(runtime, "-c", "import sys; print(sys.path[0])", "x")
    assert argv[:3] == [runtime.python, "-I", "-B"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == str(where)
    # what a worker says it has: the overlay's version of that library, the rest its own
    found = libraries.overlaid([str(tmp_path / "nothing"), str(where), *sys.path])
    assert found == {ALT.name: ALT.version}
    assert libraries.overlaid(sys.path) == {}  # site-packages is no overlay


def test_the_drift_check_refuses_an_alternative_that_is_the_default(tmp_path: Path) -> None:
    for path in (
        libraries.locks_of(VERSION)[0],
        *library_choices.LOCKS.glob(f"jax-{VERSION}-py*.txt"),
        *library_choices.LOCKS.glob(f"alternatives-jax-{VERSION}-py*.txt"),
    ):
        shutil.copy(path, tmp_path / path.name)
    check = [sys.executable, "scripts/lock_libraries.py", "--check", "--locks", str(tmp_path)]
    kept = subprocess.run(check, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "alternatives" not in kept.stderr  # only the other versions' locks are missing
    alts = next(tmp_path.glob("alternatives-*"))
    alts.write_text(alts.read_text().replace(f"=={ALT.version} ", f"=={DEFAULT} "))
    out = subprocess.run(check, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 1
    assert f"{ALT.name} {DEFAULT} is the default" in out.stderr
    assert "ALTERNATIVES lists" in out.stderr  # and the table no longer matches the lock
