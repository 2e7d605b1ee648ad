"""A jail forked from a template (sandbox/jail/enter.py) is bubblewrap's jail: the same
probe, run first in a bubblewrap jail and then in a forked one, sees the same thing,
item by item; and each way a forked jail can fail ends in a clear error, never in a
run in a weaker jail."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from sandbox.jail import fork_client, seccomp
from sandbox.jail.bwrap import Runtime, jail_spec
from sandbox.jail.enter import ENTER_FAILED, enter
from sandbox.jail.fork_client import JailTemplate, TemplateGone
from sandbox.jail.jail import Jailer, JailUnavailable
from sandbox.jail.settings import JailConfig
from sandbox.zygote.handle import template_command
from tests.support.live_pool import TEST_LIMITS, LivePool, make_live_pool, needs_bwrap

pytestmark = [needs_bwrap]

#: What a process sees of its jail, as JSON on descriptor ``out``: every item is
#: something bubblewrap's jail sets; the host's own namespaces are compared by inode.
PROBE = r"""
import errno, json, os, resource, socket, sys

def probe(out, host_ns):
    seen = {}
    seen["ids"] = [os.getuid(), os.getgid(), os.getgroups(), os.getpid()]
    seen["maps"] = [open(f"/proc/self/{m}").read().split() for m in ("uid_map", "gid_map")]
    status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
    seen["status"] = {k: status[k].strip() for k in (
        "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")}
    seen["host"] = socket.gethostname()
    seen["root"] = sorted(os.listdir("/"))
    seen["dev"] = sorted((n, os.readlink("/dev/" + n) if os.path.islink("/dev/" + n) else "")
                         for n in os.listdir("/dev"))
    mounts = []
    for line in open("/proc/self/mountinfo"):
        f = line.split()
        options = sorted(o for o in f[5].split(",") if o in ("ro", "rw", "nosuid", "nodev", "noexec"))
        mounts.append([f[4], f[f.index("-") + 1], options])
    seen["mounts"] = sorted(mounts)
    seen["rlimits"] = {n: resource.getrlimit(getattr(resource, n)) for n in (
        "RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_CPU",
        "RLIMIT_CORE")}
    seen["cpus"] = len(os.sched_getaffinity(0))
    seen["cgroup"] = open("/proc/self/cgroup").read()
    masked = {}
    for name in ("loadavg", "stat", "meminfo", "interrupts"):
        try:
            open("/proc/" + name).read(1)
            masked[name] = "readable"
        except OSError as e:
            masked[name] = errno.errorcode[e.errno]
    seen["masked"] = masked
    seen["env"] = dict(os.environ)
    listed = [int(f) for f in os.listdir("/proc/self/fd")]
    def is_open(fd):  # the listing's own descriptor is closed by now
        try:
            os.fstat(fd)
            return True
        except OSError:
            return False
    seen["fds"] = sorted(f for f in listed if f > 2 and f != out and is_open(f))
    seen["interfaces"] = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:])
    seen["cwd"] = os.getcwd()
    try:
        os.unshare(os.CLONE_NEWUSER)
        seen["userns"] = "made"
    except OSError as e:
        seen["userns"] = errno.errorcode[e.errno]
    seen["tmp_writable"] = os.access("/tmp", os.W_OK) and not os.access("/usr", os.W_OK)
    try:
        os.mkdir("/jaxplay-probe")
        seen["root_ro"] = False
    except OSError:
        seen["root_ro"] = True
    ns = {n: os.readlink("/proc/self/ns/" + n) for n in host_ns}
    seen["new_namespaces"] = sorted(n for n in host_ns if ns[n] != host_ns[n])
    os.write(out, json.dumps(seen).encode())
"""

FORK_TEMPLATE = (
    PROBE
    + r"""
from sandbox.jail import fork_server
sock = fork_server.take_place(sys.argv)
def command(fds):
    probe(fds["out"], HOST_NS)
    os._exit(0)
