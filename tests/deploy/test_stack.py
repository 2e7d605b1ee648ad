"""docker/compose.yaml's stack, built from docker/ and running (`make deploy-check`):
runs go from a client through nginx, a server replica and Redis to a jailed worker in
its container and back; a worker killed mid-run ends its run clearly; a snippet
stored through one replica opens through the other; Redis's users can do what they
need and no more."""

from __future__ import annotations

import contextlib
import glob
import importlib.metadata
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from sandbox.environments import libraries, library_choices

from .conftest import Stack

WORKER_UID = 10002  # docker/Dockerfile: jaxplay-worker
#: docker/compose.yaml: each worker's JAXPLAY_JAIL_UID_BASE, JAXPLAY_JAIL_SLOTS (128) uids
JAIL_UIDS = {
    "worker-1": range(2_000_001_000, 2_000_001_128),
    "worker-2": range(2_000_002_000, 2_000_002_128),
}
#: CAP_KILL, CAP_SETGID, CAP_SETUID: what the worker keeps (docker/worker-entrypoint.sh)
WORKER_CAPS = 0xE0
JAIL_MEMORY = 1 << 30  # docker/compose.check.yaml: JAXPLAY_MEMORY_BYTES
GRAD_JIT: dict[str, Any] = {
    "code": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.tanh(x) ** 2)\n",
    "args": "(jnp.ones((3,)),)",
    "transforms": [{"name": "grad"}, {"name": "jit"}],
    "outputs": ["jaxpr", "value"],
    "backend": "cpu",
    "cache": False,
}


def run(stack: Stack, request: dict[str, Any]) -> list[dict[str, Any]]:
    reply = httpx.post(f"{stack.url}/api/v1/runs", json=request, timeout=120)
    assert reply.status_code == 200, reply.text
    events: list[dict[str, Any]] = reply.json()["events"]
    return events


def done(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert events and events[-1]["type"] == "done", events[-3:]
    return events[-1]


def live_workers(stack: Stack) -> set[str]:
    """The ids of the workers whose heartbeat key is alive."""
    client = redis.Redis.from_url(stack.redis_url("server"), decode_responses=True)
    ids: Any = client.smembers("jaxplay:workers")
    return {i for i in ids if client.exists(f"jaxplay:worker:{i}")}


def wait_for_workers(stack: Stack, count: int, within_s: float = 180) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if len(live_workers(stack)) >= count:
            return
        time.sleep(1)
    pytest.fail(f"fewer than {count} cpu workers registered within {within_s:g} s")


def jail_cgroups(stack: Stack, worker: str, controller: str) -> list[Path]:
    return [
        Path(p) for p in glob.glob(f"{stack.cgroups}/{controller}/jaxplay-workers/{worker}/jail-*")
    ]


def procs(cgroup: Path) -> list[int]:
    return [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]


def status(pid: int) -> dict[str, str]:
    """/proc/PID/status of a host process, by field."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def uids(pid: int) -> set[int]:
    return {int(u) for u in status(pid)["Uid"].split()}


def caps(pid: int) -> dict[str, int]:
    """The capability sets of a host process (CapInh, CapPrm, CapEff, CapBnd, CapAmb)."""
    return {k: int(v, 16) for k, v in status(pid).items() if k.startswith("Cap")}


def user_namespace_map(pid: int) -> str:
    """/proc/PID/uid_map as this process sees it: anyone may read it, and it tells a
    process of the host's user namespace (``0 0 4294967295``, as ours) from one of a
    jail's own (its root mapped to the jail's uid only, or nothing yet)."""
    return " ".join(Path(f"/proc/{pid}/uid_map").read_text().split())


def describe(pid: int, held_caps: dict[str, int]) -> str:
    """What a jailed process that failed a check is: its command, uid map, caps."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        uid_map = user_namespace_map(pid)
    except OSError:  # gone, or not ours to read
        cmdline, uid_map = "(gone)", "?"
    return f"pid {pid} {cmdline!r} uid_map {uid_map!r} (host {user_namespace_map(os.getpid())!r}) caps {held_caps}"


