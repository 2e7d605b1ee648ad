"""The zygote: runs INSIDE a jail, imports JAX once, then forks children for runs.

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

``ready`` carries ``worker``: what the first warm child said it runs on (the
engine's ``describe()``, after its warm-up and before any run; ``warm`` carries it
instead when it came after ``ready``), and ``platforms`` (the jail's
``JAX_PLATFORMS``). The pool puts that in every run's ``accepted``, never what a
run's own line claims. No child's word is taken once a run was served.
- ``{"op": "kill"}``: SIGKILL the current run (a cancel).

When the child is gone the zygote kills every other process left in the jail
(``kill(-1)``; it is the jail's child subreaper, so orphans come back to it),
empties ``/tmp`` and ``/dev/shm``, and answers ``{"op": "exited", "status",
"clean", "judging"}``. ``clean`` false means something survived: the supervisor
retires the jail.

A run order may carry ``"keep": {"runs", "rss_kib"}``: then a warm child that took
its baseline (sandbox/jail/reuse.py; it says ``base`` on its socket, or is told to
``hurry``) gets ``run`` rather than ``once``, and when its run ends it does not
exit: it lets go of the run's pipes and says ``{"code"}``; if no other process is
left the zygote spares it in the cleanup, answers ``exited`` with ``judging`` true,
then waits for the child's own check (``{"changes"}``), compares the kernel's view
of it, and says ``{"op": "kept", "kept", "why"}``. A kept child is the next run's
warm child; ``started`` says how many runs it ``reused``. The zygote itself never runs user code and is not dumpable, so a run's
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

from sandbox.jail import compile_cache, reuse, seccomp
from sandbox.jail.seccomp import ZYGOTE_PID

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
WIPED = ("/tmp", "/dev/shm")
#: How long the zygote waits for its first warm child before saying ready anyway.
WARM_S = 10.0
#: How long after a run the zygote waits before forking the next warm child.
PREFORK_DELAY_S = 0.05
CLEANUP_S = 2.0
#: CPU time (clock ticks, 10 ms each) a kept process may have used while it waited
#: for its next run: more means work of the last run still going on (an operation
#: dispatched and never waited for), and the process is not used again.
IDLE_TICKS = 5
#: How long a run that may keep its process waits for a warm child still warming up
#: to take its baseline (it skips what warm-ups remain; the baseline takes ~50 ms).
HURRY_S = 0.5
#: How long a kept process's check of itself after a run may take (~10-25 ms).
CHECK_S = 2.0

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
        "identity_check": reuse.IDENTITY_CHECK,  # "c", or "python" where not built
    }
    zygote = Zygote(ctl, worker, run_filter)
    # A new tenant's first run comes as soon as the zygote is ready: its first warm
    # child says warm only once all its warm-ups are done, so none is in its way.
    zygote.prefork(settle=True)
    ready["warm"] = zygote.wait_warm(WARM_S)  # so a new tenant's first run finds it warm
    # What this jail runs on, as its first warm child described it before any run:
    # the pool says this in every run's accepted, never what a run claims.
    ready["worker"] = zygote.identity
    ready["platforms"] = os.environ.get("JAX_PLATFORMS", "")
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
        #: what the first warm child said it runs on (``describe``), before any run
        self.identity: dict[str, Any] | None = None
        self._ran = False  # a run was served: no child's word is taken any more
        self._prefork_at = 0.0
        self._kept = kept_paths()
        #: processes kept across runs (reuse.py): the kernel's view of each before its
        #: first run, the runs each served, its CPU ticks when its last run ended
        self._base: dict[int, dict[str, str]] = {}
        self._served: dict[int, int] = {}
        self._ticks: dict[int, int] = {}

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
                    said: dict[str, Any] = {"op": "warm"}
                    if self.identity is not None and not self._ran:
                        said["worker"] = self.identity  # it came after ready (a slow start)
                    _send(self.ctl, said)
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
                keep = message.get("keep")
                self.serve(
                    fds, message.get("warm") is True, keep if isinstance(keep, dict) else None
                )
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
            watch = None
            try:
                watch = _warm_up(self.worker, its, settle)
                order, fds = _next_order(its)
            except OSError:
                fds = []
            if len(fds) != 3:
                os._exit(0)
            if not order.startswith(b"run ") or watch is None:  # once: one run, then exit
                its.close()
                _run(self.worker, *fds)
            else:
                _serve_runs(self.worker, its, watch, order, fds)
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
            said = sock.recv(4096)
            if said.split(b" ", 1)[0] == b"warm":
                self._warmed.add(pid)
                if self.identity is None and not self._ran and said != b"warm":
                    self._learn(said[5:])
                return True
        except OSError:
            pass
        finally:
            sock.settimeout(None)
        return False

    def _learn(self, data: bytes) -> None:
        """The warm child's description of what it runs on (``describe``), taken only
        before the zygote served any run: no run's code has been in any process yet."""
        try:
            described = json.loads(data)
        except ValueError:
            return
        if isinstance(described, dict) and all(
            isinstance(k, str) and isinstance(v, str | int) for k, v in described.items()
        ):
            self.identity = described

    def serve(self, fds: list[int], warm_ok: bool, keep: dict[str, Any] | None = None) -> None:
        """One run: in the warm child (or the process kept from the last run), else in
        a cold child. ``keep`` (``runs``, ``rss_kib``): the process may be kept for
        the next run of the tenant if the run ends well and nothing changed."""
        self._ran = True
        pid: int | None = None
        kept_sock: socket.socket | None = None
        token = b""
        # A warm child still warming up (runs back to back) is not waited for: a cold
        # child is as fast, once the warm one is out of the way.
        if warm_ok and self.warm is not None and self.wait_warm(0) and self._idle(self.warm[0]):
            pid, sock = self.warm
            # a process kept from the last run waits for "run" only (and goes after it
            # if keeping is off now)
            keeping = (keep is not None or pid in self._served) and self._keepable(pid, sock)
            token = os.urandom(8).hex().encode()  # its words about this run carry it
            try:
                socket.send_fds(sock, [b"run " + token if keeping else b"once"], fds)
            except OSError:  # it died (killed from inside the jail?)
                self._forget(pid)
                pid = None
            if keeping and pid is not None:
                kept_sock = sock
            else:
                sock.close()
            self.warm = None
        warm = pid is not None
        reused = self._served.get(pid, 0) if pid is not None else 0
        if pid is None:
            if self.warm is not None:  # not used: out of the way (CPU, pids) at once
                self._forget(self.warm[0])
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.warm[0], signal.SIGKILL)
                self.warm[1].close()  # before the fork: the cold child must not inherit it
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(self.warm[0], 0)  # no zombie in the run's view of /proc
                self.warm = None
            pid = self._fork_cold(fds)
        for fd in fds:
            os.close(fd)
        _send(self.ctl, {"op": "started", "pid": pid, "warm": warm, "reused": reused})
        ended, supervisor_gone, stray = self._wait_run(pid, kept_sock, token.decode())
        if ended is None:  # it exited (or was killed): reaped before the cleanup
            status = self._drop(pid, kept_sock, exited=True)
        else:  # it ended its run, said so, and checks itself now
            code = ended.get("code")
            status = code if isinstance(code, int) else 70
            if status != 0:
                self._drop(pid, kept_sock, exited=False)
        if self.warm is not None:  # unused: the cleanup kills it with the rest
            self.warm[1].close()
            self.warm = None
        self._warmed.clear()
        keepable = ended is not None and status == 0
        clean, spared = _cleanup(self._kept, pid if keepable else None)
        if keepable and not (spared and clean):  # it went with what the run left
            self._drop(pid, kept_sock, exited=False)
        if supervisor_gone:
            os._exit(0)
        # The run is over: said now. Whether its process stays is decided next, while
        # the tenant reads the result; a run that comes meanwhile waits for that.
        judging = spared and clean
        _send(self.ctl, {"op": "exited", "status": status, "clean": clean, "judging": judging})
        if judging:
            assert kept_sock is not None
            why = (
                stray
                or _check_report(kept_sock, token.decode())
                or self._judge(pid, reused + 1, keep or {})
            )
            if why:
                self._drop(pid, kept_sock, False)
            else:
                self.warm = (pid, kept_sock)
                self._warmed.add(pid)
                self._served[pid] = reused + 1
                self._ticks[pid] = _cpu_ticks(pid)
            _send(self.ctl, {"op": "kept", "kept": not why, "why": why[:200]})
        # The next warm child is forked a moment later, unless a run comes first: runs
        # back to back would only find it half-warm and have to kill it.
        self._clean = clean
        self._prefork_at = time.monotonic() + PREFORK_DELAY_S

    def _drop(self, pid: int, sock: socket.socket | None, exited: bool) -> int:
        """Kill (unless it ``exited``) and reap the run's process; its exit status."""
        if not exited:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._forget(pid)
        if sock is not None:
            sock.close()
        try:
            _, waited = os.waitpid(pid, 0)
        except ChildProcessError:
            return 70
        return os.waitstatus_to_exitcode(waited)

    def _wait_run(
        self, pid: int, sock: socket.socket | None, token: str
    ) -> tuple[dict[str, Any] | None, bool, str]:
        """Wait until the run's process exits or (kept) says its run ended; kill it on
        the supervisor's order. Returns (its word that the run ended or None, whether
        the supervisor is gone, why it must not be kept for what came on its socket
        meanwhile: the run's own code may write there, and is then only ignored)."""
        pidfd = os.pidfd_open(pid)
        supervisor_gone = False
        stray = ""
        try:
            while True:
                waiting = [self.ctl.fileno(), pidfd] + ([sock.fileno()] if sock else [])
                ready, _, _ = select.select(waiting, [], [])
                if pidfd in ready:
                    return None, supervisor_gone, stray
                if sock is not None and sock.fileno() in ready:
                    message, closed = _message(sock)
                    if message is not None and message.get("token") == token:
                        return message, supervisor_gone, stray
                    if closed:  # it can say nothing more: it ends as a child that exits
                        sock = None
                    stray = "its socket was written to during the run"
                    continue
                data = self.ctl.recv(4096)
                if not data or json.loads(data).get("op") == "kill":
                    supervisor_gone = not data
                    sock = None  # whatever it says now, it is killed
                    os.kill(pid, signal.SIGKILL)
        finally:
            os.close(pidfd)

    def _keepable(self, pid: int, sock: socket.socket) -> bool:
        """Whether warm child ``pid`` may be kept after its run: it has taken the
        baseline of its Python state (said ``base``; told to ``hurry`` if it has not
        yet), and the kernel's view of it is read now, before its first run."""
        if pid in self._base:
            return True
        sock.setblocking(False)
        try:
            said = sock.recv(16)
        except BlockingIOError:  # still warming up: its baseline first, briefly
            said = b""
        except OSError:
            return False
        finally:
            sock.setblocking(True)
        if not said and _say(sock, b"hurry"):
            sock.settimeout(HURRY_S)
            try:
                said = sock.recv(16)
            except OSError:
                return False
            finally:
                sock.settimeout(None)
        if said != b"base":
            return False
        try:
            self._base[pid] = reuse.kernel_view(pid)
        except OSError:
            return False
        return True

    def _idle(self, pid: int) -> bool:
        """A kept process used no CPU while it waited (see IDLE_TICKS)."""
        if pid not in self._ticks:
            return True
        try:
            return _cpu_ticks(pid) - self._ticks[pid] <= IDLE_TICKS
        except OSError:
            return False

    def _judge(self, pid: int, runs: int, keep: dict[str, Any]) -> str:
        """Why the process that ran ``runs`` runs must not be kept ('' if it may)."""
        try:
            changed = reuse.kernel_changes(self._base[pid], reuse.kernel_view(pid))
            rss = reuse.rss_kib(pid)
            busy = reuse.busy_threads(pid) > 0
            if busy:  # twice, a moment apart: not a thread's last breath
                time.sleep(0.002)
                busy = reuse.busy_threads(pid) > 0
        except (OSError, KeyError):
            return "its state could not be read"
        if changed:
            return f"its {', '.join(changed)} changed"
        if busy:
            return "it is still computing"
        max_runs, max_rss = keep.get("runs"), keep.get("rss_kib")
        if not isinstance(max_runs, int) or runs >= max_runs:
            return f"{runs} runs"
        if not isinstance(max_rss, int) or rss > max_rss:
            return f"RSS {rss} KiB"
        return ""

    def _forget(self, pid: int) -> None:
        for table in (self._base, self._served, self._ticks):
            table.pop(pid, None)

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
        "args": "(jnp.ones((2,)),)",
        "transforms": [{"name": "grad"}, {"name": "jit"}],
        "outputs": ["jaxpr", "stablehlo", "hlo", "value", "cost"],
        "backend": "cpu",
    },
}


