"""The jail on its own: settings, the bwrap command, the seccomp filter, a fresh
jailed run of the real engine, and the refusal to run without a jail."""

from __future__ import annotations

import asyncio
import logging
import os
import re
from dataclasses import fields
from pathlib import Path

import pytest

from sandbox.assembly import pool_registry
from sandbox.assembly.pool_registry import AutoOptions
from sandbox.jail.bwrap import BASE_ENV, LAUNCH_ENV, Runtime, bwrap_argv, jail_returncode
from sandbox.jail.cgroups import jails_weight
from sandbox.jail.jail import Jailer, JailUnavailable
from sandbox.jail.seccomp import filter_bpf
from sandbox.jail.settings import GiB, JailConfig, JailLimits, MiB, describe, parse_bytes
from sandbox.pool.settings import PoolSettings
from sandbox.pool.subprocess_pool import SubprocessPool
from sandbox.protocol import RunRequest
from sandbox.supervisor.jailed import JailedRun
from tests.support.live_pool import TEST_LIMITS, needs_bwrap

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sandbox.md"


def test_sizes() -> None:
    assert parse_bytes("2G") == 2 * GiB
    assert parse_bytes("512MiB") == 512 * MiB
    assert parse_bytes("1048576") == MiB
    with pytest.raises(ValueError):
        parse_bytes("lots")


def test_limits_from_env() -> None:
    limits = JailLimits.from_env(
        {"JAXPLAY_MEMORY_BYTES": "512M", "JAXPLAY_PIDS": "64", "JAXPLAY_MAX_WALL_S": "5"}
    )
    assert (limits.memory_bytes, limits.pids, limits.max_wall_s) == (512 * MiB, 64, 5.0)
    assert JailConfig.from_env({"JAXPLAY_UNSAFE_NO_JAIL": "1"}).unsafe_no_jail
    with pytest.raises(ValueError, match="JAXPLAY_PIDS"):
        JailLimits.from_env({"JAXPLAY_PIDS": "many"})


def test_every_setting_is_documented() -> None:
    text = DOCS.read_text()
    for cls in (JailLimits, JailConfig, PoolSettings):
        for name, _, help in describe(cls):
            assert name in text, f"{name} is not in docs/sandbox.md"
            assert help
        assert len(describe(cls)) == len(fields(cls))


def test_bwrap_command_has_every_isolation_flag() -> None:
    argv = bwrap_argv(
        "bwrap", Runtime("/venv/bin/python", ("/venv",)), JailLimits(), ["python"], seccomp_fd=7
    )
    joined = " ".join(argv)
    for flag in ("--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
                 "--new-session", "--cap-drop ALL", "--clearenv", "--seccomp 7",
                 "--ro-bind /usr /usr", "--ro-bind /venv /venv", "--proc /proc", "--dev /dev",
                 "--remount-ro /"):  # fmt: skip
        assert flag in joined
    assert re.search(r"--size \d+ --perms 0700 --tmpfs /tmp", joined)
    assert "--share-net" not in argv and "--bind" not in argv
    env = {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "--setenv"}
    assert env == BASE_ENV
    assert set(LAUNCH_ENV) == {"PATH"}


def test_seccomp_filter_builds() -> None:
    bpf = filter_bpf()
    assert len(bpf) % 8 == 0 and len(bpf) > 100  # struct sock_filter is 8 bytes


def test_bwrap_signal_status() -> None:
    assert jail_returncode(137) == -9
    assert jail_returncode(1) == 1


def test_no_jail_no_run(caplog: pytest.LogCaptureFixture) -> None:
    missing = JailConfig(bwrap="/nonexistent/bwrap")
    with pytest.raises(JailUnavailable, match="JAXPLAY_UNSAFE_NO_JAIL"):
        pool_registry.build("auto", AutoOptions(jail=missing))
    with caplog.at_level(logging.CRITICAL):
        pool = pool_registry.build("auto", AutoOptions(jail=missing, unsafe_no_jail=True))
    assert isinstance(pool, SubprocessPool)
    assert "UNSAFE" in caplog.text


@needs_bwrap
@pytest.mark.slow
def test_a_fresh_jailed_run() -> None:
    jailer = Jailer(TEST_LIMITS, JailConfig())
    request = RunRequest(
        code="import os\ndef f(x):\n    print(os.getuid())\n    return x * 2\n",
        args="(3.0,)",
        outputs=["jaxpr", "value"],
    )

    async def go() -> list[dict]:
        return [e async for e in JailedRun(jailer, request, "r1").events()]

    events = asyncio.run(go())
    kinds = [e["type"] for e in events]
    assert kinds[0] == "accepted" and kinds[-1] == "done", kinds
    assert events[-1]["status"] == "ok"
    assert "1000\n" in [e["text"] for e in events if e["type"] == "stdout"]
    assert next(e for e in events if e["type"] == "value")["repr"] == "6.0"