#: A jail's launchers hold capabilities for a moment while it starts (a spare being
#: refilled). With bubblewrap: setpriv between taking the jail's uid (keeping its
#: permitted set so that it can clear the inheritable and ambient ones) and exec'ing
#: bwrap, which drops them; bwrap, in the jail's new user namespace (capabilities of
#: that namespace only), until it has set the jail up and drops them before exec'ing
#: the jail's process. A jail forked from a template (sandbox/jail/enter.py) has no
#: launcher of its own name: its monitor, pid 1 and pid 2 hold capabilities only in
#: the jail's new user namespace, and each drops them once the jail is built.
LAUNCHERS = {"setpriv", "bwrap"}
HELD = ("CapInh", "CapPrm", "CapEff", "CapAmb")


def holds_capabilities(held_caps: dict[str, int]) -> bool:
    return any(held_caps[k] for k in HELD)


def launching(pid: int) -> bool:
    """A launcher by name, or a process in a user namespace other than the host's."""
    if Path(f"/proc/{pid}/comm").read_text().strip() in LAUNCHERS:
        return True
    return user_namespace_map(pid) != user_namespace_map(os.getpid())


def assert_holds_no_capability(pid: int) -> None:
    """A jailed process holds no capability; a launcher may for its start only, so it
    must be one and drop them (or be gone) within seconds: a run's process never may."""
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        held_caps = caps(pid)
        if not holds_capabilities(held_caps):
            return
        assert launching(pid), describe(pid, held_caps)
        deadline = time.monotonic() + 10
        while holds_capabilities(held_caps := caps(pid)):
            assert time.monotonic() < deadline, f"a launcher kept them: {describe(pid, held_caps)}"
            time.sleep(0.05)


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def worker_process(stack: Stack, worker: str) -> int:
    """The host pid of `jaxplay worker` in its container (the child of docker-init)."""
    container = stack.compose_run("ps", "-q", worker).strip()
    init = json.loads(_docker("inspect", container))[0]["State"]["Pid"]
    (pid,) = [c for c in children(init) if b"worker" in Path(f"/proc/{c}/cmdline").read_bytes()]
    return pid


def test_a_run_goes_through_nginx_a_replica_redis_and_a_jailed_worker(stack: Stack) -> None:
    wait_for_workers(stack, 2)
    events = run(stack, GRAD_JIT)
    assert done(events)["status"] == "ok", done(events)
    accepted = next(e for e in events if e["type"] == "accepted")
    # the image runs the JAX the tests ran (docker/build.sh pins .venv's versions)
    assert accepted["worker"]["jax_version"] == importlib.metadata.version("jax")
    value = next(e for e in events if e["type"] == "value")
    assert "Array" in value["repr"]
    # the run was handed on by Redis: its events are there, under the run's id
    client = redis.Redis.from_url(stack.redis_url("server"), decode_responses=True)
    last: Any = client.xrevrange(f"jaxplay:events:{accepted['run_id']}", count=1)
    assert json.loads(last[0][1]["e"])["type"] == "done"
    # both replicas answer behind nginx (it takes turns)
    backends = httpx.get(f"{stack.url}/api/v1/backends", timeout=10).json()["backends"]
    (cpu,) = [b for b in backends if b["name"] == "cpu"]
    assert cpu["jax_version"] == importlib.metadata.version("jax")


