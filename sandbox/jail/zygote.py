"""The zygote: runs INSIDE a jail, imports JAX once, then forks one child per run.

Started as ``python -I -B -c "..." CTL_FD MODULE RUN_FILTER_FD LOG_FD`` by the warm
pool (``-`` for a descriptor it does not pass). Its own output (fds 1 and 2) goes to
LOG_FD, a pipe only the pool reads. It imports the engine
and calls its ``prepare()`` (JAX imported and tracing warmed, backend not started:
forking stays safe), freezes the heap, says ``ready`` and waits for orders on the
control socket (a SOCK_SEQPACKET unix socket from the supervisor):

- ``{"op": "run", "warm": bool}`` with three file descriptors (SCM_RIGHTS): a memfd
  holding the worker message, the write end of the run's event pipe and of its
  stderr pipe. A child reads the message and calls the engine's
  ``run_message(message, event_fd)`` with fds 1 and 2 on the stderr pipe; the zygote
  answers ``{"op": "started", "pid"}``. The child is the pre-forked warm one (its
  backend already started, for one CPU device) when ``warm`` says the request fits
  it, else a cold one forked now. ``{"op": "warm"}`` says a warm child is ready.
- ``{"op": "kill"}``: SIGKILL the current run (a cancel).

When the child is gone the zygote kills every other process left in the jail
(``kill(-1)``; it is the jail's child subreaper, so orphans come back to it),
empties ``/tmp`` and ``/dev/shm``, and answers ``{"op": "exited", "status",
"clean"}``. ``clean`` false means something survived: the supervisor retires the
jail. The zygote itself never runs user code and is not dumpable, so a run's
processes (same uid) cannot read or write its memory through /proc. Every child
stacks the run filter (``RUN_FILTER_FD``, see sandbox/jail/seccomp.py) on the jail's
before anything else, so a run cannot signal the zygote either. End of file on the
control socket ends it.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import inspect
import json
import os
import select
import signal
import socket
import sys
import time
import traceback
from typing import Any

from sandbox.jail import compile_cache, seccomp
from sandbox.jail.seccomp import ZYGOTE_PID

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
WIPED = ("/tmp", "/dev/shm")
#: How long the zygote waits for its first warm child before saying ready anyway.
WARM_S = 10.0
#: How long after a run the zygote waits before forking the next warm child.
PREFORK_DELAY_S = 0.05
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


def _fd_arg(argv: list[str], i: int) -> int | None:
    return int(argv[i]) if len(argv) > i and argv[i] != "-" else None


def main(argv: list[str]) -> None:
    ctl = socket.socket(fileno=int(argv[1]))
    module = argv[2] if len(argv) > 2 else "sandbox.engine.worker"
    run_filter_fd, log_fd = _fd_arg(argv, 3), _fd_arg(argv, 4)
    if log_fd is not None:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
    run_filter = None
    if run_filter_fd is not None:
        with os.fdopen(run_filter_fd, "rb") as f:
            run_filter = f.read()
        if os.getpid() != ZYGOTE_PID:  # the run filter protects pid 2
            raise SystemExit(f"the zygote is pid {os.getpid()}, not {ZYGOTE_PID}: not starting")
    _prctl(PR_SET_DUMPABLE, 0)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    started = time.monotonic()
    worker = importlib.import_module(module)
    prepare = getattr(worker, "prepare", None)
    if prepare is not None:
        if "thorough" in inspect.signature(prepare).parameters:
            prepare(thorough=True)  # warm what a run's first use of JAX pays, once
        else:
            prepare()
    _warm_backend_discovery()
    cache_on = compile_cache.enable()  # the tenant's own, in its jail: before any child compiles
    gc.collect()
    gc.freeze()  # children share these pages instead of copying them on first GC
    ready = {
        "op": "ready",
        "ms": (time.monotonic() - started) * 1000,
        "rss_kib": _rss_kib(),
        "threads": len(os.listdir("/proc/self/task")),  # must be 1: we fork
        "compile_cache": cache_on,
    }
    zygote = Zygote(ctl, worker, run_filter)
    # A new tenant's first run comes as soon as the zygote is ready: its first warm
    # child says warm only once all its warm-ups are done, so none is in its way.
    zygote.prefork(settle=True)
    ready["warm"] = zygote.wait_warm(WARM_S)  # so a new tenant's first run finds it warm
    _send(ctl, ready)
    zygote.loop()
    os._exit(0)


def _warm_backend_discovery() -> None:
    """Find JAX's PJRT plugins now (an entry-point scan, ~10 ms) rather than in every
    child. It registers factories and creates no backend and no thread."""
    try:
        from jax._src import xla_bridge

        xla_bridge._discover_and_register_pjrt_plugins()
    except Exception:  # a private API: if it moves, each child does it itself
        pass


class Zygote:
    """The zygote's loop, and its one pre-forked warm child (pid, socket) if any."""

    def __init__(self, ctl: socket.socket, worker: Any, run_filter: bytes | None = None) -> None:
        self.ctl, self.worker = ctl, worker
        self.run_filter = run_filter
        self.warm: tuple[int, socket.socket] | None = None
        self._warmed: set[int] = set()  # warm children that said they are ready
        self._clean = True  # the last cleanup succeeded: a warm child may be forked
        self._prefork_at = 0.0
        self._kept = kept_paths()

    def loop(self) -> None:
        while True:
            waiting = [self.ctl.fileno()]
            timeout = None
            if self.warm is not None and self.warm[0] not in self._warmed:
                waiting.append(self.warm[1].fileno())
            elif self.warm is None and self._clean:
                timeout = max(0.0, self._prefork_at - time.monotonic())
            ready, _, _ = select.select(waiting, [], [], timeout)
            if self.ctl.fileno() not in ready:
                if self.warm is None:
                    self.prefork()  # no run came within PREFORK_DELAY_S
                elif self.wait_warm(0):
                    _send(self.ctl, {"op": "warm"})
                else:  # it died warming up: the next run gets a cold child
                    self.warm[1].close()
                    self.warm = None
                    self._clean = False
                continue
            try:
                data, fds, _, _ = socket.recv_fds(self.ctl, 4096, 4)
            except OSError:
                return
            if not data:
                return
            message = json.loads(data)
            if message.get("op") == "run" and len(fds) == 3:
                self.serve(fds, warm_ok=message.get("warm") is True)
            else:
                for fd in fds:
                    os.close(fd)

    def prefork(self, settle: bool = False) -> None:
        """Fork the next run's child now: it starts the backend and compiles a little
        while nobody waits, then blocks until a run's descriptors arrive. It never
        ran user code before its run, like any child; it is made after the cleanup of
        the previous run, so the jail is empty but for it."""
        if self.warm is not None:
            return
        mine, its = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            mine.close()
            _become_child(self.ctl, self.run_filter)
            try:
                _warm_up(self.worker, its, settle)
                _, fds, _, _ = socket.recv_fds(its, 16, 4)
            except OSError:
                fds = []
            if len(fds) != 3:
                os._exit(0)
            its.close()
            _run(self.worker, *fds)
        its.close()
        self.warm = (pid, mine)

    def wait_warm(self, timeout_s: float) -> bool:
        """Whether the warm child has finished warming up (waiting up to timeout_s)."""
        if self.warm is None:
            return False
        pid, sock = self.warm
        if pid in self._warmed:
            return True
        sock.settimeout(timeout_s)
        try:
            if sock.recv(16) == b"warm":
                self._warmed.add(pid)
                return True
        except OSError:
            pass
        finally:
            sock.settimeout(None)
        return False

    def serve(self, fds: list[int], warm_ok: bool) -> None:
        pid: int | None = None
        # A warm child still warming up (runs back to back) is not waited for: a cold
        # child is as fast, once the warm one is out of the way.
        if warm_ok and self.warm is not None and self.wait_warm(0):
            pid, sock = self.warm
            try:
                socket.send_fds(sock, [b"run"], fds)
            except OSError:  # it died (killed from inside the jail?)
                pid = None
            sock.close()
            self.warm = None
        warm = pid is not None
        if pid is None:
            if self.warm is not None:  # not used: out of the way (CPU, pids) at once
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.warm[0], signal.SIGKILL)
                self.warm[1].close()  # before the fork: the cold child must not inherit it
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(self.warm[0], 0)  # no zombie in the run's view of /proc
                self.warm = None
            pid = self._fork_cold(fds)
        for fd in fds:
            os.close(fd)
        _send(self.ctl, {"op": "started", "pid": pid, "warm": warm})
        pidfd = os.pidfd_open(pid)
        supervisor_gone = False
        while True:
            ready, _, _ = select.select([self.ctl.fileno(), pidfd], [], [])
            if pidfd in ready:
                break
            data = self.ctl.recv(4096)
            if not data or json.loads(data).get("op") == "kill":
                supervisor_gone = not data
                os.kill(pid, signal.SIGKILL)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        if self.warm is not None:  # unused: the cleanup kills it with the rest
            self.warm[1].close()
            self.warm = None
        self._warmed.clear()
        clean = _cleanup(self._kept)
        if supervisor_gone:
            os._exit(0)
        # The next warm child is forked a moment later, unless a run comes first: runs
        # back to back would only find it half-warm and have to kill it.
        self._clean = clean
        self._prefork_at = time.monotonic() + PREFORK_DELAY_S
        _send(
            self.ctl, {"op": "exited", "status": os.waitstatus_to_exitcode(status), "clean": clean}
        )

    def _fork_cold(self, fds: list[int]) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _become_child(self.ctl, self.run_filter)
            _run(self.worker, *fds)
        return pid


