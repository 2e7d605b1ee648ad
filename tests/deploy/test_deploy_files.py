"""docker/ kept in step with the code, without a Docker engine (`make deploy-check`
builds and runs the images): the compose topology is the one the scale tests prove
and the deploy check runs, every JAXPLAY_* setting the files use exists, the images'
commands are real commands, the workers' seccomp profile and Redis user grant only
what they need."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from backend.app.core.settings_table import declarations
from sandbox.jail.settings import JailConfig

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"


def compose() -> dict[str, Any]:
    yaml = pytest.importorskip("yaml")
    data: dict[str, Any] = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    return data


def known_settings() -> set[str]:
    return {info.variable for info in declarations()}


def test_the_compose_topology_is_the_tested_one() -> None:
    services = compose()["services"]
    servers = {n: s for n, s in services.items() if s.get("image") == "jaxplay-server"}
    workers = {n: s for n, s in services.items() if s.get("image") == "jaxplay-worker-cpu"}
    assert len(servers) == 2 and len(workers) == 2
    assert {"redis", "postgres", "lb"} <= set(services)
    nginx = (DOCKER / "nginx.conf").read_text()
    for name, s in servers.items():
        env = s["environment"]
        # the servers' own Redis user (docker/redis.sh)
        assert env["JAXPLAY_QUEUE_URL"].startswith("redis://server:")
        assert env["JAXPLAY_DATABASE_URL"].startswith("postgresql://")
        # a port of its own, the one nginx sends to (the same file runs on one network)
        assert f"server {name}:{env['JAXPLAY_PORT']} " in nginx
        assert s["cap_drop"] == ["ALL"]
    for w in workers.values():
        assert w["environment"]["JAXPLAY_QUEUE_URL"].startswith("redis://worker:")
        assert "command" not in w or "--queue" not in w["command"]  # no password in argv
        options = set(w["security_opt"])
        # the full jail: a seccomp profile of our own, never unconfined
        assert "seccomp=seccomp-worker.json" in options
        assert "apparmor=jaxplay-worker" in options
        assert not {o for o in options if o.endswith("=unconfined")} - {"systempaths=unconfined"}
        assert w["cap_drop"] == ["ALL"] and "no-new-privileges:true" in options
        # only what launching each jail as its own uid takes (docker/worker-entrypoint.sh)
        assert sorted(w["cap_add"]) == ["KILL", "SETGID", "SETUID"]
        assert "JAXPLAY_CGROUP_ROOT" not in w["environment"]  # docker/delegate-cgroups.sh's
    # each worker's jail uids are its own: no two workers on the host share one
    slots = JailConfig().jail_slots
    ranges = [
        range(base := int(w["environment"]["JAXPLAY_JAIL_UID_BASE"]), base + slots)
        for w in workers.values()
    ]
    assert all(r.start > 0 for r in ranges)
    assert len({u for r in ranges for u in r}) == sum(len(r) for r in ranges), ranges
    ports = [p for s in services.values() for p in s.get("ports", [])]
    assert ports == ["8000:8000"] and "listen 8000;" in nginx  # only the load balancer


def test_the_check_changes_only_where_the_stack_listens() -> None:
    yaml = pytest.importorskip("yaml")

    class Loader(yaml.SafeLoader):
        pass

    # compose's `!reset []`: the override drops what the base file sets
    Loader.add_constructor("!reset", lambda loader, node: [])
    check = yaml.load((DOCKER / "compose.check.yaml").read_text(), Loader=Loader)["services"]
    assert set(check) == set(compose()["services"])
    for name, service in check.items():
        assert service["network_mode"] == "host", name
        assert set(service) <= {"network_mode", "extra_hosts", "environment", "ports"}, name
        assert service.get("ports", []) == [], name
        listen = service.get("environment", {})
        for key in ("JAXPLAY_HOST", "REDIS_BIND", "POSTGRES_LISTEN"):
            assert listen.get(key, "127.0.0.1") == "127.0.0.1", (name, key)


def test_the_worker_seccomp_profile_adds_only_what_bubblewrap_needs() -> None:
    profile = json.loads((DOCKER / "seccomp-worker.json").read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    unconditional = set()
    for rule in profile["syscalls"]:
        if rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("includes") and not rule["args"]:
            unconditional |= set(rule["names"])
    bubblewrap = [r for r in profile["syscalls"] if r.get("comment", "").startswith("jaxplay")]
    assert len(bubblewrap) == 1
    assert set(bubblewrap[0]["names"]) == {
        "clone", "mount", "pivot_root", "sethostname", "umount2", "unshare",
    }  # fmt: skip
    # what Docker's default profile keeps for CAP_SYS_ADMIN (or refuses) stays refused
    for name in ("bpf", "setns", "open_by_handle_at", "kexec_load", "init_module", "fsopen",
                 "move_mount", "perf_event_open", "quotactl", "syslog", "reboot"):  # fmt: skip
        assert name not in unconditional, name


def test_the_worker_redis_user_reaches_only_the_worker_keys() -> None:
    from sandbox.queue.keys import Keys

    script = (DOCKER / "redis.sh").read_text()
    acl = {line.split()[1]: line for line in script.splitlines() if line.startswith("user ")}
    assert acl["default"].split()[2] == "off"
    worker = acl["worker"]
    assert "~*" not in worker and "+@all" not in worker
    keys = Keys("$p")
    patterns = set(re.findall(r"[%RW]*~(\S+?)\)?(?:\s|$)", worker))
    assert patterns == {
        keys.jobs("*"), keys.events("*"), keys.run("*"), keys.cancel("*"), keys.worker("*"),
        keys.workers,
    }  # fmt: skip
    # cancel flags are the servers' to set; workers only read them
    assert f"%R~{keys.cancel('*')}" in worker
    # events are appended, never deleted or trimmed by a worker
    events = re.search(r"\(([^)]*~\$p:events:\*)\)", worker)
    assert events is not None and set(events.group(1).split()[:-1]) == {
        "+xadd", "+expire", "+xrevrange",
    }  # fmt: skip
    assert "maxmemory-policy noeviction" in script


def test_every_setting_the_files_use_exists() -> None:
    used: set[str] = set()
    for path in DOCKER.iterdir():
        used |= set(re.findall(r"\bJAXPLAY_[A-Z0-9_]+", path.read_text()))
    unknown = used - known_settings()
    assert not unknown, f"docker/ uses settings that do not exist: {sorted(unknown)}"


def test_the_images_install_what_the_package_offers() -> None:
    dockerfile = (DOCKER / "Dockerfile").read_text()
    build = (DOCKER / "build.sh").read_text()
    targets = set(re.findall(r"^FROM \S+ AS (\S+)$", dockerfile, re.MULTILINE))
    assert {"server", "worker-cpu", "worker-cuda", "worker-tpu", "redis", "postgres", "lb"} <= (
        targets
    )
    built = re.search(r"^TARGETS=\((.*)\)", build, re.MULTILINE)
    stages = {"python", "worker-base", "extension"}  # built as parts of the targets
    assert built is not None and set(built.group(1).split()) == targets - stages
    # the worker's Python packages are the package's own extra
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert '["optional-dependencies"]["engine"]' in build and "engine" in extras
    # the jail's packages are the ones scripts/setup.sh installs for CI
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    apt = re.search(r"^APT_PACKAGES=\((.*)\)", setup, re.MULTILINE)
    base = re.search(r"^BASE_PACKAGES=\((.*)\)", build, re.MULTILINE)
    assert apt is not None and base is not None
    for package in ("bubblewrap", "libseccomp2"):
        assert package in apt.group(1).split() and package in base.group(1).split()
    # the workers' commands use flags `jaxplay worker` has
    from typer.testing import CliRunner

    from backend.cli.main import app

    help_text = CliRunner().invoke(app, ["worker", "--help"], env={"COLUMNS": "200"}).output
    commands = [w["command"] for w in compose()["services"].values() if "command" in w]
    commands += [json.loads(c) for c in re.findall(r"^CMD (\[.*\])$", dockerfile, re.MULTILINE)]
    for command in commands:
        if command[:2] == ["jaxplay", "worker"]:
            for flag in (a for a in command if a.startswith("--")):
                assert flag in help_text, flag


def test_the_worker_apparmor_profile_parses() -> None:
    parser = shutil.which("apparmor_parser")
    if parser is None:
        pytest.skip("apparmor_parser is missing (apt-get install apparmor)")
    profile = (DOCKER / "apparmor-worker").read_text()
    assert "profile jaxplay-worker " in profile and "\n  deny mount," not in profile
    # -Q: compile only, no kernel needed (docker/load-apparmor.sh loads it on a host)
    done = subprocess.run(
        [parser, "-Q", "-K", str(DOCKER / "apparmor-worker")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
