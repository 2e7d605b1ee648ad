"""The supervisor: starts one worker process for one run and relays its events.

It trusts nothing that comes out of the worker: it only reads the worker's pipes,
passes each line through the run's ``EventGate`` (bounded parse, typed events, only
what this run could have made), counts the bytes of user output, and enforces the
wall clock from outside with SIGKILL of the whole process group (an infinite
``lax.while_loop`` under ``jit`` ignores every other signal). Whatever happens, the
stream ends with exactly one ``done`` event, which the supervisor writes itself.
Each run has a random token, in the worker message and nowhere else, that the
engine tags its event lines with: a line without it is refused, and a run that
would have ended ``ok`` or ``error`` with any refused line ends ``tampered``.

Memory is bounded: the queue between the pipe readers and whoever iterates
``events()`` holds at most ``QUEUE_EVENTS`` events and ``QUEUE_BYTES`` of them
(always at least one), so a consumer that stops reading stops the readers, the pipe
fills, and the worker blocks on its next write (its wall clock still runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.protocol.events import DoneStatus, done_event
from sandbox.protocol.limits import MAX_EVENT_BYTES, PROTOCOL_VERSION
from sandbox.protocol.requests import RunRequest
from sandbox.protocol.vocabulary import TAMPERED_REASON, TIMEOUT_LONGER
from sandbox.supervisor.event_gate import MAX_REFUSED_LINES, EventGate

__all__ = ["MAX_EVENT_BYTES", "OutputLimits", "RunSupervisor", "SupervisedRun"]

#: Largest raw stderr chunk relayed as one event.
STDERR_CHUNK = 4096
#: Events waiting for the consumer, and their bytes, at most (then the readers wait).
QUEUE_EVENTS = 16
QUEUE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class OutputLimits:
    #: total bytes of user output (stdout + stderr) before the run is killed
    output_bytes: int = 1024 * 1024
    #: total bytes of all events (texts of jaxprs, HLO, values...) before the run is killed
    event_bytes: int = 64 * 1024 * 1024


def worker_message(run_id: str, request: RunRequest, *, token: str = "") -> bytes:
    """What a worker reads on stdin: one JSON object. ``token``: the run's secret that
    the engine tags each event line with (sandbox/engine/core/emitter.py; the gate refuses
    a line without it). Nothing in it says whether the run is pristine: such a run
    looks like any other to its code (issue 33); the pool alone knows, and retires
    its zygote after it."""
    message: dict[str, Any] = {
        "protocol": PROTOCOL_VERSION,
        "run_id": run_id,
        "request": request.model_dump(),
    }
    if token:
        message["token"] = token
    return json.dumps(message).encode()


def human_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


class WorkerStartError(Exception):
    """The worker could not be started; the message says why, in words."""


class RunSupervisor:
    """Relays one run's event and stderr streams, with every cap, ending with ``done``.

    Subclasses say how the worker starts (``_start``: its event and stderr streams),
    how to learn its end (``_wait``: a returncode, negative for a signal), how to kill
    it (``_kill``, from outside, idempotent) and what to do after (``_finish``).
    """

    def __init__(
        self,
        request: RunRequest,
        run_id: str,
        *,
        wall_s: float | None = None,
        limits: OutputLimits | None = None,
    ) -> None:
        self.run_id = run_id
        self._request = request
        #: tags the engine's event lines; only this supervisor and the engine know it
        self.token = secrets.token_hex(16)
        self._wall_s = request.timeout_s if wall_s is None else wall_s
        self._limits = limits or OutputLimits()
        self._end: tuple[DoneStatus, str] | None = None  # (status, reason) decided by us
        #: the stage the run's wall clock ran out in (``done.timeout_stage``)
        self._timeout_stage: str | None = None
        self._queue: asyncio.Queue[tuple[dict[str, Any], int] | None] = asyncio.Queue(QUEUE_EVENTS)
        self._queued_bytes = 0
        self._room = asyncio.Event()
        self._gate = EventGate(request, run_id, token=self.token, identify=self._known_worker)
        self._started = time.monotonic()
        self._user_bytes = 0
        self._event_bytes = 0
        self._returncode: int | None = None

    # --- what subclasses provide -------------------------------------------------

    async def _start(self) -> tuple[asyncio.StreamReader, asyncio.StreamReader]:
        raise NotImplementedError

    async def _wait(self) -> int | None:
        raise NotImplementedError

    def _kill(self) -> None:
        raise NotImplementedError

    async def _finish(self) -> None:
        """After the stream ended (normally or not); the worker is dead or done."""

    def _limit_hit(self) -> tuple[DoneStatus, str] | None:
        """A limit the worker died of that only the host can see (e.g. memory)."""
        return None

    def _known_worker(self, claimed: dict[str, Any]) -> dict[str, Any]:
        """The ``worker`` the run's ``accepted`` carries: what the pool knows of the
        process, not what the line claims, where the pool knows it. Here (a fresh
        process per run, whose ``accepted`` is written before any of the run's code)
        the engine's own words."""
        return claimed

    def _message(self) -> bytes:
        """The worker message of this run (with its token)."""
        return worker_message(self.run_id, self._request, token=self.token)

    # --- the relay ---------------------------------------------------------------

    async def cancel(self) -> None:
        self._stop("cancelled", "cancelled by the client")

    def _timed_out(self) -> None:
        """The wall clock ran out: say in which stage, and what the stages before it
        took, so that the client knows what a longer ``timeout_s`` would be for."""
        stage = self._gate.running_stage()
        done = ", ".join(f"{s} {ms / 1000:.1f} s" for s, _, ms in self._gate.stages_done)
        self._timeout_stage = stage
        self._stop(
            "timeout",
            f"wall clock {self._wall_s:g} s, reached in the {stage} stage "
            f"(stages done: {done or 'none'}){TIMEOUT_LONGER}",
        )

    def _stop(self, status: DoneStatus, reason: str) -> None:
        if self._end is None:
            self._end = (status, reason)
        self._kill()

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        self._started = started = time.monotonic()
        try:
            try:
                stdout, stderr = await self._start()
            except (OSError, WorkerStartError) as exc:
                # A cancel (or our own limit) while the worker was starting is what
                # ended the run; the start failing after it is only its consequence.
                end = self._end or ("error", f"the worker could not start: {exc}")
                yield self._done(end, started)
                return
            readers = [
                asyncio.create_task(self._read_events(stdout)),
                asyncio.create_task(self._read_stderr(stderr)),
            ]
            waiter = asyncio.create_task(self._wait_then_end(readers))
            watchdog = asyncio.get_running_loop().call_later(self._wall_s, self._timed_out)
            try:
                while (item := await self._queue.get()) is not None:
                    self._queued_bytes -= item[1]
                    self._room.set()
                    yield item[0]
                yield self._done(self._verdict(self._returncode), started)
            finally:
                watchdog.cancel()
                for task in (*readers, waiter):
                    task.cancel()
        finally:
            await self._finish()

    async def _wait_then_end(self, readers: list[asyncio.Task[None]]) -> None:
        self._returncode = await self._wait()
        # The worker may leave children holding the pipes open: give the readers a
        # moment for buffered lines, then end regardless.
        await asyncio.wait(readers, timeout=0.5)
        await self._queue.put(None)

    async def _read_events(self, stream: asyncio.StreamReader) -> None:
        while True:
            try:
                line = await stream.readline()
            except ValueError:  # a line over MAX_EVENT_BYTES
                self._stop("killed", f"a worker message over {human_bytes(MAX_EVENT_BYTES)}")
                return
            if not line:
                return
            self._event_bytes += len(line)
            if self._event_bytes > self._limits.event_bytes:
                self._stop("killed", f"results over {human_bytes(self._limits.event_bytes)}")
                return
            if self._end is not None:
                continue  # read to the end, relay nothing more
            event = self._gate.admit(line, (time.monotonic() - self._started) * 1000)
            if event is not None:
                await self._relay(event, len(line))
            elif self._gate.dropped >= MAX_REFUSED_LINES:
                self._stop(
                    "killed",
                    f"{self._gate.dropped} event lines refused (the first: "
                    f"{self._gate.first_refusal})",
                )

    async def _relay(self, event: dict[str, Any], size: int) -> None:
        if event["type"] in ("stdout", "stderr") and not self._count_user_output(
            len(event["text"].encode())
        ):
            return
        await self._put(event, size)

    async def _put(self, event: dict[str, Any], size: int) -> None:
        """Queue an event, waiting while the queue holds QUEUE_BYTES already."""
        while self._queued_bytes and self._queued_bytes + size > QUEUE_BYTES:
            self._room.clear()
            await self._room.wait()
        self._queued_bytes += size
        await self._queue.put((event, size))

    def _count_user_output(self, n: int) -> bool:
        self._user_bytes += n
        if self._user_bytes <= self._limits.output_bytes:
            return True
        self._stop("killed", f"output {human_bytes(self._limits.output_bytes)}")
        return False

    async def _read_stderr(self, stream: asyncio.StreamReader) -> None:
        # Output written below Python (C libraries, os.write) arrives here raw.
        while chunk := await stream.read(STDERR_CHUNK):
            if self._end is not None:
                continue
            if self._count_user_output(len(chunk)):
                text = chunk.decode("utf-8", "replace")
                event = {"type": "stderr", "pipeline": "main", "text": text, "stage": None}
                await self._put(event, len(chunk))

    def _done(self, end: tuple[DoneStatus, str], started: float) -> dict[str, Any]:
        """The run's ``done``, ``end`` its status and reason: the one place this relay
        makes it, with the lines the gate refused and, for a timeout, its stage."""
        status, reason = end
        stage = self._timeout_stage if status == "timeout" else None
        ms = (time.monotonic() - started) * 1000
        return done_event(status, ms, reason, self._gate.dropped, timeout_stage=stage)

    def _verdict(self, returncode: int | None) -> tuple[DoneStatus, str]:
        """How the run ended, once its stream has: what we decided (a cancel, a cap,
        the wall clock), a limit only the host sees, the engine's own ``done``
        (checked, not taken), or how the worker exited."""
        gate = self._gate
        if self._end is not None:
            return self._end
        limit = self._limit_hit()
        if limit is not None:
            return limit
        done = gate.worker_done
        if done is not None and done["status"] in ("ok", "error"):
            # "ok" only if no error event passed: the status is checked, not taken
            status: DoneStatus = "error" if gate.errors else done["status"]
            reason = "the code raised an error" if gate.errors else done["reason"]
            if gate.dropped:  # lines the engine did not write: what it shows may be forged
                return "tampered", self._tampered(reason)
            return status, reason
        if returncode is not None and returncode < 0:
            return "killed", f"the worker was killed by {_signal_name(returncode)}"
        why = f"the worker exited with status {returncode} before finishing"
        if gate.dropped:
            return "tampered", self._tampered(why)
        return "error", why

    def _tampered(self, reason: str) -> str:
        gate = self._gate
        refused = f"{gate.dropped} event lines refused, the first: {gate.first_refusal}"
        return f"{TAMPERED_REASON} ({refused}{'; ' + reason if reason else ''})"


class SupervisedRun(RunSupervisor):
    """One worker process running one request; iterate ``events()`` once."""

    def __init__(
        self,
        argv: Sequence[str],
        request: RunRequest,
        run_id: str,
        *,
        wall_s: float | None = None,
        limits: OutputLimits | None = None,
        env: dict[str, str] | None = None,
        pass_fds: Sequence[int] = (),
        cwd: str | None = None,
    ) -> None:
        super().__init__(request, run_id, wall_s=wall_s, limits=limits)
        self._argv = list(argv)
        self._env = env
        self._pass_fds = tuple(pass_fds)
        self._cwd = cwd
        self._proc: asyncio.subprocess.Process | None = None
        self._feeder: asyncio.Task[None] | None = None

    async def _spawn(self) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *self._argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._env,
            cwd=self._cwd,
            pass_fds=self._pass_fds,
            start_new_session=True,  # its own process group, killed as one
            limit=MAX_EVENT_BYTES,
        )

    async def _start(self) -> tuple[asyncio.StreamReader, asyncio.StreamReader]:
        self._proc = proc = await self._spawn()
        assert proc.stdin and proc.stdout and proc.stderr
        self._feeder = asyncio.create_task(self._feed(proc.stdin))
        return proc.stdout, proc.stderr

    async def _wait(self) -> int | None:
        assert self._proc is not None
        returncode = await self._proc.wait()
        self._kill()  # children left holding the pipes
        return returncode

    def _kill(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)

    async def _finish(self) -> None:
        self._kill()
        if self._feeder is not None:
            self._feeder.cancel()

    async def _feed(self, stdin: asyncio.StreamWriter) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.write(self._message())
            await stdin.drain()
            stdin.close()
