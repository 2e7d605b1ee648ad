"""A child of the zygote: its warm-up, a run, and the runs of a kept process.

Every child first calls ``become_child`` (its own session, dumpable like any fresh
process, default signals, the run filter stacked on the jail's), then either runs
one run (a cold child, forked for that run: ``run_once_and_exit``), or warms up
first (the zygote's pre-forked warm child: ``warm_child``). A warm child says
``warm`` on its socket to the zygote (with the engine's ``describe`` of what it runs
on), runs the engine's further warm-ups while no run has come, takes the baseline of
its Python state (watch.py) and says ``base``. Then it takes ``once`` (one run, then
exit) or ``run TOKEN`` (a kept process: ``serve_runs``). The zygote may tell it to
``hurry`` (a run is coming that may keep it: the baseline now).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import select
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

from sandbox.engine.api import Engine
from sandbox.jail import seccomp
from sandbox.zygote.cleanup import reap_children
from sandbox.zygote.control import BASE, CHECK, HURRY, child_report, run_token, warm_word
from sandbox.zygote.watch import Watch, first_differences

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36

_libc = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, value: int) -> None:
    if _libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option})")


def warm_child(
    engine: Engine, ctl: socket.socket, run_filter: bytes | None, sock: socket.socket, settle: bool
) -> NoReturn:
    """The pre-forked warm child, from the fork on; never returns. ``sock`` is its end
    of its socket to the zygote; ``settle``: say ``warm`` only after every warm-up."""
    become_child(ctl, run_filter)
    watch = None
    order = b""
    try:
        watch = warm_up(engine, sock, settle)
        order, fds = next_order(sock)
    except OSError:
        fds = []
    if len(fds) != 3:
        os._exit(0)
    if run_token(order) is None or watch is None:  # once: one run, then exit
        sock.close()
        run_once_and_exit(engine, *fds)
    serve_runs(engine, sock, watch, order, fds)


def cold_child(
    engine: Engine, ctl: socket.socket, run_filter: bytes | None, fds: list[int]
) -> NoReturn:
    """A child forked for one run (no warm child fitted it), from the fork on."""
    become_child(ctl, run_filter)
    run_once_and_exit(engine, *fds)


def become_child(ctl: socket.socket, run_filter: bytes | None) -> None:
    """What every run's child does first, before anything else."""
    try:
        ctl.close()
        os.setsid()
        prctl(PR_SET_CHILD_SUBREAPER, 0)
        prctl(PR_SET_DUMPABLE, 1)  # like any fresh process; the zygote stays undumpable
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        if run_filter is not None:
            seccomp.load(run_filter)  # still one thread: it covers all that follows
    except BaseException:
        traceback.print_exc()
        os._exit(70)


def warm_up(engine: Engine, sock: socket.socket, settle: bool = False) -> Watch | None:
    """A warm child's warm-up: start the backend, say ``warm`` on ``sock``, then run the
    engine's warm-ups (its warm-up request's first compile and run) one at a
    time for as long as no run has arrived, and last collect
    and freeze the heap, so that the run starts with no garbage to collect. A run that
    arrives waits for the step in progress at most (tens of ms). ``settle``: say
    ``warm`` only after all of it (no run can come before).

    Last, if no run came meanwhile, the baseline of its state for being kept across
    runs (watch.py): its stdio on /dev/null as after every run, ``Watch``; it
    says ``base`` then and returns the watch (None: the process serves one run)."""
    steps = _warm_backend(engine)
    warm = _warm_word(engine)
    if not settle:
        sock.send(warm)
    for step in [*steps, freeze_heap, None]:
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
        watch = Watch()
    except Exception:
        traceback.print_exc()
    if settle:
        sock.send(warm)
    # The zygote may have sent the run, and closed its end, meanwhile.
    if watch is not None and not say(sock, BASE):
        return None
    return watch


def _warm_word(engine: Engine) -> bytes:
    """``warm``, followed by what the engine says it runs on (its ``describe``, made
    now, after the warm-up and before any run), when it can say."""
    try:
        said = json.dumps(engine.describe()).encode()
    except Exception:
        traceback.print_exc()
        return warm_word(None)
    return warm_word(said)