def _become_child(ctl: socket.socket, run_filter: bytes | None) -> None:
    """What every run's child does first, before anything else."""
    try:
        ctl.close()
        os.setsid()
        _prctl(PR_SET_CHILD_SUBREAPER, 0)
        _prctl(PR_SET_DUMPABLE, 1)  # like any fresh process; the zygote stays undumpable
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        if run_filter is not None:
            seccomp.load(run_filter)  # still one thread: it covers all that follows
    except BaseException:
        traceback.print_exc()
        os._exit(70)


#: What a warm child runs (events to /dev/null) before it waits for its real run, when
#: the worker module has no ``warm_backend``: a small grad and jit through every view
#: but timing, on a shape (2,) that requests rarely use, so that what it warms is JAX's
#: and XLA's one-time set-up (backend, first compile and execution, lowering and
#: printing paths), not a cached result.
WARM_MESSAGE = {
    "protocol": 1,
    "run_id": "warm-up",
    "request": {
        "code": "import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sum(jnp.sin(x) ** 2)\n",
        "args": "(jnp.full((2,), 0.5),)",
        "transforms": [{"name": "grad"}, {"name": "jit"}],
        "outputs": ["jaxpr", "stablehlo", "hlo", "value", "cost"],
        "backend": "cpu",
    },
}


