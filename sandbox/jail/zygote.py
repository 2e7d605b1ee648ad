"""The zygote: runs INSIDE a jail, imports JAX once, then forks one child per run.

Started as ``python -I -B -c "..." CTL_FD`` by the warm pool. It imports the engine
and calls its ``prepare()`` (JAX imported and tracing warmed, backend not started:
forking stays safe), freezes the heap, says ``ready`` and waits for orders on the
control socket (a SOCK_SEQPACKET unix socket from the supervisor):

- ``{"op": "run"}`` with three file descriptors (SCM_RIGHTS): a memfd holding the
  worker message, the write end of the run's event pipe and of its stderr pipe.
  The zygote forks a child that reads the message and calls the engine's
  ``run_message(message, event_fd)`` with fds 1 and 2 on the stderr pipe; it
  answers ``{"op": "started", "pid"}``.
- ``{"op": "kill"}``: SIGKILL the current run (a cancel).

When the child is gone the zygote kills every other process left in the jail
(``kill(-1)``; it is the jail's child subreaper, so orphans come back to it),
empties ``/tmp`` and ``/dev/shm``, and answers ``{"op": "exited", "status",
"clean"}``. ``clean`` false means something survived: the supervisor retires the
jail. The zygote itself never runs user code and is not dumpable, so a run's
processes (same uid) cannot read or write its memory through /proc. End of file on
the control socket ends it.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import time
import traceback
from typing import Any

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
WIPED = ("/tmp", "/dev/shm")
CLEANUP_S = 2.0

_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> None:
    if _libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option})")


def _send(ctl: socket.socket, message: dict[str, Any]) -> None:
    ctl.send(json.dumps(message).encode())


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main(argv: list[str]) -> None:
    ctl = socket.socket(fileno=int(argv[1]))
    module = argv[2] if len(argv) > 2 else "sandbox.engine.worker"
    _prctl(PR_SET_DUMPABLE, 0)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    started = time.monotonic()
    worker = importlib.import_module(module)
    prepare = getattr(worker, "prepare", None)
    if prepare is not None:
        prepare()
    _warm_backend_discovery()
    gc.collect()
    gc.freeze()  # children share these pages instead of copying them on first GC
    ready = {
        "op": "ready",
        "ms": (time.monotonic() - started) * 1000,
        "rss_kib": _rss_kib(),
        "threads": len(os.listdir("/proc/self/task")),  # must be 1: we fork
    }
    _send(ctl, ready)
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(ctl, 4096, 4)
        except OSError:
            break
        if not data:
            break
        message = json.loads(data)
        if message.get("op") == "run" and len(fds) == 3:
            _serve(ctl, worker, *fds)
        else:
            for fd in fds:
                os.close(fd)
    os._exit(0)


def _warm_backend_discovery() -> None:
    """Find JAX's PJRT plugins now (an entry-point scan, ~10 ms) rather than in every
    child. It registers factories and creates no backend and no thread."""
    try:
        from jax._src import xla_bridge

        xla_bridge._discover_and_register_pjrt_plugins()
    except Exception:  # a private API: if it moves, each child does it itself
        pass


def _serve(ctl: socket.socket, worker: Any, msg_fd: int, event_fd: int, err_fd: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(ctl, worker, msg_fd, event_fd, err_fd)
    for fd in (msg_fd, event_fd, err_fd):
        os.close(fd)
    _send(ctl, {"op": "started", "pid": pid})
    pidfd = os.pidfd_open(pid)
    supervisor_gone = False
    while True:
        ready, _, _ = select.select([ctl.fileno(), pidfd], [], [])
        if pidfd in ready:
            break
        data = ctl.recv(4096)
        if not data or json.loads(data).get("op") == "kill":
            supervisor_gone = not data
            os.kill(pid, signal.SIGKILL)
    os.close(pidfd)
    _, status = os.waitpid(pid, 0)
    clean = _cleanup()
    if supervisor_gone:
        os._exit(0)
    _send(ctl, {"op": "exited", "status": os.waitstatus_to_exitcode(status), "clean": clean})


def _child(ctl: socket.socket, worker: Any, msg_fd: int, event_fd: int, err_fd: int) -> None:
    code = 70
    try:
        ctl.close()
        os.setsid()
        _prctl(PR_SET_CHILD_SUBREAPER, 0)
        _prctl(PR_SET_DUMPABLE, 1)  # like any fresh process; the zygote stays undumpable
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        with os.fdopen(msg_fd, "rb") as f:
            message = json.loads(f.read())
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(err_fd, 1)
        os.dup2(err_fd, 2)
        os.close(err_fd)
        code = worker.run_message(message, event_fd)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else 70)


def _others() -> list[int]:
    me = os.getpid()
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]


def _cleanup() -> bool:
    """Kill whatever the run left in the jail and empty its writable places."""
    deadline = time.monotonic() + CLEANUP_S
    while _others():
        try:
            os.kill(-1, signal.SIGKILL)  # everything we may signal in this pid namespace
        except ProcessLookupError:
            pass
        while True:  # reap what came back to us (we are the subreaper)
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    try:
        for top in WIPED:
            os.chmod(top, 0o700)  # the run owns it and may have locked itself out
            _wipe(top, deadline)
    except (OSError, RecursionError, TimeoutError):
        return False
    return True


def _wipe(path: str, deadline: float) -> None:
    if time.monotonic() > deadline:
        raise TimeoutError
    with os.scandir(path) as entries:
        for entry in list(entries):
            if entry.is_dir(follow_symlinks=False):
                os.chmod(entry.path, 0o700)
                _wipe(entry.path, deadline)
                os.rmdir(entry.path)
            else:
                os.unlink(entry.path)


if __name__ == "__main__":
    main(sys.argv)
