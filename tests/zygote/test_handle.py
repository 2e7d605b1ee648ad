"""A zygote's state as the pool holds it (sandbox/zygote/handle.py), each transition
one method: starting -> idle <-> busy -> retired. Fast: no jail, a stand-in pool and
run, the zygote's side of the control socket played by the test."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import pytest

from sandbox.protocol.tenants import single_use
from sandbox.supervisor import WorkerStartError
from sandbox.zygote.control import (
    VERSION,
    Exited,
    Keep,
    Kept,
    Ready,
    RunOrder,
    Started,
    Warm,
    decode_order,
    encode,
)
from sandbox.zygote.handle import PRISTINE, Zygote

WORKER = {"backend": "cpu", "platform": "cpu", "devices": 1}


class StandInJail:
    cpus = None
    cgroup = None
    proc = None

    def __init__(self) -> None:
        self.killed = False

    def kill(self) -> None:
        self.killed = True

    async def close(self) -> None:
        pass


class StandInPool:
    def __init__(self, max_runs: int = 10, reuse_runs: int = 1) -> None:
        hardening = SimpleNamespace(zygote_check=False, run_filter=False)
        self.jailer: Any = SimpleNamespace(jail=StandInJail, hardening=hardening)
        self.settings = SimpleNamespace(
            pool_start_s=5.0,
            pool_max_runs=max_runs,
            pool_reuse_runs=reuse_runs,
            pool_reuse_rss_bytes=768 * 1024 * 1024,
        )
        self.zygotes: list[Zygote] = []
        self.worker: dict[str, Any] | None = None
        self.reused = self.total_runs = self.freed_count = 0
        self.checks: list[object] = []
        self.forgotten: list[Zygote] = []

    def note_worker(self, worker: dict[str, Any]) -> None:
        self.worker = self.worker or worker

    def note_check(self, kind: object) -> None:
        self.checks.append(kind)

    def freed(self) -> None:
        self.freed_count += 1

    def changed(self) -> None:
        pass

    def forget(self, z: Zygote) -> None:
        self.forgotten.append(z)


class StandInRun:
    def __init__(self, verdict: str | None = None) -> None:
        self.warm = False
        self.reused = 0
        self.kept: bool | None = None
        self.statuses: list[int | None] = []
        self._verdict = verdict

    def exited(self, status: int | None) -> None:
        self.statuses.append(status)

    def verdict(self) -> str | None:
        return self._verdict


def hello(**fields: Any) -> Ready:
    return Ready(version=VERSION, identity_check="c", **fields)


def run_async(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())  # type: ignore[arg-type]


async def ready_zygote(pool: StandInPool, tenant: str | None = None) -> Zygote:
    z = Zygote(pool, 1, tenant)
    assert z.state == "starting"
    assert z.on_report(hello(warm=True, worker=WORKER))
    assert z.state == "idle" and z.ready.done() and z.info is not None
    return z


async def settle(z: Zygote) -> None:
    await z.closed()


def test_a_hello_makes_a_starting_zygote_idle_and_tells_the_pool() -> None:
    async def go() -> None:
        pool = StandInPool()
        z = await ready_zygote(pool)
        assert z.warm_child and pool.worker == WORKER and pool.checks == ["c"]
        assert z.info is not None and z.info.worker == WORKER
        assert not z.on_report(hello())  # a second hello is out of turn

    run_async(go)


def test_a_run_reserved_while_starting_makes_it_busy_at_its_hello() -> None:
    async def go() -> None:
        z = Zygote(StandInPool(), 1, "a|1")
        run = StandInRun()
        z.reserve(run)
        assert z.state == "starting" and z.run is run
        assert z.on_report(hello())
        assert z.state == "busy"

    run_async(go)


def test_a_spare_is_taken_for_one_tenant_once() -> None:
    async def go() -> None:
        z = await ready_zygote(StandInPool())
        z.take_for(PRISTINE)
        assert z.tenant == PRISTINE
        with pytest.raises(AssertionError, match="already serves a tenant"):
            z.take_for("a|1")

    run_async(go)


def test_reserve_send_end_and_release() -> None:
    async def go() -> None:
        pool = StandInPool(reuse_runs=20)
        z = await ready_zygote(pool, "a|1")
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        z._ctl = mine
        run = StandInRun()
        z.reserve(run)
        assert z.state == "busy" and z.run is run
        with pytest.raises(AssertionError, match="already has a run"):
            z.reserve(StandInRun())
        r, w = socket.socketpair()
        z.send_run([r.fileno(), w.fileno(), w.fileno()], warm=True)
        data, fds, _, _ = socket.recv_fds(theirs, 4096, 4)
        assert decode_order(data) == RunOrder(warm=True, keep=Keep(runs=20, rss_kib=786432))
        assert len(fds) == 3 and z.runs == 1 and pool.total_runs == 1 and not z.warm_child
        for fd in fds:
            os.close(fd)
        assert z.on_report(Started(pid=5, warm=True, reused=2))
        assert run.warm and run.reused == 2 and pool.reused == 1
        assert z.on_report(Exited(status=0, clean=True))
        assert z.state == "idle" and z.run is None and run.statuses == [0]
        assert run.kept is False and pool.freed_count == 1
        # a run that ends before it was sent gives the zygote back
        other = StandInRun()
        z.reserve(other)
        z.release(other)
        assert z.state == "idle" and z.run is None
        for s in (mine, theirs, r, w):
            s.close()

    run_async(go)


@pytest.mark.parametrize(
    "tenant",
    [PRISTINE, single_use("addr:192.0.2.1|session:x")],
    ids=["pristine", "single-use"],  # a single-use name is random: not a test id
)
def test_a_pristine_or_single_use_run_is_sent_as_any_run(tenant: str) -> None:
    """Issue 33: nothing in the order tells a pristine or single-use run from a new
    tenant's first run (its process may be "kept": it goes with the zygote)."""

    async def go() -> None:
        z = await ready_zygote(StandInPool(reuse_runs=20))
        assert not z.single_use
        z.take_for(tenant)
        assert z.single_use
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        z._ctl = mine
        z.reserve(StandInRun())
        z.send_run([theirs.fileno()] * 3, warm=False)
        data, fds, _, _ = socket.recv_fds(theirs, 4096, 4)
        keep = Keep(runs=20, rss_kib=786432)
        assert decode_order(data) == RunOrder(warm=False, keep=keep) and len(fds) == 3
        for fd in fds:
            os.close(fd)
        mine.close()
        theirs.close()

    run_async(go)


