"""The jail template's loop: it forks each new jail (runs inside the template process).

A template is one long-lived process per environment (a JAX version and its library
set) that imported what every jail's process needs and never runs anyone's code;
its caller (sandbox/zygote/template_main.py) does the importing, then calls
``serve``. On its socket (SOCK_SEQPACKET, to the pool's ``JailTemplate``,
fork_client.py) it takes one order per new jail: a ``JailSpec`` (JSON) and the
descriptors the jail gets (SCM_RIGHTS: the jail's error pipe, its seccomp filter,
then the command's own, named by ``roles``). It forks; the child enters its jail
(enter.py) and runs the caller's ``command`` with the descriptors by role. The
template answers ``{"pid"}`` with a pidfd of the jail's monitor, and
``{"exit", "status"}`` when that monitor ends. It forks only while it is the only
thread of its process (a fork of a threaded process inherits locks held by threads
that do not come along); if it is not, it refuses every order and says why.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
from collections.abc import Callable
from typing import NoReturn

from sandbox.jail.enter import JailSpec, enter
from sandbox.jail.syscalls import PR_SET_PDEATHSIG, prctl

#: Descriptors one order may carry (error pipe, filter, the command's).
MAX_FDS = 8
MAX_BYTES = 1 << 16

Command = Callable[[dict[str, int]], NoReturn]
#: descriptors the template itself gives each new jail, by role (made before its fork)
PerJail = Callable[[], dict[str, int]]


def take_place(argv: list[str]) -> socket.socket:
    """The template's start, before it imports anything (``argv``: SOCK_FD CPUS ENV as
    fork_client.py passes them): it dies with the process that started it, runs on
    ``CPUS`` (``-``: its own) and in the jail's environment ``ENV`` (JSON), which is
    what what it imports reads. Returns its socket."""
    sock = socket.socket(fileno=int(argv[1]))
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the pool gone: the template and its jails too
    if os.getppid() == 1:  # it died before the line above
        os._exit(0)
    if argv[2] != "-":
        os.sched_setaffinity(0, {int(c) for c in argv[2].split(",")})
    os.environ.clear()
    os.environ.update(json.loads(argv[3]))
    return sock


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def serve(
    sock: socket.socket, command: Command, per_jail: PerJail | None = None, **said: int
) -> NoReturn:
    """Fork a jail per order until the socket closes; then end (the jails its
    children are die with it: their monitors' parent-death signal). ``per_jail``:
    descriptors of the template's own that each jail gets besides the order's (closed
    here once it forked). ``said``: more the template's hello tells the pool
    (``JailTemplate.said``)."""
    monitors: dict[int, int] = {}  # pidfd -> pid
    hello = {**said, "ready": True, "pid": os.getpid(), "threads": threads()}
    sock.send(json.dumps(hello).encode())
    while True:
        ready, _, _ = select.select([sock.fileno(), *monitors], [], [])
        for pidfd in [fd for fd in ready if fd in monitors]:
            pid = monitors.pop(pidfd)
            os.close(pidfd)
            try:
                _, waited = os.waitpid(pid, 0)
                status = os.waitstatus_to_exitcode(waited)
            except ChildProcessError:
                status = -9
            _send(sock, {"exit": pid, "status": status})
        if sock.fileno() not in ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_BYTES, MAX_FDS)
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)
        try:
            order = json.loads(data)
            spec = JailSpec.from_json(order["spec"])
            roles = [str(r) for r in order["roles"]]
            seq = order["seq"]
            if len(fds) != 2 + len(roles):
                raise ValueError(f"{len(fds)} descriptors for {len(roles)} roles")
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            for fd in fds:
                os.close(fd)
            _send(sock, {"seq": None, "error": f"not an order: {exc}"})
            continue
        if (n := threads()) != 1:
            for fd in fds:
                os.close(fd)
            _send(sock, {"seq": seq, "error": f"the template has {n} threads: it forks none"})
            continue
        own = {r: fd for r, fd in (per_jail() if per_jail else {}).items() if r not in roles}
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in [*fds, *own.values()]:
                os.close(fd)
            _send(sock, {"seq": seq, "error": f"fork: {exc}"})
            continue
        if pid == 0:
            err_fd, seccomp_fd, *given = fds
            by_role = {**dict(zip(roles, given, strict=True)), **own}
            # closes the template's socket and all but these
            enter(spec, [*given, *own.values()], err_fd, seccomp_fd)
            command(by_role)
        for fd in [*fds, *own.values()]:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        monitors[pidfd] = pid
        socket.send_fds(sock, [json.dumps({"seq": seq, "pid": pid}).encode()], [pidfd])


def _send(sock: socket.socket, message: dict[str, object]) -> None:
    try:
        sock.send(json.dumps(message).encode())
    except OSError:
        os._exit(0)