def test_the_worker_image_holds_the_libraries_its_jax_offers(stack: Stack) -> None:
    # docker/build.sh installs the lock's set beside the image's JAX, as make setup
    # does in .venv: a pasted Flax model runs in the deployed worker too
    offered = libraries.offered(importlib.metadata.version("jax"), "3.13")
    request = {
        **GRAD_JIT,
        "code": "import optax\nfrom flax import nnx\nimport jax.numpy as jnp\n\n"
        "def f(x):\n    print(nnx.__name__, optax.__version__)\n    return jnp.sum(x ** 2)\n",
    }
    events = run(stack, request)
    assert done(events)["status"] == "ok", events[-3:]
    printed = "".join(e["text"] for e in events if e["type"] == "stdout")
    assert f"flax.nnx {offered['optax']}" in printed, printed
    accepted = next(e for e in events if e["type"] == "accepted")
    assert accepted["worker"]["libraries"] == offered


def test_a_run_asking_an_alternative_library_version_gets_it(stack: Stack) -> None:
    # the worker image installs the alternatives' overlays (docker/Dockerfile, their
    # committed lock), registers them, and the servers offer them (issue 22)
    jax = importlib.metadata.version("jax")
    (alternative, *_) = library_choices.listed(jax, "3.13")
    wait_for_workers(stack, 2)
    backends = httpx.get(f"{stack.url}/api/v1/backends", timeout=10).json()["backends"]
    (cpu,) = [b for b in backends if b["name"] == "cpu"]
    (listed,) = [v for v in cpu["versions"] if v["version"] == jax]
    (entry,) = [lib for lib in listed["libraries"] if lib["name"] == alternative.name]
    assert alternative.version in entry["alternatives"], entry
    module = libraries.BY_NAME[alternative.name].imports[0].partition(".")[0]
    request = {
        **GRAD_JIT,
        "code": f"import {module}\nimport jax.numpy as jnp\n\n"
        f"def f(x):\n    print({module}.__version__)\n    return jnp.sum(x ** 2)\n",
        "libraries": {alternative.name: alternative.version},
    }
    events = run(stack, request)
    assert done(events)["status"] == "ok", events[-3:]
    printed = "".join(e["text"] for e in events if e["type"] == "stdout")
    assert printed.strip() == alternative.version, printed
    accepted = next(e for e in events if e["type"] == "accepted")
    assert accepted["worker"]["libraries"][alternative.name] == alternative.version
    # asking nothing: the version's default again
    events = run(stack, {**request, "libraries": {}})
    accepted = next(e for e in events if e["type"] == "accepted")
    assert (
        accepted["worker"]["libraries"][alternative.name]
        == libraries.offered(jax, "3.13")[alternative.name]
    )


def test_the_worker_runs_unprivileged_and_its_jails_have_cgroups_of_their_own(
    stack: Stack,
) -> None:
    wait_for_workers(stack, 2)
    for worker in ("worker-1", "worker-2"):
        container = stack.compose_run("ps", "-q", worker).strip()
        (inspect,) = json.loads(_docker("inspect", container))
        options = inspect["HostConfig"]["SecurityOpt"]
        seccomp = [o for o in options if o.startswith("seccomp=")]
        assert seccomp and "unconfined" not in seccomp[0], options
        assert "no-new-privileges:true" in options, options
        # started as root with three capabilities, which the entrypoint keeps for the
        # unprivileged worker: the worker itself is never root
        assert inspect["HostConfig"]["CapDrop"] == ["ALL"]
        assert {c.removeprefix("CAP_") for c in inspect["HostConfig"]["CapAdd"]} == {
            "SETUID", "SETGID", "KILL",
        }  # fmt: skip
        worker_pid = worker_process(stack, worker)
        assert uids(worker_pid) == {WORKER_UID}
        held = caps(worker_pid)
        assert held["CapEff"] == held["CapPrm"] == held["CapAmb"] == WORKER_CAPS, held
        assert status(worker_pid)["NoNewPrivs"] == "1"
        # the warm zygotes wait in their jails: each jail is a cgroup of its own, with
        # the jail's limits, under the subtree delegated to this worker
        memory = jail_cgroups(stack, worker, "memory")
        assert memory, f"{worker}: no jail cgroups (the jails run degraded)"
        jailed = 0
        seen: set[int] = set()
        for cgroup in memory:
            limit = int((cgroup / "memory.limit_in_bytes").read_text())
            assert limit == JAIL_MEMORY, cgroup
            pids_dir = Path(str(cgroup).replace("/memory/", "/pids/"))
            assert (pids_dir / "pids.max").read_text().strip() == "128", pids_dir
            jail_uids = set()
            for pid in procs(cgroup):
                jail_uids |= uids(pid)
                held = caps(pid)
                assert held["CapEff"] == held["CapPrm"] == held["CapAmb"] == 0, (pid, held)
                assert held["CapInh"] == 0, (pid, held)
                jailed += 1
            # each jail is one host uid of the worker's own range, none of another jail
            if jail_uids:  # (a jail that is being closed may be empty)
                assert len(jail_uids) == 1 and jail_uids <= set(JAIL_UIDS[worker]), jail_uids
                assert not jail_uids & seen, jail_uids
                seen |= jail_uids
        assert jailed, f"{worker}: no process in any jail"