def _warm_up(worker: Any, sock: socket.socket, settle: bool = False) -> reuse.Watch | None:
    """A warm child's warm-up: start the backend and run the worker's warm-up request,
    say ``warm`` on ``sock``, then run the worker's further warm-ups (a matmul's first
    compile and run) one at a time for as long as no run has arrived, and last collect
    and freeze the heap, so that the run starts with no garbage to collect. A run that
    arrives waits for the step in progress at most (tens of ms). ``settle``: say
    ``warm`` only after all of it (no run can come before).

    Last, if no run came meanwhile, the baseline of its state for being kept across
    runs (reuse.py): its stdio on /dev/null as after every run, ``reuse.Watch``; it
    says ``base`` then and returns the watch (None: the process serves one run)."""
    steps = _warm_backend(worker)
    warm = _warm_word(worker)
    if not settle:
        sock.send(warm)
    for step in [*steps, _freeze_heap, None]:
        if select.select([sock], [], [], 0)[0]:  # the run is here: no more warming
            if not _hurried(sock):
                return None
            break  # but the baseline first
        if step is not None:
            try:
                step()
            except Exception:
                traceback.print_exc()
    watch = None
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        _quiet_stdio()
        watch = reuse.Watch()
    except Exception:
        traceback.print_exc()
    if settle:
        sock.send(warm)
    # The zygote may have sent the run, and closed its end, meanwhile.
    if watch is not None and not _say(sock, b"base"):
        return None
    return watch


