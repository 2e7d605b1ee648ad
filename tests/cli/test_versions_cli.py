"""`jaxplay versions` and `jaxplay run --jax-version`, as a user types them; a run never
installs a version; `add` installs only what a committed lock pins, within a time limit."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sandbox.environments.versions import OFFERED, STAMP, default_version, environment
from sandbox.pool import versioned
from sandbox.pool.fake import FakePool
from sandbox.protocol import RunRequest
from tests.gates import jail_required
from tests.support.cli import in_process as run_in_process

JAXPLAY = [sys.executable, "-c", "from backend.cli.main import main; main()"]
ROOT = Path(__file__).resolve().parents[2]


def jaxplay(*args: str, versions_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*JAXPLAY, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "JAXPLAY_JAX_VERSIONS_DIR": str(versions_dir), **env},
        timeout=120,
    )


def in_process(*args: str, versions_dir: Path) -> subprocess.CompletedProcess[str]:
    """``jaxplay *args`` in this process, on ``versions_dir`` (as ``jaxplay``)."""
    return run_in_process(*args, env={"JAXPLAY_JAX_VERSIONS_DIR": str(versions_dir)})


def stamp(root: Path, version: str) -> None:
    (root / version).mkdir(parents=True)
    (root / version / STAMP).write_text(
        json.dumps({"jax": version, "python": "3.11.7", "base_prefix": "/nonexistent"})
    )


@pytest.mark.slow
def test_versions_lists_offered_installed_and_default(tmp_path: Path) -> None:
    stamp(tmp_path, "0.10.2")
    result = jaxplay("versions", "--json", versions_dir=tmp_path)  # the console script
    assert result.returncode == 0, result.stderr
    rows = {r["version"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert set(OFFERED) <= set(rows)
    assert rows["0.10.2"]["installed"] and not rows["0.10.2"]["default"]
    assert rows[str(default_version())]["default"] and rows[str(default_version())]["installed"]
    assert not rows["0.5.3"]["installed"]
    table = in_process("versions", versions_dir=tmp_path)
    assert "installable" in table.stdout and "jaxplay versions add VERSION" in table.stdout


def test_versions_add_refuses_what_is_not_offered(tmp_path: Path) -> None:
    result = in_process("versions", "add", "9.9.9", versions_dir=tmp_path)
    assert result.returncode == 1
    assert "jax 9.9.9 is not offered; offered: 0.4.38" in result.stderr
    assert in_process("versions", "add", versions_dir=tmp_path).returncode == 2


def test_versions_remove(tmp_path: Path) -> None:
    stamp(tmp_path, "0.10.2")
    assert in_process("versions", "remove", "0.10.2", versions_dir=tmp_path).returncode == 0
    assert environment(tmp_path, "0.10.2") is None
    assert in_process("versions", "remove", "0.10.2", versions_dir=tmp_path).returncode == 1


@pytest.mark.slow
def test_run_refuses_a_version_not_installed_naming_the_command(tmp_path: Path) -> None:
    code = tmp_path / "f.py"
    code.write_text("def f(x):\n    return x\n")
    result = jaxplay(
        "run", str(code), "--args", "(1.0,)", "--jax-version", "0.5.3", versions_dir=tmp_path
    )
    if "jail" in result.stderr and "0.5.3" not in result.stderr:
        if jail_required():  # the jail gate (tests/gates.py): demanded, so a failure
            pytest.fail(f"the jail is demanded but unusable: {result.stderr.strip()[:200]}")
        pytest.skip(f"no jail here: {result.stderr.strip()[:200]}")
    assert result.returncode == 2, result.stderr
    assert "jaxplay versions add 0.5.3" in result.stderr


def test_a_run_never_installs_a_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The versioned pool refuses an offered version that is not installed, naming the
    operator's command, and installs nothing (no install, no process)."""
    import sandbox.environments.versions

    def no_install(*_: Any, **__: Any) -> Any:
        raise AssertionError("a run installed a version")

    monkeypatch.setattr(sandbox.environments.versions, "install", no_install)
    monkeypatch.setattr(subprocess, "run", no_install)
    monkeypatch.setattr(subprocess, "Popen", no_install)

    async def scenario() -> None:
        pool = versioned.VersionedPool(FakePool(), default_version="0.99.0", versions_dir=tmp_path)
        await pool.start()
        try:
            request = RunRequest(code="def f(x):\n    return x\n", jax_version="0.5.3")
            with pytest.raises(versioned.VersionUnavailable, match=r"versions add 0\.5\.3"):
                await pool.submit(request, "t")
            with pytest.raises(versioned.VersionUnavailable, match=r"versions add 0\.5\.3"):
                await pool.pool("0.5.3")
        finally:
            await pool.close()

    asyncio.run(scenario())
    assert not (tmp_path / "0.5.3").exists()


def test_install_needs_a_committed_lock_and_pins_by_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`add` installs only what a lock pins (pip --require-hashes), and without one
    says how the operator makes it."""
    import sandbox.environments.versions as sv

    monkeypatch.setattr(sv, "find_python", lambda minors: (sys.executable, "3.11.7"))
    locks = tmp_path / "locks"
    with pytest.raises(sv.InstallError, match=r"`jaxplay versions lock 0\.10\.2`"):
        sv.install(tmp_path / "versions", "0.10.2", say=lambda _: None, locks=locks)
    assert not (tmp_path / "versions" / "0.10.2").exists()

    pinned = sv.lock_path("0.10.2", "3.11.7", locks)
    pinned.parent.mkdir(parents=True)
    pinned.write_text("jax==0.10.2 --hash=sha256:" + "0" * 64 + "\n")
    calls: list[list[str]] = []

    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        assert kwargs.get("timeout") is not None, f"{argv[:3]} has no time limit"
        if "pip" in argv:  # what a tampered wheel does: pip refuses it
            return subprocess.CompletedProcess(argv, 1, "", "")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(sv.subprocess, "run", run)
    with pytest.raises(sv.InstallError, match="failed with status 1"):
        sv.install(tmp_path / "versions", "0.10.2", say=lambda _: None, locks=locks)
    pip = next(argv for argv in calls if "pip" in argv)
    assert "--require-hashes" in pip and pip[pip.index("-r") + 1] == str(pinned)
    assert not any("jax==0.10.2" in argv for argv in calls), "installed unpinned"
    assert sv.environment(tmp_path / "versions", "0.10.2") is None  # never stamped


def test_an_install_step_over_the_time_limit_stops_it() -> None:
    import sandbox.environments.versions as sv

    deadline = sv._Deadline("0.10.2", 0.3)
    with pytest.raises(sv.InstallError, match=r"stopped after the 0\.3 s time limit"):
        sv._check_call([sys.executable, "-c", "import time; time.sleep(30)"], None, deadline)


def test_every_offered_version_has_a_committed_lock() -> None:
    """scripts/setup.sh's `versions add --configured` can install any offered version
    on this kind of machine, pinned (a lock per version, for its first interpreter)."""
    from sandbox.environments.versions import LOCKS, RELEASES

    for release in RELEASES:
        found = list(LOCKS.glob(f"jax-{release.version}-py*.txt"))
        assert found, f"no lock for jax {release.version} in {LOCKS}"
        for path in found:
            lines = [ln for ln in path.read_text().splitlines() if not ln.startswith("#")]
            assert any(ln.startswith(f"jax=={release.version} ") for ln in lines), path
            assert all(" --hash=sha256:" in ln for ln in lines), path
