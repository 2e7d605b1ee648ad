"""Who may launch each jail as its own uid: a process with CAP_SETUID, CAP_SETGID and
CAP_KILL (root on a host; in a worker container an unprivileged worker holding them as
ambient capabilities), never "whoever is uid 0". The container's way is run here for
real: an unprivileged uid with those three ambient capabilities and no-new-privileges
(as docker/worker-entrypoint.sh starts the worker) launches jails on numbered uids."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.jail.jail import Jailer, JailUnavailable
from sandbox.jail.settings import JailConfig
from sandbox.jail.uids import CAP_KILL, CAP_SETGID, CAP_SETUID, Capabilities, can_switch_uids
from tests.support.live_pool import TEST_LIMITS, needs_bwrap

ROOT = Path(__file__).resolve().parents[2]
THREE = 1 << CAP_SETUID | 1 << CAP_SETGID | 1 << CAP_KILL
ALL = (1 << 41) - 1


def caps(effective: int, ambient: int = 0) -> Capabilities:
    return Capabilities(
        inheritable=ambient, permitted=effective, effective=effective, bounding=ALL, ambient=ambient
    )


def test_the_capability_sets_are_read_from_the_process_status() -> None:
    status = (
        "Name:\tpython\nUid:\t0\t0\t0\t0\nCapInh:\t0000000000000000\nCapPrm:\t00000000000000e0\n"
        "CapEff:\t00000000000000c0\nCapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000080\n"
    )
    parsed = Capabilities.parse(status)
    assert parsed == Capabilities(0, 0xE0, 0xC0, (1 << 41) - 1, 0x80)
    assert parsed.holds(["CAP_SETUID", "CAP_SETGID", "CAP_KILL"]) == ["CAP_SETUID", "CAP_SETGID"]
    assert parsed.holds(["CAP_SETUID", "CAP_SETGID"], "ambient") == ["CAP_SETUID"]
    with pytest.raises(ValueError, match="CapAmb"):
        Capabilities.parse(status.replace("CapAmb", "Other"))
    own = Capabilities.of()
    assert own == Capabilities.parse(Path("/proc/self/status").read_text())


def test_who_may_switch_uids() -> None:
    # root with its capabilities (a host), and an unprivileged worker holding the three
    # as ambient capabilities (a worker container)
    assert can_switch_uids(caps(ALL), euid=0)
    assert can_switch_uids(caps(THREE, ambient=THREE), euid=10002)
    # an ordinary user: jails run as its own uid
    assert not can_switch_uids(caps(0), euid=1000)
    # never root without them (its jails would be uid 0), never half of them, never
    # capabilities the launcher loses at exec
    with pytest.raises(ValueError, match="root without"):
        can_switch_uids(caps(0), euid=0)
    with pytest.raises(ValueError, match="but not CAP_KILL"):
        can_switch_uids(caps(THREE & ~(1 << CAP_KILL), ambient=THREE), euid=10002)
    with pytest.raises(ValueError, match="not as ambient"):
        can_switch_uids(caps(THREE), euid=10002)


@needs_bwrap
def test_this_host_decides_by_capabilities() -> None:
    jailer = Jailer(TEST_LIMITS)
    assert bool(jailer.users) == can_switch_uids(Capabilities.of(), os.geteuid())
    if os.geteuid() == 0:
        assert jailer.setpriv is not None and jailer.slots == JailConfig().jail_slots


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="as root: the range is checked against users")
def test_a_numbered_range_holding_a_user_is_refused() -> None:
    taken = {p.pw_uid for p in pwd.getpwall()}
    # a user whose uid is the second of a range: its first is no one's
    user = next(p for p in pwd.getpwall() if p.pw_uid > 1 and p.pw_uid - 1 not in taken)
    with pytest.raises(JailUnavailable, match=f"jail uid {user.pw_uid} is the user {user.pw_name}"):
        Jailer(TEST_LIMITS, JailConfig(jail_uid_base=user.pw_uid - 1, jail_slots=2))
    with pytest.raises(JailUnavailable, match="out of range"):
        Jailer(TEST_LIMITS, JailConfig(jail_uid_base=2**32 - 2, jail_slots=2))


# --- the worker container's way, run on this host ------------------------------------------

WORKER_UID = 20_100  # no user of this host: the container's jaxplay-worker stands in
UID_BASE = 2_000_009_000  # two numbered jail uids, no user's
V1 = not Path("/sys/fs/cgroup/cgroup.controllers").exists() and Path("/sys/fs/cgroup/pids").is_dir()


@pytest.fixture
def delegated_v1_cgroups() -> Iterator[str]:
    """A cgroup v1 subtree per controller owned by the worker's uid, as
    docker/delegate-cgroups.sh makes for a worker container (bound there, linked here)."""
    if not V1:
        pytest.skip("not a cgroup v1 host: docker/delegate-cgroups.sh delegates v1 only")
    name = f"jaxplay-uid-test-{os.getpid()}"
    links = Path(f"/run/{name}")
    links.mkdir(mode=0o755)
    made = []
    for controller in ("memory", "pids", "cpu", "cpuset"):
        mount = Path("/sys/fs/cgroup", controller)
        if not mount.is_dir():
            continue
        d = mount / name
        d.mkdir()
        made.append(d)
        if controller == "cpuset":
            for f in ("cpuset.cpus", "cpuset.mems"):
                (d / f).write_text((mount / f).read_text())
        os.chown(d, WORKER_UID, -1)
        (links / controller).symlink_to(d)
    yield str(links)
    for d in made:
        for jail in d.glob("jail-*"):
            jail.rmdir()
        d.rmdir()
    shutil.rmtree(links)


def inotify_instances(pid: int) -> int:
    """How many inotify instances host process ``pid`` holds (as root: any uid's)."""
    return sum(os.readlink(fd) == "anon_inode:inotify" for fd in Path(f"/proc/{pid}/fd").iterdir())


def probe(cgroup_root: str) -> tuple[dict[str, Any], dict[int, int], list[bool]]:
    """tests/jail/uid_worker_probe.py as a container's worker: uid WORKER_UID in the
    jail users' group (the way to this host's runtime under /root), the three
    capabilities ambient and nothing else, no-new-privileges. Its report, the inotify
    instances each jail process held meanwhile, and whether it closed each jail."""
    group = pwd.getpwnam(f"{JailConfig().jail_user}-0").pw_gid
    three = "-all,+setuid,+setgid,+kill"
    worker = subprocess.Popen(
        ["setpriv", f"--reuid={WORKER_UID}", f"--regid={group}", "--clear-groups",
         f"--inh-caps={three}", f"--ambient-caps={three}", f"--bounding-set={three}",
         "--no-new-privs", "--",
         str(ROOT / ".venv/bin/python"), "-m", "tests.jail.uid_worker_probe",
         str(UID_BASE), cgroup_root],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert worker.stdin is not None and worker.stdout is not None
    try:
        line = worker.stdout.readline()
        if not line:
            pytest.fail(f"the worker ended: {worker.communicate(timeout=30)[1][-3000:]}")
        report: dict[str, Any] = json.loads(line)
        pids = [p["pid"] for jail in report["jails"] for p in jail["processes"]]
        inotify = {pid: inotify_instances(pid) for pid in pids}
        out, err = worker.communicate("close\n", timeout=60)
    finally:
        worker.kill()
    assert worker.returncode == 0, err[-3000:]
    closed: list[bool] = json.loads(out)["closed"]
    return report, inotify, closed


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="as root: it starts a worker as another uid")
@pytest.mark.parametrize("cgroups", ["v1-delegated", "none"])
def test_an_unprivileged_worker_with_the_capabilities_gives_each_jail_its_own_uid(
    cgroups: str, request: pytest.FixtureRequest
) -> None:
    root = request.getfixturevalue("delegated_v1_cgroups") if cgroups != "none" else "none"
    report, inotify, closed = probe(root)
    # the worker is not root and holds exactly the three capabilities
    assert report["uid"] == WORKER_UID
    assert report["caps"]["effective"] == report["caps"]["ambient"] == THREE
    assert report["cgroups"] == ("v1" if cgroups != "none" else "none")
    assert [u for u, _ in report["users"]] == [UID_BASE, UID_BASE + 1]
    hog, other = report["jails"]
    # one jail holds every inotify instance its uid may have; the other still makes one
    assert hog["said"][0] == "HELD" and hog["said"][2] == "EMFILE", hog["said"]
    held = int(hog["said"][1])
    assert 16 <= held < 4096
    assert other["said"][0] == "MADE" and other["said"][2] == "ok", other["said"]
    for jail, uid in ((hog, UID_BASE), (other, UID_BASE + 1)):
        assert jail["user"][0] == uid
        # seen from outside: every process of the jail is its uid, with no capability
        assert jail["processes"], jail
        for process in jail["processes"]:
            assert process["uids"] == [uid], process
            for key in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
                assert process["caps"][key] == 0, process
    assert max(inotify[p["pid"]] for p in hog["processes"]) == held
    assert max(inotify[p["pid"]] for p in other["processes"]) == 1
    # and the worker, another uid, killed both jails and removed their cgroups
    assert closed == [True, True]
