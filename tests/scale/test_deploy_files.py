"""docker/ kept in step with the code: no Docker engine runs here, so what can be
checked without one is: the compose topology is the one the scale tests prove, every
JAXPLAY_* setting the files use exists, the images' commands are real commands."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from backend.app.settings import Settings
from sandbox.jail.settings import JailConfig, JailLimits, describe
from sandbox.pool.settings import PoolSettings

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"


def compose() -> dict[str, Any]:
    yaml = pytest.importorskip("yaml")
    data: dict[str, Any] = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    return data


def known_settings() -> set[str]:
    names = {f"JAXPLAY_{name.upper()}" for name in Settings.model_fields}
    for cls in (JailLimits, JailConfig, PoolSettings):
        names |= {name for name, _, _ in describe(cls)}
    return names


def test_the_compose_topology_is_the_tested_one() -> None:
    services = compose()["services"]
    servers = [s for s in services.values() if s.get("build", {}).get("target") == "server"]
    workers = [s for s in services.values() if s.get("build", {}).get("target") == "worker-cpu"]
    assert len(servers) == 2 and len(workers) == 2
    assert {"redis", "postgres", "lb"} <= set(services)
    for s in servers:
        env = s["environment"]
        assert env["JAXPLAY_QUEUE_URL"] == "redis://redis:6379/0"
        assert env["JAXPLAY_DATABASE_URL"].startswith("postgresql://")
        assert Settings(**{"queue_url": env["JAXPLAY_QUEUE_URL"]}).queue_url
    for w in workers:
        command = w["command"]
        assert command[:2] == ["jaxplay", "worker"] and "--queue" in command
        assert command[command.index("--queue") + 1] == "redis://redis:6379/0"
        assert {"seccomp=unconfined", "apparmor=unconfined"} <= set(w["security_opt"])
    assert "--appendonly" in services["redis"]["command"]
    nginx = (DOCKER / "nginx.conf").read_text()
    for s in ("server-1", "server-2"):
        assert f"server {s}:8000" in nginx


def test_every_setting_the_files_use_exists() -> None:
    used: set[str] = set()
    for path in DOCKER.iterdir():
        used |= set(re.findall(r"\bJAXPLAY_[A-Z0-9_]+", path.read_text()))
    unknown = used - known_settings()
    assert not unknown, f"docker/ uses settings that do not exist: {sorted(unknown)}"


def test_the_images_install_what_the_package_offers() -> None:
    dockerfile = (DOCKER / "Dockerfile").read_text()
    targets = set(re.findall(r"^FROM \S+ AS (\S+)$", dockerfile, re.MULTILINE))
    assert {"server", "worker-cpu", "worker-cuda", "worker-tpu"} <= targets
    extras = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    for extra in re.findall(r"pip install -e '\.\[(\w+)\]'", dockerfile):
        assert extra in extras, extra
    # the jail's packages are the ones scripts/setup.sh installs for CI
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    apt = re.search(r"^APT_PACKAGES=\((.*)\)", setup, re.MULTILINE)
    assert apt is not None
    for package in ("bubblewrap", "libseccomp2"):
        assert package in apt.group(1).split() and package in dockerfile
    # the workers' commands use flags `jaxplay worker` has
    from typer.testing import CliRunner

    from backend.cli import app

    help_text = CliRunner().invoke(app, ["worker", "--help"], env={"COLUMNS": "200"}).output
    commands = [w["command"] for w in compose()["services"].values() if "command" in w]
    commands += [json.loads(c) for c in re.findall(r"^CMD (\[.*\])$", dockerfile, re.MULTILINE)]
    for command in commands:
        if command[:2] == ["jaxplay", "worker"]:
            for flag in (a for a in command if a.startswith("--")):
                assert flag in help_text, flag
