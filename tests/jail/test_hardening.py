"""The defences of issue 10 that the battery's one-run cases cannot show alone: the
zygote check behind the filter, per-jail uids (counters not shared between tenants),
the zygote's log, and a filter that cannot be built completely refusing to start."""

from __future__ import annotations

import asyncio
import logging
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from sandbox.jail import seccomp
from sandbox.jail.jail import Hardening, Jailer, JailUnavailable
from sandbox.jail.procstate import jail_command_pid, processes_by_uid
from sandbox.jail.settings import JailConfig
from sandbox.pool.zygote_pool import ZygotePool
from sandbox.protocol import RunRequest
from sandbox.zygote.handle import Zygote
from tests.jail.test_hostile import PRELUDE
from tests.support.live_pool import (
    TEST_LIMITS,
    TEST_POOL,
    LivePool,
    Result,
    make_live_pool,
    needs_bwrap,
)

pytestmark = [needs_bwrap, pytest.mark.slow]


def _code(body: str) -> str:
    return PRELUDE + textwrap.dedent(body)


# --- the filter is complete or the jail does not start ----------------------------------


def test_a_call_libseccomp_cannot_resolve_stops_the_jail(monkeypatch: pytest.MonkeyPatch) -> None:
    seccomp.filter_bpf.cache_clear()
    monkeypatch.setattr(seccomp, "EPERM_SYSCALLS", [*seccomp.EPERM_SYSCALLS, "no_such_call"])
    try:
        with pytest.raises(JailUnavailable, match="no_such_call"):
            Jailer(TEST_LIMITS, JailConfig())
    finally:
        monkeypatch.undo()
        seccomp.filter_bpf.cache_clear()
    assert seccomp.filter_bpf()  # and builds again without it


def test_the_table_covers_the_native_architecture() -> None:
    bpf = seccomp.filter_bpf()
    # The program starts with the table check: arch load, arch compare, nr load...
    assert bpf[:8] == seccomp._sock_filter(0x20, 0, 0, 4)
    assert len(bpf) // 8 < 4096  # the kernel's limit on one program


# --- the zygote check: the second line, behind the filter ---------------------------------

#: A pool whose runs may do what the filters refuse, so that the check is what stops them.
#: cpus=0 (no pinning): a run could otherwise not move the zygote to another CPU set.
OPEN = Hardening(strict_seccomp=False, run_filter=False)

ATTACKS = {
    "limits": "import resource\nresource.prlimit(os.getppid(), resource.RLIMIT_NOFILE, (16, 16))",
    "nice": "os.setpriority(os.PRIO_PROCESS, os.getppid(), 19)",
    "policy": "os.sched_setscheduler(os.getppid(), os.SCHED_IDLE, os.sched_param(0))",
    "affinity": "os.sched_setaffinity(os.getppid(), {min(os.sched_getaffinity(0))})",
    "ioprio": "assert libc.syscall(251, 1, os.getppid(), 3 << 13) == 0, ctypes.get_errno()",
}

#: What a fresh zygote must show (read from its child): the configured values.
CONFIGURED = _code(f"""
import resource
z = os.getppid()
must('nofile as configured', resource.prlimit(z, resource.RLIMIT_NOFILE) == ({TEST_LIMITS.nofile}, {TEST_LIMITS.nofile}))
must('nice 0', os.getpriority(os.PRIO_PROCESS, z) == 0)
must('SCHED_OTHER', os.sched_getscheduler(z) == os.SCHED_OTHER)
must('every CPU', os.sched_getaffinity(z) == os.sched_getaffinity(0))
must('no I/O priority', libc.syscall(252, 1, z) == 0)
""")


@pytest.fixture(scope="module")
def open_pool() -> Iterator[LivePool]:
    live = make_live_pool(limits=replace(TEST_LIMITS, cpus=0), hardening=OPEN)
    try:
        yield live
    finally:
        live.close()


@pytest.mark.parametrize("what", list(ATTACKS))
def test_a_zygote_whose_limits_or_scheduling_changed_retires(
    what: str, open_pool: LivePool, caplog: pytest.LogCaptureFixture
) -> None:
    tenant = f"changer-{what}"
    first = open_pool.run(_code(CONFIGURED), tenant=tenant)
    assert first.status == "ok" and "LEAK" not in first.out, first.out
    with caplog.at_level(logging.INFO, logger="sandbox.zygote.handle"):
        attack = open_pool.run(_code(ATTACKS[what]), tenant=tenant)
    assert attack.status == "ok", attack.out
    assert attack.zygote == first.zygote
    retired = [r.getMessage() for r in caplog.records if "changed during a run" in r.getMessage()]
    assert retired and retired[0].startswith(attack.zygote), caplog.text
    assert what.rstrip("s") in retired[0] or what in retired[0], retired
    after = open_pool.run(CONFIGURED, tenant=tenant)
    assert after.zygote != attack.zygote  # a fresh one, with the configured limits
    assert after.status == "ok" and "LEAK" not in after.out and after.out.count("SAFE") == 5
    assert open_pool.strays() == []


# --- per-jail uids: no kernel counter shared between tenants ------------------------------


