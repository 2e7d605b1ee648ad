"""A zygote as the pool holds it: one jail, one zygote process in it, its socket.

``Zygote`` is the only writer of a zygote's state, each change one method:

    starting --(its hello, Ready)--> idle <--(reserve / a run's end)--> busy
        any --(retire)--> retired

``take_for`` binds a spare to a tenant (or to PRISTINE, for one pristine run);
``reserve`` gives it a run, ``send_run`` sends that run, ``release`` takes back a
run that was never sent; the zygote's reports (control.py) move the rest:
``Exited`` ends the run (idle, or retired on a verdict), ``Kept`` says whether the
run's process serves the tenant's next run. A report out of turn, of another
control version or not one at all retires the zygote.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import time
from typing import Any, Protocol

from sandbox.jail.bwrap import jail_returncode
from sandbox.jail.fork_client import ForkedJail
from sandbox.jail.jail import Jailer
from sandbox.jail.procstate import ProcState, jail_command_pid, read_state
from sandbox.jail.seccomp import ZYGOTE_PID, run_filter_fd
from sandbox.protocol import RunRequest
from sandbox.protocol.tenants import is_single_use
from sandbox.supervisor import WorkerStartError
from sandbox.zygote.control import (
    MAX_BYTES,
    ControlError,
    Exited,
    Keep,
    Kept,
    KillOrder,
    Ready,
    Report,
    RunOrder,
    Started,
    Warm,
    decode_report,
    encode,
)
from sandbox.zygote.pipes import pipe_reader

log = logging.getLogger(__name__)

#: The collector is off while the zygote imports JAX and the libraries (every object
#: they make lives as long as the zygote: collections of them are wasted work);
#: main() collects once, freezes the heap and turns it back on before any fork.
_BOOT = "import gc, sys; gc.disable(); from sandbox.zygote.main import main; main(sys.argv)"
#: The same for a jail template (fork_jails), which forks each zygote ready-imported.
_TEMPLATE_BOOT = (
    "import gc, sys; gc.disable(); from sandbox.zygote.template_main import main; main(sys.argv)"
)


def template_command(jailer: Jailer) -> list[str]:
    """The command of the jail template that forks ``jailer``'s zygotes (fork_jails)."""
    return jailer.python("-c", _TEMPLATE_BOOT)


#: Bytes of a zygote's log (and of bubblewrap's stderr) that are logged; the rest is
#: read and dropped. Read in chunks of _LOG_CHUNK: no line length can stop the reader.
_LOG_BYTES = 64 * 1024
_LOG_CHUNK = 4096

#: The tenant of a zygote taken for a pristine run: no tenant the server names can be
#: it (they are ``GROUP|NAME`` of printable text), so no tenant is ever given it.
PRISTINE = "\x00pristine"


class PoolSettingsView(Protocol):
    """The pool's settings a zygote reads (sandbox/pool/settings.py)."""

    @property
    def pool_start_s(self) -> float: ...
    @property
    def pool_max_runs(self) -> int: ...
    @property
    def pool_reuse_runs(self) -> int: ...
    @property
    def pool_reuse_rss_bytes(self) -> int: ...


class HostPool(Protocol):
    """What a zygote needs of its pool (pool.py, ``ZygotePool``): the jails, the
    settings, the counters it adds to, and whom to tell when it changes."""

    jailer: Jailer
    zygotes: list[Zygote]
    worker: dict[str, Any] | None
    reused: int
    total_runs: int

    @property
    def settings(self) -> PoolSettingsView: ...

    def note_worker(self, worker: dict[str, Any]) -> None: ...

    def note_check(self, kind: object) -> None: ...

    def freed(self) -> None: ...

    def changed(self) -> None: ...

    def forget(self, z: Zygote) -> None: ...


class HostedRun(Protocol):
    """What a zygote needs of the run it serves (run.py, ``ZygoteRun``)."""

    warm: bool
    reused: int
    kept: bool | None

    def exited(self, status: int | None) -> None: ...

    def verdict(self) -> str | None: ...


