"""`jaxplay versions` and `jaxplay run --jax-version`, as a user types them, and a
version installed on first use when the operator allows it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sandbox.pool import versioned
from sandbox.pool.fake import FakePool
from sandbox.protocol import RunRequest
from sandbox.versions import OFFERED, STAMP, default_version, environment

JAXPLAY = [sys.executable, "-c", "from backend.cli import main; main()"]
ROOT = Path(__file__).resolve().parents[1]


def jaxplay(*args: str, versions_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*JAXPLAY, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "JAXPLAY_JAX_VERSIONS_DIR": str(versions_dir), **env},
        timeout=120,
    )


def stamp(root: Path, version: str) -> None:
    (root / version).mkdir(parents=True)
    (root / version / STAMP).write_text(
        json.dumps({"jax": version, "python": "3.11.7", "base_prefix": "/nonexistent"})
    )


def test_versions_lists_offered_installed_and_default(tmp_path: Path) -> None:
    stamp(tmp_path, "0.10.2")
    result = jaxplay("versions", "--json", versions_dir=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = {r["version"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert set(OFFERED) <= set(rows)
    assert rows["0.10.2"]["installed"] and not rows["0.10.2"]["default"]
    assert rows[str(default_version())]["default"] and rows[str(default_version())]["installed"]
    assert not rows["0.5.3"]["installed"]
    table = jaxplay("versions", versions_dir=tmp_path)
    assert "installable" in table.stdout and "jaxplay versions add VERSION" in table.stdout


def test_versions_add_refuses_what_is_not_offered(tmp_path: Path) -> None:
    result = jaxplay("versions", "add", "9.9.9", versions_dir=tmp_path)
    assert result.returncode == 1
    assert "jax 9.9.9 is not offered; offered: 0.4.38" in result.stderr
    assert jaxplay("versions", "add", versions_dir=tmp_path).returncode == 2


def test_versions_remove(tmp_path: Path) -> None:
    stamp(tmp_path, "0.10.2")
    assert jaxplay("versions", "remove", "0.10.2", versions_dir=tmp_path).returncode == 0
    assert environment(tmp_path, "0.10.2") is None
    assert jaxplay("versions", "remove", "0.10.2", versions_dir=tmp_path).returncode == 1


def test_run_refuses_a_version_not_installed_naming_the_command(tmp_path: Path) -> None:
    code = tmp_path / "f.py"
    code.write_text("def f(x):\n    return x\n")
    result = jaxplay(
        "run", str(code), "--args", "(1.0,)", "--jax-version", "0.5.3", versions_dir=tmp_path
    )
    if "jail" in result.stderr and "0.5.3" not in result.stderr:
        pytest.skip(f"no jail here: {result.stderr.strip()[:200]}")
    assert result.returncode == 2, result.stderr
    assert "jaxplay versions add 0.5.3" in result.stderr


def test_a_version_is_installed_on_first_use_when_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installs: list[str] = []

    def fake_install(root: Path, version: str, **_: Any) -> Any:
        installs.append(version)
        stamp(root, version)
        return environment(root, version)

    monkeypatch.setattr(versioned, "install_version", fake_install)

    async def scenario() -> None:
        for allowed in (False, True):
            pool = versioned.VersionedPool(
                FakePool(), default_version="0.99.0", versions_dir=tmp_path, auto_install=allowed
            )
            await pool.start()
            try:
                request = RunRequest(code="def f(x):\n    return x\n", jax_version="0.5.3")
                if not allowed:
                    with pytest.raises(versioned.VersionUnavailable, match=r"versions add 0\.5\.3"):
                        await pool.submit(request, "t")
                    continue
                handle = await pool.submit(request, "t")
                events = [e async for e in handle.events()]
                assert events[0]["worker"]["jax_version"] == "0.5.3"
            finally:
                await pool.close()

    asyncio.run(scenario())
    assert installs == ["0.5.3"]