def test_a_run_over_its_memory_is_killed_by_its_cgroup_in_the_container(stack: Stack) -> None:
    # shared memory: no rlimit counts it, only the jail's memory cgroup
    code = (
        "import mmap\n"
        "m = mmap.mmap(-1, 2 << 30, flags=mmap.MAP_SHARED)\n"
        "block = b'x' * (64 << 20)\n"
        "for i in range(32):\n"
        "    m.write(block)\n"
        "print('wrote 2 GiB')\n\n"
        "def f():\n    return 0\n"
    )
    request = {"code": code, "outputs": ["value"], "backend": "cpu", "cache": False}
    events = run(stack, {**request, "timeout_s": 60})
    end = done(events)
    assert end["status"] == "killed" and end["reason"] == "memory 1 GiB", end
    assert not any("wrote 2 GiB" in e.get("text", "") for e in events)
    assert done(run(stack, GRAD_JIT))["status"] == "ok"


# Issue 10's case inside a worker container: one tenant holds every inotify instance
# its uid may have (fs.inotify.max_user_instances, 128 by default) while another
# tenant's run on the same worker makes one.
INOTIFY = "import ctypes, errno, time\nlibc = ctypes.CDLL(None, use_errno=True)\n"
HOG = INOTIFY + (
    "held = []\n"
    "while len(held) < 4096:\n"
    "    fd = libc.inotify_init1(0)\n"
    "    if fd < 0:\n"
    "        break\n"
    "    held.append(fd)\n"
    "print('HELD', len(held), errno.errorcode.get(ctypes.get_errno()), flush=True)\n"
    "time.sleep(15)\n\n"
    "def f():\n    return len(held)\n"
)
BYSTANDER = INOTIFY + (
    "fd = libc.inotify_init1(0)\n"
    "print('MADE', fd, errno.errorcode.get(ctypes.get_errno()) if fd < 0 else 'ok', flush=True)\n"
    "time.sleep(5)\n\n"
    "def f():\n    return fd\n"
)


def inotify_instances(pid: int) -> int:
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            count += os.readlink(fd) == "anon_inode:inotify"
    return count


def jail_processes(stack: Stack, worker: str) -> dict[int, tuple[int, int]]:
    """pid -> (host uid, inotify instances) of every process in the worker's jails."""
    found = {}
    for cgroup in jail_cgroups(stack, worker, "pids"):
        for pid in procs(cgroup):
            with contextlib.suppress(FileNotFoundError):  # gone meanwhile
                (uid,) = uids(pid)
                found[pid] = (uid, inotify_instances(pid))
    return found