def next_order(sock: socket.socket) -> tuple[bytes, list[int]]:
    """The zygote's next order and its descriptors, past a ``hurry`` that came after
    the baseline was taken. The zygote may have closed its end with this child's
    ``base`` unread: the kernel then reports ECONNRESET once, before the order
    queued ahead of it, which is read on the second try."""
    order: bytes = HURRY
    fds: list[int] = []
    for _ in range(4):
        try:
            order, fds, _, _ = socket.recv_fds(sock, 64, 4)
        except ConnectionResetError:
            continue
        if order != HURRY:
            break
    return order, fds


def _hurried(sock: socket.socket) -> bool:
    """Whether what waits on ``sock`` is the zygote's ``hurry`` (a run is coming that
    may keep this process: take the baseline now), read if so; else it is the run."""
    try:
        if sock.recv(16, socket.MSG_PEEK) != HURRY:
            return False
        sock.recv(16)
    except OSError:
        return False
    return True


def say(sock: socket.socket, word: bytes) -> bool:
    try:
        sock.send(word, socket.MSG_NOSIGNAL)
    except OSError:
        return False
    return True


def freeze_heap() -> None:
    gc.collect()
    gc.freeze()


def _warm_backend(engine: Engine) -> list[Callable[[], object]]:
    """Start the backend. Returns the engine's warm-up steps (its warm-up request, whose
    first compile and run pay ~40 ms of set-up for the run)."""
    try:
        return list(engine.warm_backend())
    except Exception:
        traceback.print_exc()
    return []


def run_once_and_exit(engine: Engine, msg_fd: int, event_fd: int, err_fd: int) -> NoReturn:
    os._exit(_run_once(engine, msg_fd, event_fd, err_fd))


def _run_once(engine: Engine, msg_fd: int, event_fd: int, err_fd: int) -> int:
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
        code = engine.run_message(message, event_fd)
    except BaseException:
        traceback.print_exc()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        code = 70
    return code if isinstance(code, int) else 70


def serve_runs(
    engine: Engine, sock: socket.socket, watch: Watch, order: bytes, fds: list[int]
) -> NoReturn:
    """A kept process: one run after another, each on the descriptors the zygote
    sends (``run TOKEN``), as long as the zygote keeps it. After each run it lets go
    of the run's pipes (so that the run's end is seen), says so, waits until the
    zygote has reported the run's end (``check``: the check's CPU must not delay that
    report, on the jail's one CPU), puts back what the engine gave the run, checks its
    state against the baseline and says what it found; both words carry the run's
    token, which stray writes of a run's code to this socket (it is open during the
    run) do not."""
    while True:
        token = (run_token(order) or b"").decode(errors="replace")
        event_fd = fds[1]
        code = _run_once(engine, *fds)
        with contextlib.suppress(OSError):
            os.close(event_fd)
        _quiet_stdio()  # the run's pipes let go: its end is seen
        if not say(sock, child_report(token, code=code)) or code != 0:
            os._exit(code)
        if not _told(sock, CHECK):  # dropped instead (the zygote closed its end)
            os._exit(code)
        try:
            changes = _after_run(watch)
        except BaseException as exc:
            changes = [f"the check failed: {type(exc).__name__}"]
        found = [c[:200] for c in first_differences(changes)]
        if not say(sock, child_report(token, changes=found)) or changes:
            os._exit(code)
        try:
            order, fds, _, _ = socket.recv_fds(sock, 64, 4)
        except OSError:
            os._exit(0)
        if run_token(order) is None or len(fds) != 3:
            os._exit(0)


def _told(sock: socket.socket, word: bytes) -> bool:
    """Wait for the zygote's next word; whether it is ``word``."""
    try:
        return sock.recv(16) == word
    except OSError:
        return False


def _after_run(watch: Watch) -> list[str]:
    watch.reset()
    reap_children()
    gc.collect()  # the run's garbage, and its finalizers, before the check
    gc.freeze()  # what survives is not scanned again by the next run's collections
    return watch.changes()


def _quiet_stdio() -> None:
    """fds 0, 1 and 2 on /dev/null: a kept process holds none of a run's pipes."""
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
