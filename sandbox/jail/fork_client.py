"""The host's side of a jail template: starts the template process, asks it for jails.

``JailTemplate`` starts ``command`` (the template's boot line, which imports what
jails need and then serves fork_server.py's loop) once, unjailed — it never runs
anyone's code — with the jail's environment (set by the template itself, from its
arguments, so that its own ``/proc/PID/environ``, which every process forked from it
shows too, is bubblewrap's launch one) and nothing of the server's, on the CPUs it
is given (one: what it imports must start no thread), and dies with this process. ``spawn`` sends one order and returns a ``ForkedJail``: the jail's monitor
(enter.py) as a process this side can wait for and kill. A template that dies takes
its jails with it; the next ``spawn`` starts a new one. Nothing here falls back to a
weaker jail: an order the template refuses, or a template that cannot start, is an
``OSError`` with its words.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import signal
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from sandbox.jail.bwrap import LAUNCH_ENV
from sandbox.jail.enter import JailSpec
from sandbox.jail.fork_server import MAX_BYTES

log = logging.getLogger(__name__)

#: What the template's and its jails' error pipes may log, per source.
_LOG_BYTES = 64 * 1024


class TemplateGone(OSError):
    """The template process ended; the jails it forked end with it."""


class ForkedJail:
    """A jail's monitor, as far as the pool needs a process: its pid (the jail's
    process group and session), its error stream, its end and exit status. Made
    before its order is sent, it is known by its pid from the moment the template's
    answer is read (``_forked``), so that its end, which the template tells after that
    answer, always finds it."""

    def __init__(self, stderr: asyncio.StreamReader) -> None:
        self.pid = 0  # set by _forked
        self.stdin = None
        self.stderr = stderr
        self.returncode: int | None = None
        self._pidfd = -1
        self._status: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def _forked(self, pid: int, pidfd: int) -> None:
        self.pid, self._pidfd = pid, pidfd

    def _ended(self, status: int) -> None:
        if not self._status.done():
            self._status.set_result(status)

    async def wait(self) -> int:
        if self.returncode is None:
            self.returncode = await asyncio.shield(self._status)
            if self._pidfd >= 0:
                with contextlib.suppress(OSError):
                    os.close(self._pidfd)
            self._pidfd = -1
        return self.returncode

    def kill(self) -> None:
        if self._pidfd >= 0 and self.returncode is None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)


class JailTemplate:
    """One template process and the jails it has forked."""

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str],
        cpus: Sequence[int] | None,
        start_s: float,
    ) -> None:
        self.command = list(command)
        self.env = dict(env)
        self.cpus = list(cpus) if cpus is not None else None
        self.start_s = start_s
        self.pid: int | None = None
        self._sock: socket.socket | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._starting: asyncio.Task[None] | None = None
        self._seq = itertools.count()
        #: orders sent and not yet answered: the jail each will be, and its answer
        self._waiting: dict[int, tuple[ForkedJail, asyncio.Future[None]]] = {}
        #: jails forked and not yet ended, by their monitor's pid
        self._jails: dict[int, ForkedJail] = {}
        self._reader: asyncio.Task[None] | None = None
        self._logger: asyncio.Task[None] | None = None
        #: how many templates were started (1 unless one died)
        self.starts = 0
        #: the running template's hello (its pid, threads, and what its command adds:
        #: a zygote template's ``seeded``, sandbox/zygote/seed.py)
        self.said: dict[str, Any] = {}

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None and self._sock is not None

    async def ensure_started(self) -> None:
        if self.alive:
            return
        if self._starting is None or self._starting.done():
            self._starting = asyncio.create_task(self._start())
        await asyncio.shield(self._starting)

    async def _start(self) -> None:
        mine, its = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cpus = ",".join(map(str, self.cpus)) if self.cpus else "-"
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.command, str(its.fileno()), cpus, json.dumps(self.env),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                env=LAUNCH_ENV,  # what /proc/PID/environ shows of it and its jails
                pass_fds=(its.fileno(),),
                start_new_session=True,
                cwd="/",
            )  # fmt: skip
        except BaseException:
            mine.close()
            raise
        finally:
            its.close()
        self.starts += 1
        assert self._proc.stderr is not None
        self._logger = asyncio.create_task(
            _log_stream(self._proc.stderr, f"jail template {self._proc.pid}")
        )
        mine.setblocking(False)
        loop = asyncio.get_running_loop()
        try:
            hello = await asyncio.wait_for(loop.sock_recv(mine, MAX_BYTES), self.start_s)
            said = json.loads(hello) if hello else {}
        except (TimeoutError, ValueError, OSError) as exc:
            mine.close()
            self._kill()
            raise TemplateGone(f"the jail template did not start: {exc or 'no answer'}") from None
        if not said.get("ready"):
            mine.close()
            self._kill()
            raise TemplateGone(f"the jail template did not start: {hello[:200]!r}")
        self._sock = mine
        self.pid = self._proc.pid
        self.said = said
        self._reader = asyncio.create_task(self._read())

    async def spawn(self, spec: JailSpec, seccomp_fd: int, fds: Mapping[str, int]) -> ForkedJail:
        """A new jail built from ``spec`` running the template's command with ``fds``
        (by role); its seccomp filter read from ``seccomp_fd``. The descriptors stay
        the caller's (the template gets copies)."""
        await self.ensure_started()
        assert self._sock is not None
        loop = asyncio.get_running_loop()
        err_r, err_w = os.pipe()
        stderr = asyncio.StreamReader(limit=2**16)
        try:
            transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(stderr), os.fdopen(err_r, "rb", buffering=0)
            )
        except BaseException:
            os.close(err_r)
            os.close(err_w)
            raise
        # Registered before the order goes: the reader binds it to its pid as it reads
        # the answer, before it can read that monitor's end.
        jail = ForkedJail(stderr)
        answer: asyncio.Future[None] = loop.create_future()
        seq = next(self._seq)
        self._waiting[seq] = (jail, answer)
        order = {"seq": seq, "spec": spec.to_json(), "roles": list(fds)}
        try:
            socket.send_fds(
                self._sock, [json.dumps(order).encode()], [err_w, seccomp_fd, *fds.values()]
            )
            await asyncio.shield(answer)
        except BaseException:
            if answer.done() and not answer.cancelled() and answer.exception() is None:
                jail.kill()  # forked, but its caller gave up on it (cancelled)
            else:
                # unanswered yet: the reader kills what it forks for this order
                answer.cancel()
            transport.close()
            raise
        finally:
            os.close(err_w)
        return jail

    async def _read(self) -> None:
        assert self._sock is not None
        loop = asyncio.get_running_loop()
        sock = self._sock
        why = "the jail template ended"
        try:
            while True:
                data, fds = await _recv_fds(loop, sock)
                if not data:
                    break
                message: dict[str, Any] = json.loads(data)
                if "exit" in message:
                    pid, status = int(message["exit"]), int(message["status"])
                    if (jail := self._jails.pop(pid, None)) is not None:
                        jail._ended(status)
                    continue
                jail, answer = self._waiting.pop(message.get("seq"), (None, None))  # type: ignore[arg-type]
                if jail is None or answer is None:
                    for fd in fds:
                        os.close(fd)
                    if message.get("error"):
                        log.error("jail template: %s", message["error"])
                    continue
                if "error" in message or len(fds) != 1:
                    for fd in fds:
                        os.close(fd)
                    if not answer.done():
                        answer.set_exception(
                            OSError(f"the jail template refused: {message.get('error')}")
                        )
                    continue
                jail._forked(int(message["pid"]), fds[0])
                self._jails[jail.pid] = jail
                if answer.cancelled():  # its spawn gave up: a jail nobody will use
                    jail.kill()
                else:
                    answer.set_result(None)
        except (OSError, ValueError) as exc:
            why = f"the jail template's channel failed: {exc}"
        self._gone(why)

    def _gone(self, why: str) -> None:
        log.warning("%s", why)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._kill()
        for _, answer in self._waiting.values():
            if not answer.done():
                answer.set_exception(TemplateGone(why))
        self._waiting.clear()
        for jail in self._jails.values():  # their monitors die with the template
            jail._ended(-signal.SIGKILL)
        self._jails.clear()

    def _kill(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
        self._gone("the jail template was closed")
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                await self._proc.wait()


async def _recv_fds(
    loop: asyncio.AbstractEventLoop, sock: socket.socket
) -> tuple[bytes, list[int]]:
    """One message and its descriptors, without blocking the loop."""
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_BYTES, 4)
            return data, fds
        except BlockingIOError:
            await _readable(loop, sock)


async def _readable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(sock.fileno(), wake)
    try:
        await ready
    finally:
        loop.remove_reader(sock.fileno())


async def _log_stream(stream: asyncio.StreamReader, who: str) -> None:
    logged = 0
    while chunk := await stream.read(4096):
        if logged < _LOG_BYTES:
            logged += len(chunk)
            log.info("%s says: %r", who, chunk.decode(errors="replace"))
