"""The warm pool: jailed zygotes that imported JAX once; a run gets a forked child.

A zygote (sandbox/jail/zygote.py) lives in its own jail and serves one tenant only.
Spares, bound to no tenant yet, are kept ready so a new tenant never waits for
``import jax``. Per run the supervisor makes two pipes (events, stderr) and a memfd
with the worker message, passes them to the zygote over its control socket
(SCM_RIGHTS), and reads the pipes itself, with the same caps as every run
(sandbox/supervisor.py). The zygote forks, the child runs the engine, and when it is
gone the zygote kills what it left and empties /tmp before it takes the next run. A
child whose run ended well and changed nothing it relies on may be kept for the
tenant's next run (``JAXPLAY_POOL_REUSE_RUNS``; sandbox/jail/reuse.py).

A timeout, an output or event cap, the OOM killer, a zygote that dies or a cleanup
that fails: each kills the whole jail (SIGKILL from outside, cgroup emptied) and the
zygote is retired. A cancel only kills the run's child (the zygote stays), unless
that takes longer than a second. Zygotes also retire on idle time, run count and age.

A pristine run (``submit(..., pristine=True)``, issue 20) takes a ready spare that
never had a tenant, marks it ``PRISTINE``, runs in a fresh child with JAX's
persistent cache off, and retires the zygote and its jail after. Every run's
``accepted`` carries the worker its zygote described in its hello, before any run
(``Zygote.known_worker``), never the one the run's line claims.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

from sandbox.jail.jail import Jailer
from sandbox.jail.procstate import ProcState, jail_command_pid, read_state
from sandbox.jail.run import jail_returncode
from sandbox.jail.seccomp import ZYGOTE_PID, run_filter_fd
from sandbox.pool.base import PoolFull
from sandbox.pool.budget import Budget
from sandbox.pool.settings import PoolSettings
from sandbox.protocol import RunRequest
from sandbox.supervisor import (
    MAX_EVENT_BYTES,
    OutputLimits,
    RunSupervisor,
    WorkerStartError,
    human_bytes,
)

log = logging.getLogger(__name__)

_BOOT = "import sys; from sandbox.jail.zygote import main; main(sys.argv)"
#: Largest control message accepted from a zygote (they are a few dozen bytes).
_CTL_BYTES = 4096
#: Bytes of a zygote's log (and of bubblewrap's stderr) that are logged; the rest is
#: read and dropped. Read in chunks of _LOG_CHUNK: no line length can stop the reader.
_LOG_BYTES = 64 * 1024
_LOG_CHUNK = 4096
#: How long a cancelled run's child may take to be killed by its zygote.
CANCEL_S = 1.0


def tenant_group(tenant: str) -> str:
    """The client a tenant belongs to: tenants are ``GROUP|NAME`` (or just ``GROUP``),
    as the server names them (backend/app/tenancy.py)."""
    return tenant.split("|", 1)[0]


#: The tenant of a zygote taken for a pristine run: no tenant the server names can be
#: it (they are ``GROUP|NAME`` of printable text), so no tenant is ever given it.
PRISTINE = "\x00pristine"


def fits_warm_child(request: RunRequest) -> bool:
    """Whether a zygote's pre-forked child (CPU backend started with one device) can
    run this request; otherwise the zygote forks a cold child for it."""
    return request.devices == 1 and request.backend in ("auto", "cpu")


class Zygote:
    """One jail with one zygote process in it, and its control socket."""

    def __init__(self, pool: ZygotePool, seq: int, tenant: str | None) -> None:
        self.pool = pool
        self.id = f"z{seq}"
        self.tenant = tenant
        self.jail = pool.jailer.jail()
        self.state = "starting"  # starting -> idle <-> busy -> retired
        self.run: ZygoteRun | None = None  # the run it is reserved for or running
        self.runs = 0
        self.born = self.last_used = time.monotonic()
        self.ready: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.info: dict[str, Any] = {}
        #: whether its pre-forked child has its backend warm (the next run starts fast)
        self.warm_child = False
        #: the run whose process the zygote is deciding to keep or not, after it ended
        self._judged: ZygoteRun | None = None
        self._ctl: socket.socket | None = None
        #: the zygote's host pid and its limits and scheduling when it said ready
        self._host_pid: int | None = None
        self._start_state: ProcState | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._closed: asyncio.Task[None] | None = None

    @property
    def judging(self) -> bool:
        """Its run has ended and its process is checking itself (sandbox/jail/reuse.py)."""
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
        args = [str(child.fileno()), self.pool.worker_module, str(run_filter or "-"), str(log_w)]
        try:
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
        assert proc.stdin and proc.stderr
        proc.stdin.close()
        parent.setblocking(False)
        self._ctl = parent
        zygote_log = await _pipe_reader(log_r)
        self._tasks = [
            asyncio.create_task(self._read_control()),
            asyncio.create_task(self._read_log(zygote_log, "says")),
            asyncio.create_task(self._read_log(proc.stderr, "(bubblewrap) says")),
            asyncio.create_task(self._watch(proc)),
        ]
        try:
            self.info = await asyncio.wait_for(
                asyncio.shield(self.ready), self.pool.settings.pool_start_s
            )
        except TimeoutError:
            self.retire(f"not ready after {self.pool.settings.pool_start_s:g} s")
            raise
        if self.state == "starting":
            self.state = "busy" if self.run is not None else "idle"
        log.debug(
            "%s ready in %.0f ms, %s KiB RSS",
            self.id,
            self.info.get("ms", 0),
            self.info.get("rss_kib"),
        )

    async def _read_control(self) -> None:
        assert self._ctl is not None
        loop = asyncio.get_running_loop()
        while True:
            try:
                data = await loop.sock_recv(self._ctl, _CTL_BYTES)
                message = json.loads(data) if data else None
            except (OSError, ValueError):
                message = None
            if not isinstance(message, dict):
                break
            op = message.get("op")
            if op == "ready" and not self.ready.done():
                self.warm_child = message.get("warm") is True
                if isinstance(message.get("worker"), dict):
                    self.pool.note_worker(message["worker"])
                self.pool.note_check(message.get("identity_check"))
                self._record_start_state()
                self.ready.set_result(message)
            elif op == "exited" and self.run is not None:
                status, clean = message.get("status"), message.get("clean") is True
                run = self.run
                self._judged = run if message.get("judging") is True else None
                if self._judged is None:
                    run.kept = False
                self._run_ended(clean and isinstance(status, int))
                run.exited(status if isinstance(status, int) else None)
            elif op == "warm":
                self.warm_child = True
                worker = message.get("worker")
                if self.runs == 0 and isinstance(worker, dict) and not self.info.get("worker"):
                    self.info["worker"] = worker  # the zygote learnt it after ready
                    self.pool.note_worker(worker)
            elif op == "kept" and self._judged is not None:
                # after "exited": whether the run's process serves the tenant's next run
                self._judged.kept = self.warm_child = message.get("kept") is True
                if not self._judged.kept:
                    log.info("%s: its process is not kept: %r", self.id, message.get("why"))
                self._judged = None
            elif op == "started" and self.run is not None:
                self.run.warm = message.get("warm") is True
                reused = message.get("reused")
                self.run.reused = reused if isinstance(reused, int) else 0
                self.pool.reused += self.run.reused > 0
            elif op != "started":
                break
        self.retire("control channel closed")

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

    async def _watch(self, proc: asyncio.subprocess.Process) -> None:
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
        sandbox/jail/zygote.py), for this request's devices; never what the run's own
        line claims, which a process kept from an earlier run of the tenant could
        have been made to say anything. A request for an accelerator runs in a cold
        child forked for it (never a kept process), whose ``accepted`` is written
        before any of the run's code: its device fields are taken from it, its
        versions still from the hello. With no hello from any zygote (every warm
        child failed), the line's own."""
        known = self.info.get("worker") or self.pool.worker
        if not isinstance(known, dict):
            return claimed
        versions = {k: known[k] for k in ("jax_version", "jaxlib_version") if k in known}
        platforms = str(self.info.get("platforms") or "")
        on_cpu = request.backend == "cpu" or (
            request.backend == "auto" and platforms in ("", "cpu")
        )
        if on_cpu and known.get("backend") == "cpu":
            return dict(known, devices=request.devices)
        return dict(claimed, **versions)

    def send_run(self, fds: list[int], warm: bool, pristine: bool = False) -> None:
        assert self._ctl is not None
        order: dict[str, Any] = {"op": "run", "warm": warm}
        s = self.pool.settings
        if s.pool_reuse_runs > 1 and not pristine:  # may serve this tenant's next run
            order["keep"] = {"runs": s.pool_reuse_runs, "rss_kib": s.pool_reuse_rss_bytes // 1024}
        socket.send_fds(self._ctl, [json.dumps(order).encode()], fds)
        self.warm_child = False
        self.runs += 1
        self.pool.total_runs += 1

    def send_kill(self) -> None:
        if self._ctl is not None:
            with contextlib.suppress(OSError):
                self._ctl.send(b'{"op":"kill"}')

    def retire(self, why: str) -> None:
        """Kill the jail (if alive) and forget the zygote; idempotent."""
        if self.state == "retired":
            return
        log.info("%s retires: %s", self.id, why)
        self.state = "retired"
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


async def _pipe_reader_transport(
    fd: int, limit: int = 2**16
) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    """A StreamReader on the read end ``fd`` of a pipe (the transport owns and closes it)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader),
        open(fd, "rb", buffering=0),  # noqa: SIM115 (the transport owns and closes it)
    )
    return reader, transport


async def _pipe_reader(fd: int) -> asyncio.StreamReader:
    return (await _pipe_reader_transport(fd))[0]


class ZygoteRun(RunSupervisor):
    """One run in a zygote's fresh child; iterate ``events()`` once."""

    def __init__(self, zygote: Zygote, request: RunRequest, run_id: str, **kwargs: Any) -> None:
        super().__init__(request, run_id, **kwargs)
        self._zygote = zygote
        self._exit: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        self._transports: list[asyncio.BaseTransport] = []
        self._oom_base = 0
        self._sent = False
        #: whether the zygote's pre-forked child (backend already warm) took the run
        self.warm = False
        #: how many runs of its tenant the process had served before this one (0: a
        #: fresh child), and whether it is kept for the next (sandbox/jail/reuse.py;
        #: None until the zygote has decided, a moment after the run ended)
        self.reused = 0
        self.kept: bool | None = None

    @property
    def zygote_id(self) -> str:
        return self._zygote.id

    def _known_worker(self, claimed: dict[str, Any]) -> dict[str, Any]:
        return self._zygote.known_worker(self._request, claimed)

    async def _start(self) -> tuple[asyncio.StreamReader, asyncio.StreamReader]:
        z = self._zygote
        await z.ready
        if z.state == "retired":
            raise WorkerStartError("the sandbox was retired before the run could start")
        cgroup = z.jail.cgroup
        self._oom_base = cgroup.oom_kills() if cgroup is not None else 0
        message = os.memfd_create("jaxplay-run")
        events_r, events_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        try:
            os.write(message, self._message())
            os.lseek(message, 0, os.SEEK_SET)
            z.send_run(
                [message, events_w, stderr_w],
                warm=fits_warm_child(self._request),
                pristine=self.pristine,
            )
            self._sent = True
        except OSError:
            os.close(events_r)
            os.close(stderr_r)
            raise
        finally:
            for fd in (message, events_w, stderr_w):
                os.close(fd)
        z.state = "busy"
        return await self._reader(events_r, MAX_EVENT_BYTES), await self._reader(stderr_r, 2**16)

    async def _reader(self, fd: int, limit: int) -> asyncio.StreamReader:
        reader, transport = await _pipe_reader_transport(fd, limit)
        self._transports.append(transport)
        return reader

    def exited(self, status: int | None) -> None:
        if not self._exit.done():
            self._exit.set_result(status)

    async def _wait(self) -> int | None:
        status = await self._exit
        if status is None:  # the whole jail is gone
            await self._zygote.closed()
            if self._end is None:
                self._end = ("killed", self._limit_reason() or "the sandbox ended during the run")
        return status

    def _kill(self) -> None:
        self._zygote.retire(f"run {self.run_id}: {self._end[1] if self._end else 'killed'}")

    async def cancel(self) -> None:
        if self._end is not None or self._exit.done():
            return
        self._end = ("cancelled", "cancelled by the client")
        if not self._sent:
            self._kill()
            return
        self._zygote.send_kill()
        try:
            await asyncio.wait_for(asyncio.shield(self._exit), CANCEL_S)
        except TimeoutError:
            self._kill()

    def _limit_reason(self) -> str | None:
        cgroup = self._zygote.jail.cgroup
        if cgroup is not None and cgroup.oom_kills() > self._oom_base:
            return f"memory {human_bytes(self._zygote.pool.jailer.limits.memory_bytes)}"
        return None

    def _limit_hit(self) -> tuple[str, str] | None:
        reason = self._limit_reason()
        return ("killed", reason) if reason else None

    def verdict(self) -> str | None:
        """Why this run's zygote must not serve another run, if it must not."""
        if self.pristine:
            return "a pristine run is done: its zygote and jail serve no other"
        if self._end is not None and self._end[0] != "cancelled":
            return f"run ended by {self._end[0]}: {self._end[1]}"
        return self._limit_reason()

    async def _finish(self) -> None:
        for transport in self._transports:
            transport.close()
        if not self._sent and self.pristine:  # never started: it goes all the same
            self._zygote.retire("its pristine run ended before it started")
        elif not self._sent:
            z = self._zygote
            if z.run is self:
                z.run = None
                if z.state in ("idle", "busy"):
                    z.state = "idle"
            z.pool.changed()
            z.pool.freed()


class ZygotePool:
    """Jailed warm zygotes on this machine; implements sandbox.pool.base.Pool."""

    def __init__(
        self,
        jailer: Jailer | None = None,
        settings: PoolSettings | None = None,
        *,
        worker_module: str = "sandbox.engine.worker",
        budget: Budget | None = None,
    ) -> None:
        self.jailer = jailer or Jailer()
        self.settings = settings or PoolSettings.from_env()
        self.worker_module = worker_module
        self.size, self.max_running = self.settings.sizes(self.jailer.limits.memory_bytes)
        per_run = self.jailer.limits.cpus
        if not self.settings.pool_running and 0 < per_run < len(self.jailer.cpus):
            # pinned jails of several CPUs: as many runs as fit side by side
            self.max_running = max(1, min(self.max_running, len(self.jailer.cpus) // per_run))
        slots = self.jailer.slots
        if slots is not None and self.size > slots:  # each zygote's jail holds a jail uid
            log.warning("pool size %d capped at JAXPLAY_JAIL_SLOTS=%d jail uids", self.size, slots)
            self.size, self.max_running = slots, min(self.max_running, slots)
        #: the machine's places and zygotes, shared with the pools of other JAX
        #: versions (sandbox/pool/budget.py); this pool's own sizes make a new one
        self.budget = budget if budget is not None else Budget(self.max_running, self.size)
        self.size, self.max_running = self.budget.zygotes, self.budget.places
        self.zygotes: list[Zygote] = []
        self.total_runs = 0
        self.retired = 0
        self.reused = 0  # runs served by a process kept from an earlier run
        self.moved = 0  # runs whose jail was moved to a free CPU first (_place)
        self.pristine_runs = 0  # runs made pristine (submit), each in a retired spare
        #: what the first zygote said its jail runs on (Zygote.known_worker's fallback)
        self.worker: dict[str, Any] | None = None
        self._listeners: list[Callable[[], None]] = []
        #: how kept processes check themselves (note_check); None until a zygote said
        self.identity_check: str | None = None
        self._seq = 0
        self._refiller: asyncio.Task[None] | None = None
        self._maintainer: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closing = False
        self._retiring: set[Zygote] = set()
        self._starting: set[asyncio.Task[None]] = set()

    # --- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        await self.jailer.check()
        self.budget.join(self)
        self._maintainer = asyncio.create_task(self._maintain())
        self.changed()

    async def close(self) -> None:
        self._closing = True
        self.changed()
        tasks = [t for t in (self._maintainer, self._refiller) if t is not None]
        for task in tasks:
            task.cancel()
        for z in list(self.zygotes):
            z.retire("the pool is closing")
        await asyncio.gather(*tasks, *self._starting, return_exceptions=True)
        self.budget.leave(self)
        await self.drain()

    async def drain(self) -> None:
        """Wait until every retired jail is gone (its processes and cgroup)."""
        while self._retiring:
            await asyncio.gather(
                *(z.closed() for z in list(self._retiring)), return_exceptions=True
            )

    async def ready(self, timeout_s: float = 120.0) -> None:
        """Wait until the spares are up (tests and the benchmark use this)."""
        deadline = time.monotonic() + timeout_s
        while self._spares(ready_only=True) < min(self.settings.pool_spares, self.size):
            if time.monotonic() > deadline:
                raise TimeoutError("the pool's spares did not start")
            await asyncio.sleep(0.05)

    # --- runs ---------------------------------------------------------------------

    #: pristine runs: a ready spare, a fresh child, the persistent cache off, retired
    makes_pristine_runs = True

    async def submit(
        self, request: RunRequest, tenant: str, *, pristine: bool = False
    ) -> ZygoteRun:
        if self._closing:
            raise PoolFull("the pool is closing", retry_after_s=5.0)
        running = self.budget.running()  # every JAX version's: one machine's places
        if len(running) >= self.budget.places:
            raise PoolFull(f"{len(running)} runs in progress", retry_after_s=1.0)
        z = self._pick_pristine() if pristine else self._pick(tenant)
        self._place(z, running)
        jl = self.jailer.limits
        run = ZygoteRun(
            z,
            request,
            uuid.uuid4().hex,
            wall_s=min(request.timeout_s, jl.max_wall_s),
            limits=OutputLimits(output_bytes=jl.output_bytes, event_bytes=jl.event_bytes),
            pristine=pristine,
        )
        self.pristine_runs += pristine
        z.run = run
        if z.state == "idle":
            z.state = "busy"
        z.last_used = time.monotonic()
        self.changed()
        return run

    def _place(self, z: Zygote, running: list[Zygote]) -> None:
        """Put ``z``'s jail on CPUs no other run is using: jails are pinned (one CPU
        each by default) when they start, and two runs on one CPU would each go at half
        speed, with timings to match, while another CPU idles. Among the free CPUs,
        those where no other jail is starting or checking its kept process come first,
        then the jail's own. A jail that is starting (past the point where taskset
        still has to run) or has no cpuset stays where it is."""
        own = z.jail.cpus
        if own is None or (z.state == "starting" and z.jail.cgroup is not None):
            return
        taken = {c for o in running if o is not z for c in o.jail.cpus or ()}
        free = [c for c in self.jailer.cpus if c not in taken]
        if len(free) < len(own):
            return
        noisy = collections.Counter(
            c
            for o in self.budget.all_zygotes()
            if o is not z and (o.state == "starting" or o.judging)
            for c in o.jail.cpus or ()
        )
        best = sorted(free, key=lambda c: (noisy[c], c not in own, c))[: len(own)]
        if sorted(best) != sorted(own) and z.jail.move_to(best):
            self.moved += 1

    def _pick_pristine(self) -> Zygote:
        """A ready spare for a pristine run: a zygote that never had a tenant (its warm
        child ran jaxplay's warm-up only), in a jail that never served one. It is
        marked PRISTINE, which no tenant can be, and retires after the run. None
        ready: PoolFull (the server retries later); never a spare still starting, never
        a new one waited for. Where none is even starting because every place is held
        by tenants, the least recently used idle one gives its place up for a spare
        (as it would for a new client): else a busy pool would never confirm anything."""
        spares = [z for z in self.zygotes if z.tenant is None and z.run is None]
        ready = [z for z in spares if z.state == "idle" and z.runs == 0]
        if not ready:
            if not spares and not self.budget.has_room():
                victim = self.budget.victim(self, PRISTINE)
                if victim is not None:
                    victim.retire("its place goes to a spare for a pristine run")
                    self.changed()  # the refiller starts that spare
            raise PoolFull("no spare sandbox is ready for a pristine run", retry_after_s=2.0)
        z = min(ready, key=lambda z: z.born)
        z.tenant = PRISTINE
        self.changed()  # the refiller starts a spare in its place
        return z

    def _pick(self, tenant: str) -> Zygote:
        mine = [z for z in self.zygotes if z.tenant == tenant]
        idle = [z for z in mine if z.state == "idle" and z.run is None]
        if idle:
            return max(idle, key=lambda z: z.last_used)
        if len(mine) >= self.settings.pool_per_tenant:
            raise PoolFull(f"{len(mine)} runs of this client in progress", retry_after_s=1.0)
        spares = [z for z in self.zygotes if z.tenant is None and z.run is None]
        if spares:
            z = min(spares, key=lambda z: (z.state != "idle", z.born))  # ready ones first
            z.tenant = tenant
            return z
        if not self.budget.has_room():
            victim = self.budget.victim(self, tenant)
            if victim is None:
                raise PoolFull("every sandbox is busy", retry_after_s=1.0)
            victim.retire("evicted for a new client")
        return self._spawn(tenant)

    def _victim(self, tenant: str) -> Zygote | None:
        """The idle zygote a full pool gives up for ``tenant``, fairly between client
        groups (a tenant ``GROUP|NAME``: the server's client address or token; see
        ``tenant_group``): a group at its share (the pool's size over the groups
        holding zygotes) evicts only its own; otherwise the least recently used of
        a group over its share goes. So one client opening sessions without end takes
        its share of warm zygotes, never everyone's."""
        mine = tenant_group(tenant)
        held: dict[str, int] = {}
        for z in self.zygotes:
            if z.tenant is not None:
                held[tenant_group(z.tenant)] = held.get(tenant_group(z.tenant), 0) + 1
        share = max(1, self.size // len(held.keys() | {mine}))
        idle = [z for z in self.zygotes if z.state == "idle" and z.run is None and z.tenant]
        if held.get(mine, 0) >= share:
            idle = [z for z in idle if tenant_group(z.tenant or "") == mine]
        else:
            idle = [z for z in idle if held[tenant_group(z.tenant or "")] > share] or [
                z for z in idle if tenant_group(z.tenant or "") != mine
            ]
        return min(idle, key=lambda z: z.last_used) if idle else None

    @property
    def tenant_slots(self) -> int:
        """How many tenants can hold a zygote at once: the server refuses a new tenant
        beyond it while they all use theirs (backend/app/admission.py, TenantTurns)."""
        return self.size

    def end_turn(self, tenant: str) -> None:
        """``tenant``'s turn at the pool is over while others wait: its idle zygotes
        retire now, so a spare starts for the next tenant (a busy one goes when a new
        tenant needs it, as the least recently used)."""
        for z in list(self.zygotes):
            if z.tenant == tenant and z.state == "idle" and z.run is None:
                z.retire("its tenant's turn is over and others are waiting")

    # --- zygotes ------------------------------------------------------------------

    def _spawn(self, tenant: str | None) -> Zygote:
        self._seq += 1
        z = Zygote(self, self._seq, tenant)
        self.zygotes.append(z)
        task = asyncio.create_task(z.start())
        self._starting.add(task)
        task.add_done_callback(self._started)
        return z

    def _started(self, task: asyncio.Task[None]) -> None:
        self._starting.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved; a failed start was logged by retire()

    def forget(self, z: Zygote) -> None:
        if z in self.zygotes:
            self.zygotes.remove(z)
            self.retired += 1
            self._retiring.add(z)
            assert z._closed is not None
            z._closed.add_done_callback(lambda _: self._retiring.discard(z))
        self.changed()
        self.budget.changed()  # room for another version's spare

    def changed(self) -> None:
        self._wake.set()

    def note_check(self, kind: object) -> None:
        """Which implementation a zygote's kept processes check themselves with
        (sandbox/jail/reuse.py): "c", or "python" (~10 ms more per run) where the
        extension was not built; said once in the log when it is not "c"."""
        kind = str(kind)[:16]
        if kind != self.identity_check and kind != "c":
            log.warning(
                "the kept processes' check runs in Python (%s): the C extension "
                "sandbox/jail/_identity was not built (make setup builds it)",
                kind,
            )
        self.identity_check = kind

    def note_worker(self, worker: dict[str, Any]) -> None:
        """A zygote's hello said what its jail runs on: the pool's fallback for
        zygotes whose first warm child did not say it in time."""
        if self.worker is None:
            self.worker = worker

    def on_free(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` whenever a run's place frees (its run ended), so that a
        run waiting for one (the server's queue) starts at once, not when the ended
        run's events have all been relayed."""
        self._listeners.append(listener)

    def freed(self) -> None:
        self.budget.freed()  # a place of the machine's: runs of any version may wait
        if self not in self.budget.pools:  # closed (left the budget) as its run ended
            self.notify_free()

    def notify_free(self) -> None:
        loop = asyncio.get_running_loop()
        for listener in self._listeners:
            loop.call_soon(listener)

    def _spares(self, ready_only: bool = False) -> int:
        return sum(
            1
            for z in self.zygotes
            if z.tenant is None and z.run is None and (z.state == "idle" or not ready_only)
        )

    async def _maintain(self) -> None:
        # Ends on _closing rather than on cancellation alone: Python 3.11's wait_for
        # may swallow a cancel that arrives as the event fires.
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 1.0)
            self._wake.clear()
            if self._closing:
                return
            now = time.monotonic()
            s = self.settings
            for z in list(self.zygotes):
                if z.state != "idle" or z.run is not None:
                    continue
                if now - z.born > s.pool_max_age_s:
                    z.retire(f"age over {s.pool_max_age_s:g} s")
                elif z.tenant is not None and now - z.last_used > s.pool_idle_s:
                    z.retire(f"idle over {s.pool_idle_s:g} s")
            if self._refiller is None or self._refiller.done():
                self._refiller = asyncio.create_task(self._refill())

    async def _refill(self) -> None:
        """Start spares one at a time (each import of JAX takes a core for a second)."""
        while (
            not self._closing
            and self._spares() < self.settings.pool_spares
            and self.budget.has_room()
        ):
            z = self._spawn(None)
            with contextlib.suppress(Exception):
                await z.ready
            if z.state == "retired" and not z.info:  # failed to start: do not spin
                await asyncio.sleep(5.0)

    def stats(self) -> dict[str, Any]:
        return {
            "kind": "zygote",
            "zygotes": len(self.zygotes),
            "size": self.size,
            "spares": self._spares(ready_only=True),
            "warm_children": sum(1 for z in self.zygotes if z.warm_child),
            "tenants": len({z.tenant for z in self.zygotes if z.tenant not in (None, PRISTINE)}),
            "running": sum(1 for z in self.zygotes if z.run is not None),
            "capacity": self.max_running,
            "runs": self.total_runs,
            "reused": self.reused,
            "moved": self.moved,
            "pristine_runs": self.pristine_runs,
            "identity_check": self.identity_check,
            "retired": self.retired,
            "jail": self.jailer.describe(),
        }