def _warm_word(worker: Any) -> bytes:
    """``warm``, followed by what the worker says it runs on (its ``describe``, made
    now, after the warm-up and before any run), when it can say."""
    describe = getattr(worker, "describe", None)
    if describe is None:
        return b"warm"
    try:
        said = json.dumps(describe()).encode()
    except Exception:
        traceback.print_exc()
        return b"warm"
    return b"warm " + said if len(said) < 4000 else b"warm"


def _next_order(sock: socket.socket) -> tuple[bytes, list[int]]:
    """The zygote's next order and its descriptors, past a ``hurry`` that came after
    the baseline was taken. The zygote may have closed its end with this child's
    ``base`` unread: the kernel then reports ECONNRESET once, before the order
    queued ahead of it, which is read on the second try."""
    order: bytes = b"hurry"
    fds: list[int] = []
    for _ in range(4):
        try:
            order, fds, _, _ = socket.recv_fds(sock, 64, 4)
        except ConnectionResetError:
            continue
        if order != b"hurry":
            break
    return order, fds


def _hurried(sock: socket.socket) -> bool:
    """Whether what waits on ``sock`` is the zygote's ``hurry`` (a run is coming that
    may keep this process: take the baseline now), read if so; else it is the run."""
    try:
        if sock.recv(16, socket.MSG_PEEK) != b"hurry":
            return False
        sock.recv(16)
    except OSError:
        return False
    return True