def test_a_judged_process_is_kept_or_not_by_the_zygote_s_word() -> None:
    async def go() -> None:
        z = await ready_zygote(StandInPool())
        run = StandInRun()
        z.reserve(run)
        assert z.on_report(Exited(status=0, clean=True, judging=True))
        assert z.judging and run.kept is None and z.state == "idle"
        assert z.on_report(Kept(kept=True))
        assert run.kept is True and z.warm_child and not z.judging
        assert not z.on_report(Kept(kept=True))  # nothing is being judged

    run_async(go)


@pytest.mark.parametrize(
    ("pool", "run", "ended", "why"),
    [
        (StandInPool(), StandInRun(), Exited(status=0, clean=False), "a run left processes"),
        (StandInPool(), StandInRun(), Exited(status=None, clean=True), "a run left processes"),
        (StandInPool(), StandInRun("run ended by timeout"), Exited(status=-9, clean=True), ""),
        (StandInPool(max_runs=1), StandInRun(), Exited(status=0, clean=True), "1 runs"),
    ],
    ids=["unclean", "no status", "verdict", "run count"],
)
def test_a_run_s_end_retires_the_zygote_when_it_must(
    pool: StandInPool, run: StandInRun, ended: Exited, why: str, caplog: Any
) -> None:
    async def go() -> None:
        z = await ready_zygote(pool)
        z.reserve(run)
        z.runs = 1  # as send_run counts it
        with caplog.at_level("INFO", logger="sandbox.zygote.handle"):
            assert z.on_report(ended)
        assert z.state == "retired" and pool.forgotten == [z]
        assert run.statuses == [ended.status]
        assert isinstance(z.jail, StandInJail) and z.jail.killed
        assert f"retires: {why or run.verdict()}" in caplog.text
        await settle(z)

    run_async(go)


def test_reports_out_of_turn() -> None:
    async def go() -> None:
        z = await ready_zygote(StandInPool())
        assert not z.on_report(Exited(status=0, clean=True))  # no run
        assert z.on_report(Started(pid=1))  # no run: ignored, as ever
        assert z.on_report(Warm(worker={"backend": "tpu"}))  # the hello's worker stays
        assert z.info is not None and z.info.worker == WORKER

    run_async(go)


def test_retire_is_final_and_fails_a_start_still_waiting() -> None:
    async def go() -> None:
        pool = StandInPool()
        z = Zygote(pool, 1, None)
        z.retire("could not start: no bwrap")
        z.retire("again")
        assert z.state == "retired" and pool.forgotten == [z]
        with pytest.raises(WorkerStartError, match="the sandbox could not start: no bwrap"):
            z.ready.result()
        await settle(z)

    run_async(go)


async def read_control_of(data: bytes) -> Zygote:
    """A zygote whose control socket says ``data``; after its reader ended."""
    z = Zygote(StandInPool(), 1, None)
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    mine.setblocking(False)
    z._ctl = mine
    theirs.send(data)
    theirs.close()  # after it, the end of the socket
    await asyncio.wait_for(z._read_control(), 5)
    await settle(z)
    return z


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (
            json.dumps({"op": "ready", "version": VERSION + 1}).encode(),
            f"speaks control version {VERSION + 1}, this pool {VERSION}",
        ),
        (b'{"op": "hello"}', "an unknown control report 'hello'"),
        (b"not json", "not JSON"),
    ],
)
def test_a_zygote_that_says_what_the_pool_does_not_speak_is_retired(data: bytes, why: str) -> None:
    async def go() -> None:
        z = await read_control_of(data)
        assert z.state == "retired"
        with pytest.raises(WorkerStartError, match=why):
            z.ready.result()

    run_async(go)


def test_a_hello_of_this_version_on_the_socket_makes_it_idle() -> None:
    async def go() -> None:
        z = await read_control_of(encode(hello(worker=WORKER)))
        # its hello was taken; the socket's end then retired it, as any zygote's would
        assert z.info is not None and z.info.worker == WORKER
        assert z.ready.result() == z.info and z.state == "retired"

    run_async(go)
