"""A worker on a host where the jail cannot start refuses, naming what the host lacks,
and runs nothing (issue 50, item 5: a TPU VM without user namespaces, not root).

Such a host is made for real: the worker is started in a user namespace of its own
whose ``user.max_user_namespaces`` is 0 (so it can make none, as on that VM), as uid
1000 (not root, and with no capability left after its exec)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.queue import jail_host
from tests.gates import needs_jail

ROOT = Path(__file__).resolve().parents[2]

#: Enters a user namespace with none allowed below it, as uid 1000, then execs argv.
#: The sysctl is per user namespace; its creator may write it before the exec drops
#: its capabilities (sandbox/jail/enter.py does the same in every jail).
WITHOUT_USERNS = r"""
import os, sys
from sandbox.jail import syscalls
uid, gid = os.geteuid(), os.getegid()
syscalls.unshare(syscalls.CLONE_NEWUSER)
for name, text in (("setgroups", "deny"), ("uid_map", f"1000 {uid} 1"), ("gid_map", f"1000 {gid} 1")):
    with open(f"/proc/self/{name}", "w") as f:
        f.write(text)
with open("/proc/sys/user/max_user_namespaces", "w") as f:
    f.write("0")
os.execv(sys.argv[1], sys.argv[1:])
"""


def without_userns(
    *argv: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_USERNS, *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def userns_available() -> None:
    # the simulation needs what it takes away: a user namespace of its own
    why = jail_host.user_namespace_refused()
    if why is not None:
        pytest.skip(f"this host makes no user namespace to take them away in: {why}")


@needs_jail
@pytest.mark.slow
@pytest.mark.usefixtures("userns_available")
def test_the_host_facts_say_no_user_namespaces_and_not_root() -> None:
    probe = "from sandbox.queue import jail_host; print(jail_host.missing_for_jail())"
    done = without_userns(sys.executable, "-c", probe)
    assert done.returncode == 0, done.stderr
    assert "user namespaces (unshare(CLONE_NEWUSER) fails with ENOSPC" in done.stdout
    assert "user.max_user_namespaces = 0" in done.stdout
    assert "root (this worker runs as uid 1000)" in done.stdout


@needs_jail
@pytest.mark.slow
@pytest.mark.usefixtures("userns_available")
def test_a_worker_whose_jail_cannot_start_refuses_and_runs_nothing() -> None:
    """The worker's own start (settings, pool, its test jail) on that host: it ends
    before its probe run, with the jail's reason and what the host lacks."""
    done = without_userns(
        sys.executable,
        "-m",
        "backend.cli.worker",
        "--queue",
        "redis://127.0.0.1:1/0",
        "--backend",
        "cpu",
        env={"JAXPLAY_LOG_FORMAT": "text"},
    )
    assert done.returncode in (1, 2), (done.returncode, done.stderr[-2000:])
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith("jaxplay worker: "), done.stderr[-2000:]
    assert "This host cannot jail user code: it lacks user namespaces" in said, said
    assert "root (this worker runs as uid 1000)" in said, said
    assert "No run is made without the jail" in said, said
    assert "serving" not in done.stderr and "probe" not in done.stderr