def _say(sock: socket.socket, word: bytes) -> bool:
    try:
        sock.send(word, socket.MSG_NOSIGNAL)
    except OSError:
        return False
    return True


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
    os._exit(_run_once(worker, msg_fd, event_fd, err_fd))


def _run_once(worker: Any, msg_fd: int, event_fd: int, err_fd: int) -> int:
    """One run: the message read, stdin /dev/null, stdout and stderr the run's pipe.
    Returns the exit code the process would have."""
    code: Any = 70
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
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        code = 70
    return code if isinstance(code, int) else 70


def _serve_runs(
    worker: Any, sock: socket.socket, watch: reuse.Watch, order: bytes, fds: list[int]
) -> None:
    """A kept process: one run after another, each on the descriptors the zygote
    sends (``run TOKEN``), as long as the zygote keeps it. After each run it lets go
    of the run's pipes (so that the run's end is seen), says so, puts back what the
    engine gave the run, checks its state against the baseline and says what it
    found; both words carry the run's token, which stray writes of a run's code to
    this socket (it is open during the run) do not."""
    while True:
        token = order[4:].decode(errors="replace")
        event_fd = fds[1]
        code = _run_once(worker, *fds)
        with contextlib.suppress(OSError):
            os.close(event_fd)
        _quiet_stdio()  # the run's pipes let go: its end is seen
        if not _say(sock, json.dumps({"token": token, "code": code}).encode()) or code != 0:
            os._exit(code)
        try:
            changes = _after_run(watch)
        except BaseException as exc:
            changes = [f"the check failed: {type(exc).__name__}"]
        found = [c[:200] for c in reuse.first_differences(changes)]
        if not _say(sock, json.dumps({"token": token, "changes": found}).encode()) or changes:
            os._exit(code)
        try:
            order, fds, _, _ = socket.recv_fds(sock, 64, 4)
        except OSError:
            os._exit(0)
        if not order.startswith(b"run ") or len(fds) != 3:
            os._exit(0)


