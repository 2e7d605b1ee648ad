"""One warm engine process for a test session: the pure engine tests' runs without a
process start and a JAX import each.

The engine process imports JAX once (``prepare()``, as a zygote does, without the jail)
and forks a child per run, which runs the worker message exactly as ``python -m
sandbox.engine`` does. The supervisor in front of it is the real one: the run goes
through a SubprocessPool whose "interpreter" is a stand-in (warm_engine_client.py) that
passes its stdin, stdout and stderr to the engine and exits as the child exits, so the
event gate, the wall clock, the output limits and an abrupt exit are what they are for
a fresh worker. The engine runs in its own process: the test process never imports
JAX (the layering test checks the backend in a subprocess anyway).

What differs from a fresh worker: the child's environment is the engine's, taken when
the session started, so a test that changes the environment for one run must use the
fresh ``run_events`` (tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.process import ROOT

CLIENT = Path(__file__).with_name("warm_engine_client.py")


class WarmEngine:
    """The test side: start() the engine process, run(request) -> its events, stop()."""

    def __init__(self, python: str = sys.executable) -> None:
        """``python``: the engine's interpreter (another JAX version's environment)."""
        self.python = python
        self.dir = Path(tempfile.mkdtemp(prefix="jaxplay-warm-engine-"))
        self.socket = self.dir / "engine.sock"
        self.log = self.dir / "engine.log"
        self.proc: subprocess.Popen[bytes] | None = None
        # The "interpreter" the SubprocessPool starts: the stand-in, on this socket.
        self.worker = self.dir / "worker"
        self.worker.write_text(
            f'#!/bin/sh\nexec "{sys.executable}" -S "{CLIENT}" "{self.socket}" "$@"\n'
        )
        self.worker.chmod(0o755)

    def start(self, timeout_s: float = 120.0) -> WarmEngine:
        argv = [self.python, "-m", "tests.support.warm_engine", str(self.socket)]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout_s
        while not self.socket.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the warm engine did not start: {self.log.read_text()}")
            time.sleep(0.05)
        return self

    def run(self, request: Any) -> list[dict[str, Any]]:
        from sandbox.pool.subprocess_pool import SubprocessPool
        from sandbox.protocol import RunRequest

        req = request if isinstance(request, RunRequest) else RunRequest.model_validate(request)

        async def go() -> list[dict[str, Any]]:
            pool = SubprocessPool(max_concurrent=1, python=str(self.worker))
            handle = await pool.submit(req, tenant="tests")
            return [event async for event in handle.events()]

        return asyncio.run(go())

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


# --- the engine process --------------------------------------------------------------


def _child(listener: socket.socket, conns: list[socket.socket], fds: list[int]) -> None:
    """In the forked child: the stand-in's stdin, stdout and stderr become ours, then
    what ``python -m sandbox.engine`` does after its imports (sandbox/engine/worker.py)."""
    code = 1
    try:
        listener.close()
        for conn in conns:
            conn.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        from sandbox.engine.worker import MAX_MESSAGE_BYTES, run_message

        event_fd = os.dup(1)
        os.dup2(2, 1)
        raw = sys.stdin.buffer.read(MAX_MESSAGE_BYTES + 1)
        if len(raw) > MAX_MESSAGE_BYTES:
            print("jaxplay worker: message too large", file=sys.stderr)
            code = 2
        else:
            code = run_message(json.loads(raw), event_fd)
    except BaseException as exc:  # a child must never return into the engine's loop
        if isinstance(exc, SystemExit) and isinstance(exc.code, int):
            code = exc.code
        else:
            import traceback

            traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve(path: str) -> None:
    from jax._src import source_info_util

    from sandbox.engine.worker import prepare

    prepare()
    # The engine's frames never show in a program's locations (warmup.EXCLUDED_FRAMES,
    # all of sandbox/); the frames of this file, under every run, must not either.
    source_info_util.register_exclusion(str(Path(__file__).resolve()))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    listener.listen(16)
    os.rename(path + ".tmp", path)  # the socket appears once the engine is warm
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, None)
    runs: dict[socket.socket, tuple[int, int]] = {}  # stand-in -> (child pid, pidfd)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        for key, _ in selector.select():
            if key.fileobj is listener:
                conn, _ = listener.accept()
                _, fds, _, _ = socket.recv_fds(conn, 1, 3)
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _child(listener, [*runs, conn], fds)
                for fd in fds:
                    os.close(fd)  # the child's now: the supervisor must see its EOF
                pidfd = os.pidfd_open(pid)
                runs[conn] = (pid, pidfd)
                selector.register(conn, selectors.EVENT_READ, ("conn", conn))
                selector.register(pidfd, selectors.EVENT_READ, ("child", conn))
                continue
            kind, conn = key.data
            if conn not in runs:  # its child and its stand-in ended together
                continue
            pid, pidfd = runs[conn]
            if kind == "conn":  # the stand-in is gone (killed): so is its run
                os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(status)
            if kind == "child":
                try:
                    conn.sendall(struct.pack("!i", code))
                except OSError:
                    pass
            selector.unregister(conn)
            selector.unregister(pidfd)
            os.close(pidfd)
            conn.close()
            del runs[conn]


if __name__ == "__main__":
    serve(sys.argv[1])
