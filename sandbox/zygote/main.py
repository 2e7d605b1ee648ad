"""The zygote: runs INSIDE a jail, imports JAX once, then forks children for runs.

Started as ``python -I -B -c "..." CTL_FD RUN_FILTER_FD LOG_FD`` by the warm pool
(``-`` for a descriptor it does not pass). Its own output (fds 1 and 2) goes to
LOG_FD, a pipe only the pool reads. It calls the engine's ``prepare`` (JAX imported
and tracing warmed, backend not started: forking stays safe; sandbox/engine/api.py),
freezes the heap, says ``Ready`` (its hello, with the control VERSION) and waits for
orders on the control socket (a SOCK_SEQPACKET unix socket from the pool; the
messages are control.py's):

- ``RunOrder`` with three file descriptors (SCM_RIGHTS): a memfd holding the worker
  message, the write end of the run's event pipe and of its stderr pipe. A child
  (child.py) reads the message and calls the engine's ``run_message(message,
  event_fd)`` with fds 1 and 2 on the stderr pipe; the zygote answers ``Started``.
  The child is the pre-forked warm one (its backend already started, for one CPU
  device) when ``warm`` says the request fits it, else a cold one forked now.
  ``Warm`` says a warm child is ready.
- ``KillOrder``: SIGKILL the current run (a cancel).

``Ready`` carries ``worker``: what the first warm child said it runs on (the
engine's ``describe()``, after its warm-up and before any run; ``Warm`` carries it
instead when it came after ``Ready``), and ``platforms`` (the jail's
``JAX_PLATFORMS``). The pool puts that in every run's ``accepted``, never what a
run's own line claims. No child's word is taken once a run was served.

When the child is gone the zygote kills every other process left in the jail and
empties its writable places (cleanup.py), and answers ``Exited`` (``status``,
``clean``, ``judging``). ``clean`` false means something survived: the pool retires
the jail.

A run order may carry ``keep`` (``runs``, ``rss_kib``): then a warm child that took
its baseline (watch.py; it says ``base`` on its socket, or is told to ``hurry``)
gets ``run`` rather than ``once``, and when its run ends it does not exit: it lets
go of the run's pipes and says ``{"code"}``; if no other process is left the zygote
spares it in the cleanup, answers ``Exited`` with ``judging`` true, then tells it
``check`` (it waits for that: on the jail's one CPU its check would delay the
cleanup and ``Exited``), waits for the child's own check (``{"changes"}``),
compares the kernel's view of it
(kernel_view.py), and says ``Kept`` (``kept``, ``why``). A kept child is the next
run's warm child; ``Started`` says how many runs it ``reused``. The zygote itself
never runs user code and is not dumpable, so a run's processes (same uid) cannot
read or write its memory through /proc. Every child stacks the run filter
(``RUN_FILTER_FD``, see sandbox/jail/seccomp.py) on the jail's before anything
else, so a run cannot signal the zygote either. End of file on the control socket
ends it.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import signal
import socket
import sys
import time
from typing import Any

from sandbox.engine import api
from sandbox.engine.api import Engine
from sandbox.engine.core import persistent_cache
from sandbox.environments import libraries
from sandbox.jail import compile_cache
from sandbox.jail.seccomp import ZYGOTE_PID
from sandbox.zygote import child, watch
from sandbox.zygote.child import PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE, prctl, say
from sandbox.zygote.cleanup import cleanup, kept_paths
from sandbox.zygote.control import (
    BASE,
    CHECK,
    HURRY,
    VERSION,
    Exited,
    Keep,
    Kept,
    KillOrder,
    Ready,
    Report,
    RunOrder,
    Started,
    Warm,
    decode_order,
    encode,
    is_warm,
    run_word,
    warm_description,
)
from sandbox.zygote.eager_link import EagerLink
from sandbox.zygote.kernel_view import busy_threads, cpu_ticks, kernel_changes, kernel_view, rss_kib
from sandbox.zygote.watch import IDENTITY_CHECK

#: How long the zygote waits for its first warm child before saying ready anyway.
WARM_S = 10.0
#: How long after a run the zygote waits before forking the next warm child.
PREFORK_DELAY_S = 0.05
#: CPU time (clock ticks, 10 ms each) a kept process may have used while it waited
#: for its next run: more means work of the last run still going on (an operation
#: dispatched and never waited for), and the process is not used again.
IDLE_TICKS = 5
#: How long a run that may keep its process waits for a warm child still warming up
#: to take its baseline (it skips what warm-ups remain; the baseline takes ~50 ms).
HURRY_S = 0.5
#: How long a kept process's check of itself after a run may take (~10-25 ms).
CHECK_S = 2.0


def _send(ctl: socket.socket, message: Report) -> None:
    ctl.send(encode(message))


def _fd_arg(argv: list[str], i: int) -> int | None:
    return int(argv[i]) if len(argv) > i and argv[i] != "-" else None


def enable_compile_cache(path: str = compile_cache.CACHE_DIR) -> bool:
    """Point JAX's persistent compilation cache at the jail's own tmpfs, after the
    worker imported JAX and before any fork; only when the jail mounted that tmpfs
    (sandbox/jail/compile_cache.py) and the worker uses JAX. Here, where the zygote
    starts its runs, so that the jail itself never reaches into the engine."""
    if "jax" not in sys.modules or not os.path.ismount(path):
        return False
    return persistent_cache.enable(path)


def main(argv: list[str]) -> None:
    """A zygote started as a new interpreter in a bubblewrap jail: import, then serve."""
    ctl, run_filter = take_descriptors(argv)
    started = time.monotonic()
    boot()
    serve(ctl, run_filter, started)


def boot() -> None:
    """What every zygote imports and warms, once; no backend (forking stays safe). A
    jail template (template_main.py) does this once for every jail it forks."""
    api.prepare()  # warm what a run's first use of JAX pays, once
    libraries.preimport()  # Flax, Optax, Equinox...: a run's own import of them costs ~0
    api.discover_backends()
    # the modules' walk of every warm child's baseline, done once here (watch.py)
    watch.prebuild()


def take_descriptors(argv: list[str]) -> tuple[socket.socket, bytes | None]:
    """The control socket, and the run filter read (``argv``: CTL_FD RUN_FILTER_FD
    LOG_FD, ``-`` for one not passed); fds 1 and 2 become the log pipe."""
    ctl = socket.socket(fileno=int(argv[1]))
    run_filter_fd, log_fd = _fd_arg(argv, 2), _fd_arg(argv, 3)
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
    prctl(PR_SET_DUMPABLE, 0)
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    return ctl, run_filter


def serve(
    ctl: socket.socket, run_filter: bytes | None, started: float, eager_fd: int | None = None
) -> None:
    """The zygote's life after its imports: its jail's compilation cache (and, forked
    from a template, its connection to the template's eager compiler: ``eager_fd``),
    the heap frozen, the first warm child, the hello, then the loop until the pool
    hangs up."""
    cache_on = enable_compile_cache()  # the tenant's own, in its jail: before any child compiles
    eager = _eager_link(eager_fd, cache_on)
    gc.collect()
    gc.freeze()  # children share these pages instead of copying them on first GC
    gc.enable()  # off while it imported (handle.py's boot line): on for every child
    ms = (time.monotonic() - started) * 1000
    rss = rss_kib(os.getpid())
    threads = len(os.listdir("/proc/self/task"))  # must be 1: we fork
    zygote = ZygoteProcess(ctl, api, run_filter, eager)
    # A new tenant's first run comes as soon as the zygote is ready: its first warm
    # child says warm only once all its warm-ups are done (and its baseline taken), so
    # none is in its way, and every zygote's first run, a pristine one or a new
    # tenant's, starts in a process in the same state (tests/pool/test_single_use.py).
    zygote.prefork(settle=True)
    warm = zygote.wait_warm(WARM_S)  # so a new tenant's first run finds it warm
    ready = Ready(
        version=VERSION,
        ms=ms,
        rss_kib=rss,
        threads=threads,
        compile_cache=cache_on,
        identity_check=IDENTITY_CHECK,  # "c", or "python" where not built
        warm=warm,
        # What this jail runs on, as its first warm child described it before any
        # run: the pool says this in every run's accepted, never what a run claims.
        worker=zygote.identity,
        platforms=os.environ.get("JAX_PLATFORMS", ""),
    )
    _send(ctl, ready)
    zygote.loop()
    os._exit(0)


def _eager_link(fd: int | None, cache_on: bool) -> EagerLink | None:
    """The jail's link to its template's eager compiler (eager_link.py), with what it
    learnt so far written into the jail's cache; None where there is no compiler, no
    cache to write into, or no hooks in this JAX."""
    if fd is None:
        return None
    if not cache_on:
        os.close(fd)
        return None
    link = EagerLink(fd)
    if not api.share_eager(link.write_fd):  # every child records its set-up's misses
        link.close()
        return None
    link.pull()  # before the first warm child
    return link


class ZygoteProcess:
    """The zygote's loop, and its one pre-forked warm child (pid, socket) if any."""

    def __init__(
        self,
        ctl: socket.socket,
        engine: Engine,
        run_filter: bytes | None = None,
        eager: EagerLink | None = None,
    ) -> None:
        self.ctl, self.engine = ctl, engine
        self.run_filter = run_filter
        self.eager = eager
        self.warm: tuple[int, socket.socket] | None = None
        self._warmed: set[int] = set()  # warm children that said they are ready
        self._clean = True  # the last cleanup succeeded: a warm child may be forked
        #: what the first warm child said it runs on (``describe``), before any run
        self.identity: dict[str, Any] | None = None
        self._ran = False  # a run was served: no child's word is taken any more
        self._prefork_at = 0.0
        self._kept = kept_paths()
        #: processes kept across runs (watch.py): the kernel's view of each before its
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
                    # the first one's description, if it came after ready (a slow start)
                    _send(self.ctl, Warm(self.identity if not self._ran else None))
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
            order = decode_order(data)  # ControlError: not the pool's; the zygote ends
            if isinstance(order, RunOrder) and len(fds) == 3:
                self.serve(fds, order.warm, order.keep)
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
            self._child_closes()
            child.warm_child(self.engine, self.ctl, self.run_filter, its, settle)
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
            if is_warm(said):
                self._warmed.add(pid)
                described = warm_description(said)
                if self.identity is None and not self._ran and described is not None:
                    self._learn(described)
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
            isinstance(k, str) and (isinstance(v, str | int) or _names(v))
            for k, v in described.items()
        ):
            self.identity = described

    def serve(self, fds: list[int], warm_ok: bool, keep: Keep | None = None) -> None:
        """One run: in the warm child (or the process kept from the last run), else in
        a cold child. ``keep`` (``runs``, ``rss_kib``): the process may be kept for
        the next run of the tenant if the run ends well and nothing changed."""
        self._ran = True
        pid: int | None = None
        kept_sock: socket.socket | None = None
        token = b""
        if self.eager is not None and not (self.warm and self.warm[0] in self._served):
            # what the compiler learnt meanwhile, for the set-up of a run in a new
            # process (a kept one has its own in-memory caches of what it met)
            self.eager.pull()
        # A warm child still warming up (runs back to back) is not waited for: a cold
        # child is as fast, once the warm one is out of the way.
        if warm_ok and self.warm is not None and self.wait_warm(0) and self._idle(self.warm[0]):
            pid, sock = self.warm
            # a process kept from the last run waits for "run" only (and goes after it
            # if keeping is off now)
            keeping = (keep is not None or pid in self._served) and self._keepable(pid, sock)
            token = os.urandom(8).hex().encode()  # its words about this run carry it
            try:
                socket.send_fds(sock, [run_word(token if keeping else None)], fds)
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
        _send(self.ctl, Started(pid=pid, warm=warm, reused=reused))
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
        if self.eager is not None:
            self.eager.pass_on()  # what its set-up compiled, for the compiler to learn
        clean, spared = cleanup(self._kept, pid if keepable else None)
        if keepable and not (spared and clean):  # it went with what the run left
            self._drop(pid, kept_sock, exited=False)
        if supervisor_gone:
            os._exit(0)
        # The run is over: said now. Whether its process stays is decided next, while
        # the tenant reads the result; a run that comes meanwhile waits for that.
        judging = spared and clean
        _send(self.ctl, Exited(status=status, clean=clean, judging=judging))
        if judging:
            assert kept_sock is not None
            why = stray
            if not why:
                say(kept_sock, CHECK)  # its own check, now that the run's end is said
                why = _check_report(kept_sock, token.decode()) or self._judge(pid, reused + 1, keep)
            if why:
                self._drop(pid, kept_sock, False)
            else:
                self.warm = (pid, kept_sock)
                self._warmed.add(pid)
                self._served[pid] = reused + 1
                self._ticks[pid] = cpu_ticks(pid)
            _send(self.ctl, Kept(kept=not why, why=why[:200]))
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
                if not data or isinstance(decode_order(data), KillOrder):
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
        if not said and say(sock, HURRY):
            sock.settimeout(HURRY_S)
            try:
                said = sock.recv(16)
            except OSError:
                return False
            finally:
                sock.settimeout(None)
        if said != BASE:
            return False
        try:
            self._base[pid] = kernel_view(pid)
        except OSError:
            return False
        return True

    def _idle(self, pid: int) -> bool:
        """A kept process used no CPU while it waited (see IDLE_TICKS)."""
        if pid not in self._ticks:
            return True
        try:
            return cpu_ticks(pid) - self._ticks[pid] <= IDLE_TICKS
        except OSError:
            return False

    def _judge(self, pid: int, runs: int, keep: Keep | None) -> str:
        """Why the process that ran ``runs`` runs must not be kept ('' if it may)."""
        try:
            changed = kernel_changes(self._base[pid], kernel_view(pid))
            rss = rss_kib(pid)
            busy = busy_threads(pid) > 0
            if busy:  # twice, a moment apart: not a thread's last breath
                time.sleep(0.002)
                busy = busy_threads(pid) > 0
        except (OSError, KeyError):
            return "its state could not be read"
        if changed:
            return f"its {', '.join(changed)} changed"
        if busy:
            return "it is still computing"
        if keep is None or runs >= keep.runs:
            return f"{runs} runs"
        if rss > keep.rss_kib:
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
            self._child_closes()
            child.cold_child(self.engine, self.ctl, self.run_filter, fds)
        return pid

    def _child_closes(self) -> None:
        """In a child, what is the zygote's alone: its link to the eager compiler (the
        child keeps only the pipe's end it reports on)."""
        if self.eager is not None:
            self.eager.close()
            os.close(self.eager.report_fd)


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


def _names(value: object) -> bool:
    """A map of names to versions (the description's ``libraries``)."""
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


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