fork_server.serve(sock, command)
"""
)

#: A template that breaks the rule it lives by: a second thread before any fork.
THREADED_TEMPLATE = r"""
import socket, sys, threading, time
threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
from sandbox.jail import fork_server
fork_server.serve(socket.socket(fileno=int(sys.argv[1])), lambda fds: None)
"""

#: A template whose jails' command ends at once, with status 7.
QUICK_TEMPLATE = r"""
import os, sys
from sandbox.jail import fork_server
fork_server.serve(fork_server.take_place(sys.argv), lambda fds: os._exit(7))
"""

NAMESPACES = ("user", "mnt", "pid", "net", "ipc", "uts", "cgroup")


def host_namespaces() -> dict[str, str]:
    return {n: os.readlink(f"/proc/self/ns/{n}") for n in NAMESPACES}


async def _read_all(fd: int, proc_wait: Any) -> bytes:
    loop = asyncio.get_running_loop()
    chunks = []
    while chunk := await loop.run_in_executor(None, os.read, fd, 1 << 16):
        chunks.append(chunk)
    await proc_wait()
    return b"".join(chunks)


async def probe_bwrap(jailer: Jailer, host_ns: dict[str, str]) -> dict[str, Any]:
    r, w = os.pipe()
    jail = jailer.jail()
    code = PROBE + f"probe({w}, {host_ns!r})"
    try:
        proc = await jail.start(
            jailer.python("-c", code), pass_fds=[w], stdout=asyncio.subprocess.DEVNULL
        )
        os.close(w)
        assert proc.stdin is not None
        proc.stdin.close()
        data = await _read_all(r, proc.wait)
    finally:
        os.close(r)
        await jail.close()
    return json.loads(data)


async def probe_fork(jailer: Jailer, host_ns: dict[str, str]) -> dict[str, Any]:
    code = f"HOST_NS = {host_ns!r}\n" + FORK_TEMPLATE
    template = jailer.template(jailer.python("-c", code))  # as the pool makes them
    r, w = os.pipe()
    jail = jailer.jail()
    try:
        proc = await jail.start_forked(template, {"out": w})
        os.close(w)
        data = await _read_all(r, proc.wait)
    finally:
        os.close(r)
        await jail.close()
        await jailer.close_templates()
    return json.loads(data)


@pytest.mark.parametrize("cpus", [1, 0], ids=["one-cpu", "unpinned"])
def test_a_forked_jail_sees_what_a_bubblewrap_jail_sees(cpus: int) -> None:
    jailer = Jailer(replace(TEST_LIMITS, cpus=cpus), JailConfig())
    host_ns = host_namespaces()

    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        return await probe_bwrap(jailer, host_ns), await probe_fork(jailer, host_ns)

    bwrap, forked = asyncio.run(both())
    assert set(bwrap) == set(forked)
    differ = {k: (bwrap[k], forked[k]) for k in bwrap if bwrap[k] != forked[k]}
    assert not differ, json.dumps(differ, indent=1)
    # and what they both see is a jail (the equality alone would pass two open doors)
    assert forked["ids"][:2] == [1000, 1000] and forked["ids"][3] == 2
    assert forked["new_namespaces"] == sorted(NAMESPACES)
    assert forked["status"]["CapEff"] == "0000000000000000" and forked["status"]["Seccomp"] == "2"
    assert forked["userns"] != "made" and forked["root_ro"] and forked["tmp_writable"]
    assert forked["masked"]["loadavg"] == "EACCES" and forked["host"] == "sandbox"
    assert forked["interfaces"] == ["lo"] and forked["fds"] == []


# --- what fails, fails clearly ------------------------------------------------------


def test_a_threaded_template_forks_nothing() -> None:
    jailer = Jailer(TEST_LIMITS, JailConfig())

    async def go() -> None:
        template = JailTemplate(jailer.python("-c", THREADED_TEMPLATE), {}, None, start_s=60)
        jail = jailer.jail()
        try:
            with pytest.raises(OSError, match="the template has 2 threads: it forks none"):
                await jail.start_forked(template, {})
        finally:
            await jail.close()
            await template.close()

    asyncio.run(go())


def test_a_jail_that_ends_before_its_spawn_returns_still_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The template tells a monitor's end after its answer; both read in one go (the
    loop held here until the jail is over) must still end the jail its caller gets."""
    jailer = Jailer(TEST_LIMITS, JailConfig())
    send_fds = fork_client.socket.send_fds

    def send_then_hold(*args: Any) -> int:
        sent = send_fds(*args)
        time.sleep(1.5)  # the event loop stalls: the jail forks, runs and ends meanwhile
        return sent

    async def go() -> int:
        template = jailer.template(jailer.python("-c", QUICK_TEMPLATE))
        jail = jailer.jail()
        try:
            await template.ensure_started()
            monkeypatch.setattr(fork_client.socket, "send_fds", send_then_hold)
            proc = await jail.start_forked(template, {})
            monkeypatch.undo()
            return await asyncio.wait_for(proc.wait(), 20)
        finally:
            await jail.close()
            await jailer.close_templates()

    assert asyncio.run(go()) == 7


def test_the_pools_check_forks_a_jail_from_its_template_and_says_what_refused() -> None:
    """``Jailer.check`` with forked jails builds its jail as the pool's will be built:
    a root that cannot be built is a JailUnavailable with enter's words; the template
    it started is the one the pool's jails then come from."""
    jailer = Jailer(TEST_LIMITS, replace(JailConfig(), fork_jails=True))
    runtime = jailer.runtime

    async def go() -> None:
        command = template_command(jailer)
        try:
            jailer.runtime = replace(runtime, ro_paths=(*runtime.ro_paths, "/nonexistent/env"))
            with pytest.raises(JailUnavailable, match=r"could not be built.*nonexistent/env"):
                await jailer.check(command)
            jailer.runtime = runtime
            await jailer.check(command)
            (template,) = jailer._templates.values()
            assert template.command == command and template.alive and template.starts == 1
        finally:
            await jailer.close_templates()

    asyncio.run(go())