def test_tenants_of_one_worker_container_share_no_per_uid_counter(stack: Stack) -> None:
    wait_for_workers(stack, 2)
    # both tenants on one worker container: the other one is stopped meanwhile
    stack.compose_run("stop", "--timeout", "10", "worker-2")
    try:
        request = {"outputs": ["value"], "backend": "cpu", "cache": False, "timeout_s": 40}
        tenants = [httpx.Client(base_url=stack.url, timeout=90) for _ in range(2)]
        for tenant in tenants:  # each its own page session: a tenant of its own
            assert tenant.get("/").status_code == 200 and tenant.cookies.get("jaxplay_session")
        hog_events: list[dict[str, Any]] = []
        other_events: list[dict[str, Any]] = []
        ndjson = {"Accept": "application/x-ndjson"}
        with tenants[0].stream(
            "POST", "/api/v1/runs", json={**request, "code": HOG}, headers=ndjson
        ) as hog:
            hog_lines = hog.iter_lines()
            for line in hog_lines:
                hog_events.append(json.loads(line))
                if "HELD" in hog_events[-1].get("text", "") or hog_events[-1]["type"] == "done":
                    break
            held = hog_events[-1].get("text", "").split()
            assert held[0] == "HELD" and held[2] == "EMFILE", hog_events[-3:]
            assert 16 <= int(held[1]) < 4096, held
            with tenants[1].stream(
                "POST", "/api/v1/runs", json={**request, "code": BYSTANDER}, headers=ndjson
            ) as other:
                other_lines = other.iter_lines()
                for line in other_lines:
                    other_events.append(json.loads(line))
                    if other_events[-1]["type"] in ("stdout", "done"):
                        break
                # the other tenant made one, while the hog holds all of its uid's
                made = other_events[-1].get("text", "").split()
                assert made[:1] == ["MADE"] and made[2:3] == ["ok"], other_events[-3:]
                assert int(made[1]) >= 0, made
                # seen from the host meanwhile, the two runs
                # are processes of two different uids of worker-1's range, holding
                # their instances, with no capability
                jailed = jail_processes(stack, "worker-1")
                hog_uids = {u for u, n in jailed.values() if n >= int(held[1])}
                other_uids = {u for u, n in jailed.values() if n == 1}
                assert len(hog_uids) == 1 and len(other_uids) == 1, jailed
                assert hog_uids != other_uids, jailed
                assert hog_uids | other_uids <= set(JAIL_UIDS["worker-1"]), jailed
                for pid, (uid, _) in jailed.items():
                    if uid not in JAIL_UIDS["worker-1"]:
                        # a jail being launched right now (a spare refilled): its
                        # first process, still the worker's own (bubblewrap's /bin/sh,
                        # or the child forked from a template), is moved into the
                        # jail's cgroup before it takes the jail's uid and clears
                        # every capability of the host's user namespace
                        assert uid == WORKER_UID, jailed
                        continue
                    assert_holds_no_capability(pid)
                other_events += [json.loads(line) for line in other_lines if line]
            hog_events += [json.loads(line) for line in hog_lines if line]
        assert done(other_events)["status"] == "ok", done(other_events)
        assert done(hog_events)["status"] == "ok", done(hog_events)
        # the tenant's next run is normal
        assert done(run(stack, GRAD_JIT))["status"] == "ok"
    finally:
        stack.compose_run("start", "worker-2")
        wait_for_workers(stack, 2)


