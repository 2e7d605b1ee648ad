"""A run in a zygote, as the pool holds it: ``ZygoteRun``, the supervisor of one run.

Per run the supervisor makes two pipes (events, stderr) and a memfd with the worker
message, has its zygote (handle.py) send them to the zygote process, and reads the
pipes itself, with the same caps as every run (sandbox/supervisor/relay.py). A cancel
only kills the run's child (the zygote stays), unless that takes longer than
CANCEL_S; anything else that ends a run early retires the whole zygote.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any

from sandbox.protocol import DoneStatus, RunRequest
from sandbox.supervisor import MAX_EVENT_BYTES, RunSupervisor, WorkerStartError, human_bytes
from sandbox.zygote.handle import PRISTINE, Zygote
from sandbox.zygote.pipes import pipe_reader_transport

#: How long a cancelled run's child may take to be killed by its zygote.
CANCEL_S = 1.0

log = logging.getLogger(__name__)


def fits_warm_child(request: RunRequest) -> bool:
    """Whether a zygote's pre-forked child (CPU backend started with one device) can
    run this request; otherwise the zygote forks a cold child for it."""
    return request.devices == 1 and request.backend in ("auto", "cpu")


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
        #: fresh child), and whether it is kept for the next (watch.py;
        #: None until the zygote has decided, a moment after the run ended)
        self.reused = 0
        self.kept: bool | None = None
        #: the pool's way to another zygote, once, if this one goes before the run is
        #: sent to it (none of the run's code ran: the sandbox failing is not the run's
        #: outcome); None: no second chance
        self.repick: Callable[[], Zygote] | None = None

    @property
    def zygote_id(self) -> str:
        return self._zygote.id

    @property
    def pristine(self) -> bool:
        """A pristine run (sandbox/pool/base.py, MakesPristineRuns): its zygote was
        taken for it alone, and retires after it (the run itself is not told: nothing
        in it tells it apart)."""
        return self._zygote.tenant == PRISTINE

    def _known_worker(self, claimed: dict[str, Any]) -> dict[str, Any]:
        return self._zygote.known_worker(self._request, claimed)

    async def _ready_zygote(self) -> Zygote:
        z = self._zygote
        await z.ready  # raises WorkerStartError if it failed to start
        if z.state == "retired":
            raise WorkerStartError(f"the sandbox was retired before the run could start: {z.why}")
        return z

    async def _start(self) -> tuple[asyncio.StreamReader, asyncio.StreamReader]:
        try:
            z = await self._ready_zygote()
        except WorkerStartError as exc:
            repick, self.repick = self.repick, None
            if repick is None or self._end is not None:
                raise
            old = self._zygote
            log.warning("run %s: %s; another sandbox takes it", self.run_id, exc)
            old.release(self)
            if self._exit.done():  # the old jail's end, of a run never sent to it
                self._exit = asyncio.get_running_loop().create_future()
            try:
                self._zygote = repick()
            except Exception as again:  # PoolFull: nothing else free now
                raise WorkerStartError(f"{exc} (and no other was free: {again})") from exc
            try:
                z = await self._ready_zygote()
            except WorkerStartError as again:
                raise WorkerStartError(f"{again} (the one before: {exc})") from exc
        cgroup = z.jail.cgroup
        self._oom_base = cgroup.oom_kills() if cgroup is not None else 0
        message = os.memfd_create("jaxplay-run")
        events_r, events_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        try:
            os.write(message, self._message())
            os.lseek(message, 0, os.SEEK_SET)
            z.send_run([message, events_w, stderr_w], warm=fits_warm_child(self._request))
            self._sent = True
        except OSError:
            os.close(events_r)
            os.close(stderr_r)
            raise
        finally:
            for fd in (message, events_w, stderr_w):
                os.close(fd)
        return await self._reader(events_r, MAX_EVENT_BYTES), await self._reader(stderr_r, 2**16)

    async def _reader(self, fd: int, limit: int) -> asyncio.StreamReader:
        reader, transport = await pipe_reader_transport(fd, limit)
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

    def _limit_hit(self) -> tuple[DoneStatus, str] | None:
        reason = self._limit_reason()
        return ("killed", reason) if reason else None

    def verdict(self) -> str | None:
        """Why this run's zygote must not serve another run, if it must not."""
        if self.pristine:
            return "a pristine run is done: its zygote and jail serve no other"
        if self._zygote.single_use:
            return "its single-use run is done: its zygote and jail serve no other"
        if self._end is not None and self._end[0] != "cancelled":
            return f"run ended by {self._end[0]}: {self._end[1]}"
        return self._limit_reason()

    async def _finish(self) -> None:
        for transport in self._transports:
            transport.close()
        if not self._sent and self._zygote.single_use:  # pristine runs' zygotes too
            # never started: it goes all the same (bound to a tenant no run will have)
            self._zygote.retire("its single-use run ended before it started")
        elif not self._sent:
            z = self._zygote
            z.release(self)
            z.pool.changed()
            z.pool.freed()