def test_a_check_whose_template_cannot_start_fails_clearly() -> None:
    jailer = Jailer(TEST_LIMITS, replace(JailConfig(), fork_jails=True))
    with pytest.raises(JailUnavailable, match="a test jail could not run: the jail template did"):
        asyncio.run(jailer.check(jailer.python("-c", "raise SystemExit(3)")))


def _enter_in_child(spec_changes: dict[str, Any], refuse_unshare: bool) -> tuple[int, bytes, bool]:
    """``enter`` in a forked child of this process; (exit status, what it said,
    whether anything after ``enter`` ran)."""
    users = Jailer(TEST_LIMITS, JailConfig()).users  # a jail user, as the pool's jails have
    user = users[0] if users else None
    spec = replace(jail_spec(Runtime.discover(), TEST_LIMITS, user=user), **spec_changes)
    err_r, err_w = os.pipe()
    ran_r, ran_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(err_r)
            os.close(ran_r)
            if refuse_unshare:  # the kernel says no, as a host without user namespaces does
                _refuse_unshare()
            enter(spec, [ran_w], err_w, seccomp.filter_fd())
            os.write(ran_w, b"ran")
        finally:
            os._exit(0)
    os.close(err_w)
    os.close(ran_w)
    _, waited = os.waitpid(pid, 0)
    said = os.read(err_r, 4096)
    ran = os.read(ran_r, 16) == b"ran"
    os.close(err_r)
    os.close(ran_r)
    return os.waitstatus_to_exitcode(waited), said, ran


def _refuse_unshare() -> None:
    lib = seccomp._lib()
    f = seccomp._Filter(lib)
    f.rule(seccomp._errno(1), "unshare")
    seccomp.load(f.export())


def test_a_namespace_the_kernel_refuses_ends_the_jail() -> None:
    status, said, ran = _enter_in_child({}, refuse_unshare=True)
    assert status == ENTER_FAILED and not ran
    assert b"the jail could not be entered: [Errno 1] unshare(" in said, said
    assert b"Operation not permitted" in said


def test_a_root_that_cannot_be_built_ends_the_jail() -> None:
    status, said, ran = _enter_in_child({"ro_paths": ("/nonexistent/jaxplay-env",)}, False)
    assert status == ENTER_FAILED and not ran
    assert b"the jail could not be built" in said and b"nonexistent" in said


# --- the pool over forked jails: a zygote or the template dying -----------------------


@pytest.fixture(scope="module")
def fork_pool() -> Iterator[LivePool]:
    live = make_live_pool(config=replace(JailConfig(), fork_jails=True))
    try:
        yield live
    finally:
        live.close()


SMALL = "def f(x):\n    return x * 2\n"


@pytest.mark.slow
def test_a_zygote_that_dies_while_it_starts_is_retired_and_replaced(fork_pool: LivePool) -> None:
    pool = fork_pool.pool

    async def go() -> str:
        z = pool._spawn(None)
        while z.jail.cgroup is None or not z.jail.cgroup.pids():
            await asyncio.sleep(0.001)
        z.jail.cgroup.kill()  # everything of the jail, before its hello
        with pytest.raises(Exception, match="the sandbox"):
            await asyncio.shield(z.ready)
        assert z.state == "retired"
        return str(z.why)

    why = fork_pool.call(go())
    assert any(w in why for w in ("exited", "could not start", "control channel closed")), why
    assert fork_pool.run(SMALL, tenant="after-death").status == "ok"
    assert fork_pool.strays() == []


@pytest.mark.slow
def test_the_template_dying_takes_its_jails_and_a_new_one_starts(fork_pool: LivePool) -> None:
    pool = fork_pool.pool
    assert fork_pool.run(SMALL, tenant="before").status == "ok"
    (template,) = pool.jailer._templates.values()
    starts, pid = template.starts, template.pid
    assert pid is not None
    jailed = [z for z in pool.zygotes if z.state != "retired"]
    assert jailed
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while any(z.state != "retired" for z in jailed) and time.monotonic() < deadline:
        fork_pool.call(asyncio.sleep(0.1))
    assert all(z.state == "retired" for z in jailed), jailed  # no jail outlives its template
    result = fork_pool.run(SMALL, tenant="after")
    assert result.status == "ok", result.out
    assert template.starts == starts + 1 and template.pid != pid
    assert fork_pool.strays() == []


def test_a_template_that_cannot_start_is_an_error_not_a_weaker_jail() -> None:
    jailer = Jailer(TEST_LIMITS, JailConfig())

    async def go() -> None:
        template = JailTemplate(jailer.python("-c", "raise SystemExit(3)"), {}, None, start_s=30)
        jail = jailer.jail()
        try:
            with pytest.raises(TemplateGone, match="did not start"):
                await jail.start_forked(template, {})
        finally:
            await jail.close()

    asyncio.run(go())