@needs_bwrap
@pytest.mark.slow
def test_a_fresh_jailed_run_is_killed_on_time() -> None:
    jailer = Jailer(TEST_LIMITS, JailConfig())
    request = RunRequest(code="while True:\n    pass\n", timeout_s=1.5)

    async def go() -> tuple[list[dict], JailedRun]:
        run = JailedRun(jailer, request, "r2")
        return [e async for e in run.events()], run

    events, run = asyncio.run(go())
    assert events[-1]["status"] == "timeout"
    assert run._jail.cgroup is None or not run._jail.cgroup.main.exists()


@needs_bwrap
def test_cgroups_of_a_dead_supervisor_are_swept() -> None:
    jailer = Jailer(TEST_LIMITS, JailConfig())
    root = jailer.cgroups.main_root
    if root is None:
        pytest.skip("no cgroups on this host")
    stale = root / f"jail-{2**22 + 1}-1-1-1"  # above any pid_max: its supervisor is dead
    # a live pid that started at another time: the pid was reused (a restarted
    # container's worker has the pid of the one before it)
    reused = root / f"jail-{os.getpid()}-0-1-1"
    stale.mkdir()
    reused.mkdir()
    assert Jailer(TEST_LIMITS, JailConfig()).cgroups.main_root is not None
    assert not stale.exists() and not reused.exists()


@needs_bwrap
def test_the_jails_group_weighs_as_many_processes_as_cpus() -> None:
    # all jails share jaxplay's group: with the default weight (one process's) a run on
    # a busy host waits on its run queue several times as long as a process of its own
    assert jails_weight(1024, 1) == 1024 and jails_weight(100, 4) == 400
    config = JailConfig()
    if config.cgroup_root:
        pytest.skip("an operator's cgroup root keeps the weight it was given")
    cgroups = Jailer(TEST_LIMITS, config).cgroups
    cpus = len(os.sched_getaffinity(0))
    if cgroups.version == 1:
        shares = cgroups._roots["cpu"] / "cpu.shares"
        assert int(shares.read_text()) == 1024 * cpus
    elif cgroups.version == 2:
        weight = cgroups._roots[""] / "cpu.weight"
        if not weight.exists():
            pytest.skip("no cpu controller delegated here")
        assert int(weight.read_text()) == min(10_000, 100 * cpus)
    else:
        pytest.skip("no cgroups on this host")


def test_device_nodes_are_bound_only_when_asked() -> None:
    runtime = Runtime(python="/usr/bin/python3", ro_paths=())
    plain = bwrap_argv("bwrap", runtime, TEST_LIMITS, ["true"], seccomp_fd=3)
    assert "--dev-bind" not in plain
    gpu = bwrap_argv(
        "bwrap",
        runtime,
        TEST_LIMITS,
        ["true"],
        seccomp_fd=3,
        devices=("/dev/nvidia0", "/dev/nvidiactl"),
    )
    at = gpu.index("--dev")
    assert gpu[at + 2 : at + 8] == [
        "--dev-bind", "/dev/nvidia0", "/dev/nvidia0", "--dev-bind", "/dev/nvidiactl", "/dev/nvidiactl",
    ]  # fmt: skip


# A host device node that bwrap's minimal /dev lacks: the CPU twin of a GPU worker's
# /dev/nvidia* (binding it is harmless: the test only looks at it).
_TWIN_NODES = [
    n for n in ("/dev/fuse", "/dev/hwrng", "/dev/vga_arbiter", "/dev/kmsg") if Path(n).exists()
]


@needs_bwrap
@pytest.mark.slow
@pytest.mark.skipif(not _TWIN_NODES, reason="no spare device node on this host to bind")
def test_a_jail_with_a_device_node_sees_it_and_only_it() -> None:
    node = _TWIN_NODES[0]
    jailer = Jailer(TEST_LIMITS, JailConfig())
    jailer.devices = (node,)
    code = (
        "import os, stat\n"
        f"st = os.stat({node!r})\n"
        "print(stat.S_ISCHR(st.st_mode), sorted(set(os.listdir('/dev')) & {'nvidia0', 'kvm', 'vda'}))\n"
        "def f(x):\n    return x\n"
    )
    request = RunRequest(code=code, args="(1.0,)", outputs=["value"])

    async def go() -> list[dict]:
        return [e async for e in JailedRun(jailer, request, "dev").events()]

    events = asyncio.run(go())
    assert events[-1]["status"] == "ok", events[-3:]
    assert "True []\n" in [e["text"] for e in events if e["type"] == "stdout"]
