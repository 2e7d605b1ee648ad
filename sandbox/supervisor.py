"""The supervisor: starts one worker process for one run and relays its events.

It trusts nothing that comes out of the worker: it only reads the worker's pipes,
parses each line with a size cap, drops what is not a known event, counts the bytes
of user output, and enforces the wall clock from outside with SIGKILL of the whole
process group (an infinite ``lax.while_loop`` under ``jit`` ignores every other
signal). Whatever happens, the stream ends with exactly one ``done`` event.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.protocol import EVENT_FIELDS, PROTOCOL_VERSION, RunRequest, done_event

#: Largest single event line accepted from a worker (an HLO text of a big program).
MAX_EVENT_BYTES = 16 * 1024 * 1024
#: Largest raw stderr chunk relayed as one event.
STDERR_CHUNK = 4096


@dataclass(frozen=True)
class OutputLimits:
    #: total bytes of user output (stdout + stderr) before the run is killed
    output_bytes: int = 1024 * 1024
    #: total bytes of all events (texts of jaxprs, HLO, values...) before the run is killed
    event_bytes: int = 64 * 1024 * 1024


def worker_message(run_id: str, request: RunRequest) -> bytes:
    """What a worker reads on stdin: one JSON object."""
    message = {"protocol": PROTOCOL_VERSION, "run_id": run_id, "request": request.model_dump()}
    return json.dumps(message).encode()


def _human_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


class SupervisedRun:
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
        self.run_id = run_id
        self._argv = list(argv)
        self._request = request
        self._wall_s = request.timeout_s if wall_s is None else wall_s
        self._limits = limits or OutputLimits()
        self._env = env
        self._pass_fds = tuple(pass_fds)
        self._cwd = cwd
        self._proc: asyncio.subprocess.Process | None = None
        self._end: tuple[str, str] | None = None  # (status, reason) decided by us
        self._queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._user_bytes = 0
        self._event_bytes = 0
        self._worker_done: dict[str, Any] | None = None

    async def cancel(self) -> None:
        self._stop("cancelled", "cancelled by the client")

    def _stop(self, status: str, reason: str) -> None:
        if self._end is None:
            self._end = (status, reason)
        self._kill()

    def _kill(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)

    async def events(self) -> AsyncIterator[dict[str, Any]]:
        started = time.monotonic()
        try:
            self._proc = await asyncio.create_subprocess_exec(
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
        except OSError as exc:
            yield done_event("error", 0.0, f"the worker could not start: {exc}")
            return
        proc = self._proc
        assert proc.stdin and proc.stdout and proc.stderr
        readers = [
            asyncio.create_task(self._read_events(proc.stdout)),
            asyncio.create_task(self._read_stderr(proc.stderr)),
        ]
        feeder = asyncio.create_task(self._feed(proc.stdin))
        waiter = asyncio.create_task(self._wait(proc, readers))
        watchdog = asyncio.get_running_loop().call_later(
            self._wall_s, self._stop, "timeout", f"wall clock {self._wall_s:g} s"
        )
        try:
            while (event := await self._queue.get()) is not None:
                yield event
            yield self._final_done(proc.returncode, (time.monotonic() - started) * 1000)
        finally:
            watchdog.cancel()
            self._kill()
            for task in (*readers, feeder, waiter):
                task.cancel()

    async def _feed(self, stdin: asyncio.StreamWriter) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.write(worker_message(self.run_id, self._request))
            await stdin.drain()
            stdin.close()

    async def _wait(
        self, proc: asyncio.subprocess.Process, readers: list[asyncio.Task[None]]
    ) -> None:
        await proc.wait()
        # The worker may leave children holding the pipes open: give the readers a
        # moment for buffered lines, then end regardless.
        self._kill()
        await asyncio.wait(readers, timeout=0.5)
        await self._queue.put(None)

    async def _read_events(self, stream: asyncio.StreamReader) -> None:
        while True:
            try:
                line = await stream.readline()
            except ValueError:  # a line over MAX_EVENT_BYTES
                self._stop("killed", f"a worker message over {_human_bytes(MAX_EVENT_BYTES)}")
                return
            if not line:
                return
            self._event_bytes += len(line)
            if self._event_bytes > self._limits.event_bytes:
                self._stop("killed", f"results over {_human_bytes(self._limits.event_bytes)}")
                return
            event = self._parse(line)
            if event is not None:
                await self._relay(event)

    def _parse(self, line: bytes) -> dict[str, Any] | None:
        try:
            event = json.loads(line)
        except ValueError:
            return None
        if not isinstance(event, dict) or event.get("type") not in EVENT_FIELDS:
            return None
        return event

    async def _relay(self, event: dict[str, Any]) -> None:
        if self._end is not None:
            return
        if event["type"] == "done":
            self._worker_done = event
            return
        if event["type"] in ("stdout", "stderr"):
            text = event.get("text")
            if not isinstance(text, str):
                return
            if not self._count_user_output(len(text.encode())):
                return
        await self._queue.put(event)

    def _count_user_output(self, n: int) -> bool:
        self._user_bytes += n
        if self._user_bytes <= self._limits.output_bytes:
            return True
        self._stop("killed", f"output {_human_bytes(self._limits.output_bytes)}")
        return False

    async def _read_stderr(self, stream: asyncio.StreamReader) -> None:
        # Output written below Python (C libraries, os.write) arrives here raw.
        while chunk := await stream.read(STDERR_CHUNK):
            if self._end is not None:
                continue
            if self._count_user_output(len(chunk)):
                text = chunk.decode("utf-8", "replace")
                await self._queue.put(
                    {"type": "stderr", "pipeline": "main", "text": text, "stage": None}
                )

    def _final_done(self, returncode: int | None, ms: float) -> dict[str, Any]:
        if self._end is not None:
            return done_event(self._end[0], ms, self._end[1])
        done = self._worker_done
        if done is not None and done.get("status") in ("ok", "error"):
            return done_event(done["status"], ms, str(done.get("reason", ""))[:1000])
        if returncode is not None and returncode < 0:
            return done_event("killed", ms, f"the worker was killed by {_signal_name(returncode)}")
        return done_event(
            "error", ms, f"the worker exited with status {returncode} before finishing"
        )