def test_each_jail_runs_as_its_own_host_uid(live_pool: LivePool) -> None:
    jailer = live_pool.pool.jailer
    assert jailer.slots == JailConfig().jail_slots
    seen = {}
    for tenant in ("uid-a", "uid-b"):
        r = live_pool.run("print('hello')", tenant=tenant)
        (z,) = [z for z in live_pool.pool.zygotes if z.id == r.zygote]
        assert z.jail.user is not None and z.jail.proc is not None
        seen[tenant] = z.jail.user[0]
        # bubblewrap outside and the zygote inside run as that uid on the host
        zygote = jail_command_pid(z.jail.proc.pid, seccomp.ZYGOTE_PID)
        for pid in (z.jail.proc.pid, zygote):
            assert pid is not None and pid in processes_by_uid()[seen[tenant]]
    assert seen["uid-a"] != seen["uid-b"]
    assert set(seen.values()) <= {uid for uid, _ in jailer.users}
    held = [z.jail.user for z in live_pool.pool.zygotes if z.jail.user is not None]
    assert len(held) == len(set(held))  # never two live jails on one uid


def test_inotify_instances_of_one_tenant_leave_another_alone(live_pool: LivePool) -> None:
    hog = _code("""
    import time
    held = []
    while len(held) < 4096:
        fd = libc.inotify_init1(0)
        if fd < 0:
            break
        held.append(fd)
    must('this jail hit its own inotify limit', ctypes.get_errno() == errno.EMFILE, (len(held), ctypes.get_errno()))
    print('HELD', len(held), flush=True)
    time.sleep(4)
    """)
    other = _code("""
    fd = libc.inotify_init1(0)
    must('another tenant can still make one', fd >= 0, ctypes.get_errno())
    """)

    async def go() -> tuple[Result, Result]:
        hog_run = await live_pool.pool.submit(_request(hog, timeout_s=10), "hog")
        holding = asyncio.Event()
        hog_events: list[dict[str, Any]] = []

        async def follow_hog() -> None:
            async for e in hog_run.events():
                hog_events.append(e)
                if e["type"] == "stdout" and "HELD" in e["text"]:
                    holding.set()  # it holds them now, and for 4 s
            holding.set()

        following = asyncio.create_task(follow_hog())
        await holding.wait()
        other_run = await live_pool.pool.submit(_request(other), "bystander")
        other_events = [e async for e in other_run.events()]
        await following
        return Result(hog_events, 0.0), Result(other_events, 0.0)

    hog_result, other_result = live_pool.call(go())
    assert hog_result.status == "ok" and "LEAK" not in hog_result.out, hog_result.out
    held = int(hog_result.out.split("HELD")[1].split()[0])
    assert 16 <= held < 4096
    assert other_result.status == "ok", other_result.out
    assert "SAFE another tenant" in other_result.out and "LEAK" not in other_result.out
    assert live_pool.strays() == []


def _request(code: str, **kw: Any) -> RunRequest:
    return RunRequest(
        code=code + "\n\ndef f(x):\n    return x\n", args="(1.0,)", outputs=["jaxpr"], **kw
    )


def test_missing_slot_users_stop_the_jail() -> None:
    with pytest.raises(JailUnavailable, match=r"scripts/setup.sh.*JAXPLAY_JAIL_SLOTS"):
        Jailer(TEST_LIMITS, JailConfig(jail_user="jaxplay-no-such-user", jail_slots=3))


def test_the_pool_holds_no_more_zygotes_than_jail_uids() -> None:
    async def go() -> tuple[int, int]:
        pool = ZygotePool(
            Jailer(TEST_LIMITS, JailConfig(jail_slots=2)), replace(TEST_POOL, pool_size=6)
        )
        return pool.size, pool.max_running

    size, running = asyncio.run(go())
    assert size == 2 and running <= 2


# --- the zygote's log -------------------------------------------------------------------------


def test_the_log_reader_takes_any_bytes_and_attributes_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def go() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(b"x" * (1 << 20) + b"\nz9 says: 'forged'\n\x1b[2J\r\nz9: ready\n")
        reader.feed_eof()
        await Zygote._read_log(SimpleNamespace(id="z1"), reader, "says")  # type: ignore[arg-type]

    with caplog.at_level(logging.INFO, logger="sandbox.zygote.handle"):
        asyncio.run(go())
    messages = [r.getMessage() for r in caplog.records]
    assert messages and all(m.startswith("z1 says: ") for m in messages)
    assert not any("\n" in m or "\x1b" in m for m in messages)  # escaped: one line each
    assert sum(len(m) for m in messages) < 3 * 64 * 1024  # only the first 64 KiB are logged


def test_a_run_cannot_write_to_the_zygote_log(
    live_pool: LivePool, caplog: pytest.LogCaptureFixture
) -> None:
    forge = _code("""
    line = b'z1 says: forged-by-a-run\\n' + b'y' * (1 << 20) + b'\\n'
    for fd in range(3, 256):
        try:
            os.write(fd, line)
        except OSError:
            pass
    for pid in (1, 2):
        try:
            fds = os.listdir(f'/proc/{pid}/fd')
        except OSError:
            print('SAFE cannot list the fds of pid', pid)
            continue
        for fd in fds:
            target = os.readlink(f'/proc/{pid}/fd/{fd}')
            if target.startswith('pipe:'):  # the zygote's log is a pipe; /dev/null is not
                probe(f'reopen {pid}:{fd} {target}', lambda: open(f'/proc/{pid}/fd/{fd}', 'wb').write(line))
    """)
    with caplog.at_level(logging.INFO, logger="sandbox.zygote.handle"):
        r = live_pool.run(forge, tenant="forger")
        after = live_pool.run("print('alive')", tenant="forger")
    # It wrote to its own event channel too: the run says so (tampered), and nothing
    # leaked into the zygote's log.
    assert r.status == "tampered" and "LEAK" not in r.out, r.out[-2000:]
    assert after.status == "ok" and after.zygote == r.zygote
    assert "forged-by-a-run" not in caplog.text
    for z in live_pool.pool.zygotes:
        assert not any(t.done() for t in z._tasks), z  # every reader still reads