def test_a_worker_killed_mid_run(stack: Stack) -> None:
    wait_for_workers(stack, 2)
    request = {
        "code": "import time\ntime.sleep(40)\n\ndef f():\n    return 0\n",
        "outputs": ["value"],
        "backend": "cpu",
        "timeout_s": 55,
        "cache": False,
    }
    client = redis.Redis.from_url(stack.redis_url("server"), decode_responses=True)
    events: list[dict[str, Any]] = []
    with httpx.stream(
        "POST",
        f"{stack.url}/api/v1/runs",
        json=request,
        headers={"Accept": "application/x-ndjson"},
        timeout=90,
    ) as reply:
        assert reply.status_code == 200
        lines = reply.iter_lines()
        for line in lines:
            events.append(json.loads(line))
            if events[-1]["type"] == "accepted":
                break
        run_id = events[-1]["run_id"]
        owner = client.hget(f"jaxplay:run:{run_id}", "owner")
        assert owner in ("worker-1", "worker-2"), owner
        killed_at = time.monotonic()
        stack.compose_run("kill", "-s", "SIGKILL", owner)
        for line in lines:
            if line:
                events.append(json.loads(line))
    took = time.monotonic() - killed_at
    end = done(events)
    assert end["status"] == "killed", end
    assert f"({owner}) was lost" in end["reason"], end
    assert took < 30, took
    # its jails died with it: nothing is left in the cgroups it had
    assert all(not procs(c) for c in jail_cgroups(stack, owner, "pids"))
    # it comes back, and runs are served again
    stack.compose_run("start", owner)
    wait_for_workers(stack, 2)
    assert done(run(stack, GRAD_JIT))["status"] == "ok"


def test_a_snippet_shared_through_one_replica_opens_through_the_other(stack: Stack) -> None:
    snippet = {k: v for k, v in GRAD_JIT.items() if k != "cache"}  # a run's option only
    stored = httpx.post(f"{stack.url}/api/v1/snippets", json=snippet, timeout=30)
    assert stored.status_code == 201, stored.text
    snippet_id = stored.json()["id"]
    # nginx takes turns: four requests reach both replicas, which share PostgreSQL
    for _ in range(4):
        opened = httpx.get(f"{stack.url}/api/v1/snippets/{snippet_id}", timeout=30)
        assert opened.status_code == 200, opened.text
        assert opened.json()["code"] == snippet["code"]
    page = httpx.get(f"{stack.url}/s/{snippet_id}", timeout=30)
    assert page.status_code == 200 and "jaxplay-snippet" in page.text
    assert done(run(stack, {**opened.json(), "cache": False}))["status"] == "ok"


def test_redis_users_can_do_their_part_and_no_more(stack: Stack) -> None:
    worker = redis.Redis.from_url(stack.redis_url("worker"), decode_responses=True)
    server = redis.Redis.from_url(stack.redis_url("server"), decode_responses=True)
    # a worker appends events and reads cancel flags ...
    assert worker.xadd("jaxplay:events:acl-check", {"e": "{}"})
    assert worker.exists("jaxplay:cancel:acl-check") == 0
    # ... and may not delete or trim a run's events, cancel runs, queue runs on keys
    # that are not job queues, read other keys or administer Redis
    refused = [
        lambda: worker.delete("jaxplay:events:acl-check"),
        lambda: worker.xdel("jaxplay:events:acl-check", "0-1"),
        lambda: worker.set("jaxplay:cancel:acl-check", "1"),
        lambda: worker.xadd("jaxplay:run:acl-check", {"a": "1"}),
        lambda: worker.get("elsewhere"),
        lambda: worker.flushall(),
        lambda: worker.config_get("maxmemory"),
        lambda: server.set("elsewhere", "1"),
        lambda: server.flushall(),
        lambda: server.config_set("maxmemory", "0"),
        lambda: server.acl_list(),
    ]
    for call in refused:
        with pytest.raises(redis.exceptions.NoPermissionError):
            call()
    server.delete("jaxplay:events:acl-check")
    # no default user
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis(port=stack.redis_port).ping()
    # a memory cap that refuses writes rather than evicting queued runs
    config = stack.compose_run("exec", "-T", "redis", "cat", "/tmp/jaxplay-redis/redis.conf")
    assert "maxmemory-policy noeviction" in config
    assert "maxmemory 1gb" in config