def _after_run(watch: reuse.Watch) -> list[str]:
    watch.reset()
    reuse.reap_children()
    gc.collect()  # the run's garbage, and its finalizers, before the check
    gc.freeze()  # what survives is not scanned again by the next run's collections
    return watch.changes()


def _quiet_stdio() -> None:
    """fds 0, 1 and 2 on /dev/null: a kept process holds none of a run's pipes."""
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _message(sock: socket.socket) -> tuple[dict[str, Any] | None, bool]:
    """A JSON object from a kept process, if what came is one; and whether its end
    of the socket is closed."""
    try:
        data = sock.recv(4096)
    except BlockingIOError:
        return None, False
    except OSError:
        return None, True
    if not data:
        return None, True
    try:
        message = json.loads(data)
    except ValueError:
        return None, False
    return (message if isinstance(message, dict) else None), False


def _check_report(sock: socket.socket, token: str) -> str:
    """Why a kept process that ended its run must go, by its own check ('' if it may
    stay); waits CHECK_S for it at most. Anything else on the socket: it goes."""
    sock.settimeout(CHECK_S)
    try:
        report, _ = _message(sock)
    finally:
        sock.settimeout(None)
    if report is None or report.get("token") != token:
        return f"no check within {CHECK_S:g} s"
    changes = report.get("changes")
    if not isinstance(changes, list):
        return "no check"
    return f"changed: {'; '.join(str(c) for c in changes)}" if changes else ""


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])  # utime + stime


def _others(spare: int | None = None) -> list[int]:
    me = os.getpid()
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me, spare)]


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


def _cleanup(kept: dict[str, int], spare: int | None = None) -> tuple[bool, bool]:
    """Kill whatever the run left in the jail and empty its writable places. The
    process ``spare`` (kept for the next run) is spared only if it is the only one
    left: anything else and everything goes, it too. Returns (clean, spared)."""
    deadline = time.monotonic() + CLEANUP_S
    spared = spare is not None and not _others(spare)
    while _others(spare if spared else None):
        spared = False  # kill(-1) below spares nobody
        try:
            os.kill(-1, signal.SIGKILL)  # everything we may signal in this pid namespace
        except ProcessLookupError:
            pass
        reuse.reap_children()  # what came back to us (we are the subreaper)
        if time.monotonic() > deadline:
            return False, False
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
        return False, False
    return True, spared


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