class Zygote:
    """One jail with one zygote process in it, and its control socket."""

    def __init__(self, pool: HostPool, seq: int, tenant: str | None) -> None:
        self.pool = pool
        self.id = f"z{seq}"
        self.tenant = tenant
        self.jail = pool.jailer.jail()
        self.state = "starting"  # starting -> idle <-> busy -> retired
        self.run: HostedRun | None = None  # the run it is reserved for or running
        self.runs = 0
        self.born = self.last_used = time.monotonic()
        self.ready: asyncio.Future[Ready] = asyncio.get_running_loop().create_future()
        #: its hello (None until it said it)
        self.info: Ready | None = None
        #: whether its pre-forked child has its backend warm (the next run starts fast)
        self.warm_child = False
        #: the run whose process the zygote is deciding to keep or not, after it ended
        self._judged: HostedRun | None = None
        self._ctl: socket.socket | None = None
        #: the zygote's host pid and its limits and scheduling when it said ready
        self._host_pid: int | None = None
        self._start_state: ProcState | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._closed: asyncio.Task[None] | None = None
        #: why it retired (None while it serves)
        self.why: str | None = None

    @property
    def judging(self) -> bool:
        """Its run has ended and its process is checking itself (watch.py)."""
        return self._judged is not None

    def __repr__(self) -> str:
        return f"<Zygote {self.id} {self.state} tenant={self.tenant!r} runs={self.runs}>"

    async def start(self) -> None:
        jailer = self.pool.jailer
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # The zygote's own output goes to a pipe of its own, which only this pool reads;
        # bubblewrap's messages come on the jail's stderr.
        log_r, log_w = os.pipe()
        run_filter = run_filter_fd() if jailer.hardening.run_filter else None
        passed = [child.fileno(), log_w] + ([run_filter] if run_filter is not None else [])
        args = [str(child.fileno()), str(run_filter or "-"), str(log_w)]
        try:
            proc: asyncio.subprocess.Process | ForkedJail
            if jailer.config.fork_jails:
                fds = {"ctl": child.fileno(), "log": log_w}
                if run_filter is not None:
                    fds["run_filter"] = run_filter
                template = jailer.template(template_command(jailer))
                proc = await self.jail.start_forked(template, fds)
            else:
                proc = await self.jail.start(
                    jailer.python("-c", _BOOT, *args),
                    pass_fds=passed,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.PIPE,
                )
        except BaseException as exc:
            parent.close()
            os.close(log_r)
            self.retire(f"could not start: {exc}")
            raise
        finally:
            child.close()
            os.close(log_w)
            if run_filter is not None:
                os.close(run_filter)
        assert proc.stderr is not None
        if proc.stdin is not None:
            proc.stdin.close()
        parent.setblocking(False)
        self._ctl = parent
        zygote_log = await pipe_reader(log_r)
        self._tasks = [
            asyncio.create_task(self._read_control()),
            asyncio.create_task(self._read_log(zygote_log, "says")),
            asyncio.create_task(self._read_log(proc.stderr, "(bubblewrap) says")),
            asyncio.create_task(self._watch(proc)),
        ]
        try:
            hello = await asyncio.wait_for(
                asyncio.shield(self.ready), self.pool.settings.pool_start_s
            )
        except TimeoutError:
            self.retire(f"not ready after {self.pool.settings.pool_start_s:g} s")
            raise
        log.debug(
            "%s ready in %.0f ms, %s KiB RSS",
            self.id,
            hello.ms,
            hello.rss_kib,
        )

    async def _read_control(self) -> None:
        assert self._ctl is not None
        loop = asyncio.get_running_loop()
        why = "control channel closed"
        while True:
            try:
                data = await loop.sock_recv(self._ctl, MAX_BYTES)
                if not data or not self.on_report(decode_report(data)):
                    break
            except OSError:
                break
            except ControlError as exc:
                why = f"control channel closed: {exc}"
                break
        self.retire(why)

    def on_report(self, report: Report) -> bool:
        """Take the zygote's report; False if it came out of turn (then the caller
        retires the zygote): a second hello, an end with no run, a verdict with no
        run being judged."""
        if isinstance(report, Ready) and not self.ready.done():
            self.warm_child = report.warm
            if report.worker is not None:
                self.pool.note_worker(report.worker)
            self.pool.note_check(report.identity_check)
            self.info = report
            self._record_start_state()  # may retire it
            if self.state == "starting":
                self.state = "busy" if self.run is not None else "idle"
            if not self.ready.done():  # retired meanwhile: its start failed already
                self.ready.set_result(report)
        elif isinstance(report, Exited) and self.run is not None:
            run = self.run
            # a single-use zygote's process serves no other run, whatever it judges
            self._judged = run if report.judging and not self.single_use else None
            if self._judged is None:
                run.kept = False
            self._run_ended(report.clean and report.status is not None)
            run.exited(report.status)
        elif isinstance(report, Warm):
            self.warm_child = True
            worker = report.worker
            if self.runs == 0 and worker is not None and self.info and not self.info.worker:
                self.info = dataclasses.replace(self.info, worker=worker)  # learnt after ready
                self.pool.note_worker(worker)
        elif isinstance(report, Kept) and self._judged is not None:
            # after Exited: whether the run's process serves the tenant's next run
            self._judged.kept = self.warm_child = report.kept
            if not report.kept:
                log.info("%s: its process is not kept: %r", self.id, report.why)
            self._judged = None
        elif isinstance(report, Started):
            if self.run is not None:
                self.run.warm = report.warm
                self.run.reused = report.reused
                self.pool.reused += report.reused > 0
        else:
            return False
        return True

    async def _read_log(self, stream: asyncio.StreamReader, says: str) -> None:
        """Log what the zygote (or bubblewrap) writes, in chunks, each one record under
        this zygote's id with its line breaks and control characters escaped: nothing
        written there can stop this reader or pass as another zygote's lines."""
        logged = 0
        while chunk := await stream.read(_LOG_CHUNK):
            if logged < _LOG_BYTES:
                logged += len(chunk)
                log.info("%s %s: %r", self.id, says, chunk.decode(errors="replace"))

    def _record_start_state(self) -> None:
        """The zygote's limits and scheduling as it starts, before any run."""
        if not self.pool.jailer.hardening.zygote_check or self.jail.proc is None:
            return
        self._host_pid = jail_command_pid(self.jail.proc.pid, ZYGOTE_PID)
        try:
            if self._host_pid is None:
                raise OSError("its host pid was not found")
            self._start_state = read_state(self._host_pid)
        except OSError as exc:
            self.retire(f"its limits could not be read: {exc}")

    def _state_changes(self) -> list[str]:
        """What of the zygote's limits and scheduling is no longer as it started."""
        if self._start_state is None or self._host_pid is None:
            return []
        start = self._start_state
        if self.jail.cpus is not None:  # where the pool has put it since (_place)
            start = dataclasses.replace(start, affinity=frozenset(self.jail.cpus))
        try:
            return start.changes(read_state(self._host_pid))
        except OSError:
            return ["existence"]

    async def _watch(self, proc: asyncio.subprocess.Process | ForkedJail) -> None:
        returncode = jail_returncode(await proc.wait())
        self.retire(f"the zygote exited with status {returncode}")

    def _run_ended(self, clean: bool) -> None:
        run, self.run = self.run, None
        self.last_used = time.monotonic()
        self.pool.freed()
        if self.state == "retired":
            return
        verdict = run.verdict() if run is not None else None
        changed = self._state_changes()
        if not clean:
            self.retire("a run left processes or files it could not remove")
        elif verdict is not None:
            self.retire(verdict)
        elif changed:
            self.retire(f"its {', '.join(changed)} changed during a run")
        elif self.runs >= self.pool.settings.pool_max_runs:
            self.retire(f"{self.runs} runs")
        else:
            self.state = "idle"
            self.pool.changed()

    def known_worker(self, request: RunRequest, claimed: dict[str, Any]) -> dict[str, Any]:
        """The ``worker`` a run's ``accepted`` carries: what the zygote said in its
        hello, before any run (its first warm child's description of the CPU backend;
        main.py), for this request's devices; never what the run's own
        line claims, which a process kept from an earlier run of the tenant could
        have been made to say anything. A request for an accelerator runs in a cold
        child forked for it (never a kept process), whose ``accepted`` is written
        before any of the run's code: its device fields are taken from it, its
        versions still from the hello. With no hello from any zygote (every warm
        child failed), the line's own."""
        known = (self.info.worker if self.info else None) or self.pool.worker
        if not isinstance(known, dict):
            return claimed
        versions = {
            k: known[k] for k in ("jax_version", "jaxlib_version", "libraries") if k in known
        }
        platforms = self.info.platforms if self.info else ""
        on_cpu = request.backend == "cpu" or (
            request.backend == "auto" and platforms in ("", "cpu")
        )
        if on_cpu and known.get("backend") == "cpu":
            return dict(known, devices=request.devices)
        return dict(claimed, **versions)

    # --- state transitions, besides the reports -------------------------------------

    def take_for(self, tenant: str) -> None:
        """Bind this spare to ``tenant`` (or PRISTINE) for the rest of its life."""
        assert self.tenant is None, f"{self.id} already serves a tenant"
        self.tenant = tenant

    def reserve(self, run: HostedRun) -> None:
        """Hold this zygote for ``run`` (busy from now, if it is ready)."""
        assert self.run is None, f"{self.id} already has a run"
        self.run = run
        if self.state == "idle":
            self.state = "busy"
        self.last_used = time.monotonic()

    def release(self, run: HostedRun) -> None:
        """``run`` ends before it was sent: the zygote is free again."""
        if self.run is run:
            self.run = None
            if self.state in ("idle", "busy"):
                self.state = "idle"

    @property
    def single_use(self) -> bool:
        """It serves one run and retires (a pristine run's, or a single-use tenant's:
        sandbox/protocol/tenants.py): nothing of that run may shape a later one."""
        return self.tenant == PRISTINE or is_single_use(self.tenant)

    def send_run(self, fds: list[int], warm: bool) -> None:
        """Send the reserved run to the zygote, with its descriptors (message, events,
        stderr). The order is the same for every run, a single-use zygote's too (its
        process may be "kept" as any other's, and goes with the zygote after the run):
        nothing in the process tells a pristine or single-use run from a new tenant's
        first run (issue 33)."""
        assert self._ctl is not None
        s = self.pool.settings
        keep = None
        if s.pool_reuse_runs > 1:  # may serve this tenant's next run
            keep = Keep(runs=s.pool_reuse_runs, rss_kib=s.pool_reuse_rss_bytes // 1024)
        socket.send_fds(self._ctl, [encode(RunOrder(warm=warm, keep=keep))], fds)
        self.warm_child = False
        self.runs += 1
        self.pool.total_runs += 1
        self.state = "busy"

    def send_kill(self) -> None:
        if self._ctl is not None:
            with contextlib.suppress(OSError):
                self._ctl.send(encode(KillOrder()))

    def retire(self, why: str) -> None:
        """Kill the jail (if alive) and forget the zygote; idempotent."""
        if self.state == "retired":
            return
        log.info("%s retires: %s", self.id, why)
        self.state = "retired"
        self.why = why
        self.jail.kill()
        if not self.ready.done():
            self.ready.set_exception(WorkerStartError(f"the sandbox {why}"))
            self.ready.exception()  # retrieved: no "never retrieved" warning
        self._closed = asyncio.create_task(self._close())
        self.pool.forget(self)

    async def _close(self) -> None:
        await self.jail.close()
        if self._ctl is not None:
            self._ctl.close()
        current = asyncio.current_task()
        tasks = [t for t in self._tasks if t is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.run is not None:
            run, self.run = self.run, None
            run.exited(None)

    async def closed(self) -> None:
        if self._closed is not None:
            await asyncio.shield(self._closed)