def _warm_up(worker: Any, sock: socket.socket, settle: bool = False) -> None:
    """A warm child's warm-up: start the backend and run the worker's warm-up request,
    say ``warm`` on ``sock``, then run the worker's further warm-ups (a matmul's first
    compile and run) one at a time for as long as no run has arrived, and last collect
    and freeze the heap, so that the run starts with no garbage to collect. A run that
    arrives waits for the step in progress at most (tens of ms). ``settle``: say
    ``warm`` only after all of it (no run can come before)."""
    steps = _warm_backend(worker)
    if not settle:
        sock.send(b"warm")
    for step in [*steps, _freeze_heap]:
        if select.select([sock], [], [], 0)[0]:  # the run is here: no more warming
            return
        try:
            step()
        except Exception:
            traceback.print_exc()
    if settle:
        sock.send(b"warm")


def _freeze_heap() -> None:
    gc.collect()
    gc.freeze()


def _warm_backend(worker: Any) -> list[Any]:
    """Start the CPU backend with the defaults a run asks for (one device) and run a
    small request: the first compile and run in a process pay ~40 ms of set-up.
    Returns the further warm-up steps the worker offers (callables)."""
    try:
        warm = getattr(worker, "warm_backend", None)
        if warm is not None:
            return list(warm() or [])
        with open(os.devnull, "w") as sink:
            saved = sys.stdout, sys.stderr
            try:
                worker.run_message(WARM_MESSAGE, sink.fileno())
            finally:
                sys.stdout, sys.stderr = saved
    except Exception:
        traceback.print_exc()
    return []


def _run(worker: Any, msg_fd: int, event_fd: int, err_fd: int) -> None:
    code = 70
    try:
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


def kept_paths(tops: tuple[str, ...] = WIPED) -> dict[str, int]:
    """Directories under the wiped places that must stay, with their modes: bind
    mounts (the runtime, when a checkout lives under /tmp) and the directories bwrap
    made on the way to them. Read once, at start: nothing in the jail can mount."""
    kept: dict[str, int] = {}
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4].replace("\\040", " ") for line in f]
    for point in points:
        for top in tops:
            if point.startswith(top + "/"):
                path = point
                while path != top:
                    kept.setdefault(path, os.lstat(path).st_mode & 0o7777)
                    path = os.path.dirname(path)
    return kept


def _cleanup(kept: dict[str, int]) -> bool:
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
        # The compilation cache is not wiped, but only what JAX writes may stay in it.
        if os.path.ismount(compile_cache.CACHE_DIR) and not compile_cache.sane():
            os.chmod(compile_cache.CACHE_DIR, 0o700)
            wipe(compile_cache.CACHE_DIR, deadline, {})
        for top in WIPED:
            os.chmod(top, 0o700)  # the run owns it and may have locked itself out
            wipe(top, deadline, kept)
    except (OSError, RecursionError, TimeoutError):
        return False
    return True


def wipe(path: str, deadline: float, kept: dict[str, int]) -> None:
    """Remove everything under ``path`` but the ``kept`` directories, which are
    emptied of anything else and get their modes back."""
    if time.monotonic() > deadline:
        raise TimeoutError
    with os.scandir(path) as entries:
        for entry in list(entries):
            if entry.path in kept:
                if not os.path.ismount(entry.path):  # a directory on the way to one
                    os.chmod(entry.path, 0o700)
                    wipe(entry.path, deadline, kept)
                    os.chmod(entry.path, kept[entry.path])
            elif entry.is_dir(follow_symlinks=False):
                os.chmod(entry.path, 0o700)
                wipe(entry.path, deadline, kept)
                os.rmdir(entry.path)
            else:
                os.unlink(entry.path)


if __name__ == "__main__":
    main(sys.argv)