# A jail as bubblewrap builds it for jaxplay (sandbox/jail/bwrap.py), reduced to
# what needs the kernel's permission: namespaces, a new root, /proc, a hostname.
BWRAP = (
    "bwrap --unshare-all --unshare-user --disable-userns --uid 1000 --gid 1000 --hostname j "
    "--die-with-parent --new-session --cap-drop ALL --ro-bind /usr /usr --symlink usr/lib /lib "
    "--symlink usr/lib64 /lib64 --symlink usr/bin /bin --proc /proc --dev /dev --tmpfs /tmp "
    "-- /usr/bin/true && echo jailed"
)


def test_the_worker_seccomp_profile_allows_a_jail_and_needs_each_call_it_adds(
    stack: Stack, tmp_path: Path
) -> None:
    profile = json.loads((Path(__file__).parents[2] / "docker" / "seccomp-worker.json").read_text())
    (ours,) = [r for r in profile["syscalls"] if r.get("comment", "").startswith("jaxplay")]

    def jail(names: list[str], systempaths: bool = True) -> str:
        rule = {**ours, "names": names}
        rules = [rule if r is ours else r for r in profile["syscalls"] if names or r is not ours]
        path = tmp_path / f"seccomp-{len(names)}-{'-'.join(names)}.json"
        path.write_text(json.dumps({**profile, "syscalls": rules}))
        options = ["--security-opt", f"seccomp={path}", "--security-opt", "no-new-privileges"]
        # the image's entrypoint refuses root without capabilities: bubblewrap as the
        # unprivileged worker user, as a jail's launcher runs it (as a uid of its own)
        options += ["--user", "jaxplay-worker"]
        if systempaths:
            options += ["--security-opt", "systempaths=unconfined"]
        done = subprocess.run(
            [_DOCKER, "run", "--rm", "--network", "none", "--cap-drop", "ALL", *options,
             "jaxplay-worker-cpu", "sh", "-c", BWRAP],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        return done.stdout + done.stderr

    assert "jailed" in jail(ours["names"])
    assert "jailed" not in jail(ours["names"], systempaths=False)  # no new /proc
    for name in ours["names"]:
        assert "jailed" not in jail([n for n in ours["names"] if n != name]), name
    # Docker's default profile (ours without the rule) allows no jail at all
    assert "No permissions to create a new namespace" in jail([])


def test_the_worker_apparmor_profile_compiles(stack: Stack) -> None:
    """No AppArmor kernel here: the profile is compiled, not loaded (-Q)."""
    profile = Path(__file__).parents[2] / "docker" / "apparmor-worker"
    done = subprocess.run(
        ["apparmor_parser", "-Q", "-K", str(profile)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("image", "backend", "plugin"),
    [("worker-cuda", "gpu", "jax-cuda12-plugin"), ("worker-tpu", "tpu", "libtpu")],
)
def test_the_accelerator_images_hold_the_tested_jax_and_refuse_without_devices(
    stack: Stack, image: str, backend: str, plugin: str
) -> None:
    """No GPU or TPU is here: their images are checked as far as a CPU allows."""
    if not _docker("image", "ls", "-q", f"jaxplay-{image}").strip():
        pytest.skip(f"jaxplay-{image} was not built (JAXPLAY_DEPLOY_IMAGES)")
    versions = _docker(
        "run", "--rm", "--network", "none", f"jaxplay-{image}", "python", "-c",
        f"import importlib.metadata as m; print(m.version('jax'), m.version('{plugin}'))",
    ).split()  # fmt: skip
    assert versions[0] == importlib.metadata.version("jax"), versions
    refused = subprocess.run(
        [_DOCKER, "run", "--rm", "--network", "none", f"jaxplay-{image}",
         "jaxplay", "worker", "--queue", "redis://127.0.0.1:1/0"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert refused.returncode != 0
    words = {"gpu": "no NVIDIA GPU device nodes", "tpu": "TPU"}[backend]
    assert words in refused.stderr, refused.stderr[-2000:]


_DOCKER = os.environ.get("DOCKER", "docker")


def _docker(*args: str) -> str:
    done = subprocess.run([_DOCKER, *args], capture_output=True, text=True, check=True)
    return done.stdout
