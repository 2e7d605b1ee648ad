"""Setup holds jaxplay's own environment at the newest JAX it offers, with that version's
committed lock, not at whatever PyPI released since: a newer JAX was never run through
these tests, has no library lock, and its extras may not be published (a JAX asking
for a libtpu the registry did not have yet stopped a fresh setup)."""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from pathlib import Path

import pytest

from sandbox.environments import versions

HERE = f"{sys.version_info.major}.{sys.version_info.minor}"


def test_the_default_is_the_newest_offered_release_for_the_interpreter() -> None:
    assert versions.setup_default("3.13").version == versions.RELEASES[-1].version
    assert versions.setup_default("3.13.0") == versions.setup_default("3.13")
    # 0.11 and later need Python 3.12: on 3.11 the newest offered is the 0.10 line
    assert versions.setup_default("3.11").version == "0.10.2"
    with pytest.raises(versions.InstallError, match=r"Python 3\.9"):
        versions.setup_default("3.9")


def test_the_constraints_are_the_default_s_committed_lock(tmp_path: Path) -> None:
    release = versions.setup_default("3.13")
    lock = tmp_path / f"jax-{release.version}-py3.13-{platform.machine()}.txt"
    lock.write_text(
        "# a comment\n"
        f"jax=={release.version} --hash=sha256:{'a' * 64}\n"
        "\n"
        f"numpy==2.5.5 --hash=sha256:{'b' * 64}  # trailing\n"
    )
    assert versions.setup_constraints("3.13", tmp_path) == [
        f"jax=={release.version}",
        "numpy==2.5.5",
    ]
    # no lock committed for this interpreter: jax and jaxlib alone are held
    assert versions.setup_constraints("3.12", tmp_path) == [
        f"jax=={versions.setup_default('3.12').version}",
        f"jaxlib=={versions.setup_default('3.12').version}",
    ]


def test_the_committed_constraints_pin_jax_and_jaxlib_together() -> None:
    pins = dict(line.split("==") for line in versions.setup_constraints(HERE))
    assert pins["jax"] == pins["jaxlib"] == versions.setup_default(HERE).version


def test_this_environment_has_the_default_setup_installs() -> None:
    # what `make setup` left here: another JAX means setup did not hold it
    assert importlib.metadata.version("jax") == versions.setup_default(HERE).version
    assert importlib.metadata.version("jaxlib") == versions.setup_default(HERE).version


def test_this_environment_is_held_where_the_dev_lock_says() -> None:
    # scripts/dev_lock.txt: the server, tools and test stack setup holds .venv at
    from scripts import lock_dev

    pins = lock_dev.read()
    assert {"fastapi", "pytest", "ruff", "playwright"} <= pins.keys()
    assert not pins.keys() & lock_dev.pinned_elsewhere(), "pinned twice"
    assert lock_dev.differences(pins, lock_dev.installed()) == []


def test_a_version_off_the_dev_lock_is_found() -> None:
    from scripts import lock_dev

    assert lock_dev.differences({"ruff": "0.0.1", "not-here": "1"}, {"ruff": "0.17.6"}) == [
        "ruff: pinned 0.0.1, installed 0.17.6"
    ]
