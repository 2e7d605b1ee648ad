"""An installed JAX environment follows its committed lock when the lock changes (as
every lock gained ``flatbuffers`` for export): setup's ``install`` of an installed
version brings in what the new lock adds, hash-checked, once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.environments import versions

pytestmark = pytest.mark.slow

FLATBUFFERS = (
    "flatbuffers==25.12.19 "
    "--hash=sha256:7634f50c427838bb021c2d66a3d1168e9d199b0607e6329399f04846d42e20b4\n"
)


def test_a_changed_lock_is_installed_into_the_environment_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", str(prefix)], check=True)
    python = str(prefix / "bin" / "python")
    locks = tmp_path / "locks"
    locks.mkdir()
    lock = locks / "jax-test-lock.txt"
    lock.write_text("")  # the lock it was installed from: nothing
    stamp = {"jax": "0.0.0", "lock": lock.name, "lock_sha256": versions._digest(lock)}
    (prefix / versions.STAMP).write_text(json.dumps(stamp))
    env = versions.Environment("0.0.0", python, str(prefix), sys.base_prefix, "3", False)

    def imports_flatbuffers() -> bool:
        return subprocess.run([python, "-c", "import flatbuffers"]).returncode == 0

    said: list[str] = []
    deadline = versions._Deadline("0.0.0", 300)
    versions._sync_engine_lock(env, locks, said.append, subprocess.DEVNULL, deadline)
    assert said == [] and not imports_flatbuffers()  # unchanged lock: nothing to do

    lock.write_text(FLATBUFFERS)  # the lock gains a package
    versions._sync_engine_lock(env, locks, said.append, subprocess.DEVNULL, deadline)
    assert imports_flatbuffers()
    assert len(said) == 1 and "its lock changed" in said[0]
    assert json.loads((prefix / versions.STAMP).read_text())["lock_sha256"] == versions._digest(
        lock
    )

    calls: list[list[str]] = []
    monkeypatch.setattr(versions, "_check_call", lambda argv, *_: calls.append(argv))
    versions._sync_engine_lock(env, locks, said.append, subprocess.DEVNULL, deadline)
    assert calls == [] and len(said) == 1  # installed once
