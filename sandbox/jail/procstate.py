"""What a jailed process's limits and scheduling are, read from outside the jail.

The pool records a zygote's state when it says ready and compares after every run:
rlimits, nice value, scheduling policy and real-time priority, CPU affinity, I/O
priority and cgroup. A run cannot change them (the jail's seccomp filter allows
those calls on oneself only); this is the second line, and any difference retires
the zygote. Everything is read from the host's /proc and by system calls on the
host pid: never from a file or message the jail wrote.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, fields

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_SYS_IOPRIO_GET = {"x86_64": 252, "aarch64": 31}.get(os.uname().machine)
_IOPRIO_WHO_PROCESS = 1


@dataclass(frozen=True)
class ProcState:
    limits: str  # /proc/PID/limits, verbatim
    nice: int
    policy: int
    rt_priority: int
    affinity: frozenset[int]
    ioprio: int
    cgroup: str  # /proc/PID/cgroup, verbatim

    def changes(self, now: ProcState) -> list[str]:
        """What differs in ``now``, by name (empty: nothing)."""
        return [f.name for f in fields(self) if getattr(self, f.name) != getattr(now, f.name)]


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def read_state(pid: int) -> ProcState:
    """The state of host process ``pid``; OSError if it is gone."""
    stat = _read(f"/proc/{pid}/stat")
    # fields after the command name, which may hold spaces and parentheses
    rest = stat[stat.rindex(")") + 2 :].split()
    nice, rt_priority, policy = int(rest[16]), int(rest[37]), int(rest[38])
    ioprio = -1
    if _SYS_IOPRIO_GET is not None:
        ioprio = _libc.syscall(_SYS_IOPRIO_GET, _IOPRIO_WHO_PROCESS, pid)
        if ioprio < 0:
            raise OSError(ctypes.get_errno(), f"ioprio_get({pid})")
    return ProcState(
        limits=_read(f"/proc/{pid}/limits"),
        nice=nice,
        policy=policy,
        rt_priority=rt_priority,
        affinity=frozenset(os.sched_getaffinity(pid)),
        ioprio=ioprio,
        cgroup=_read(f"/proc/{pid}/cgroup"),
    )


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in _read(f"/proc/{pid}/task/{pid}/children").split()]
    except OSError:
        return []


def _ns_pid(pid: int) -> int | None:
    """The pid of host process ``pid`` in its innermost pid namespace."""
    for line in _read(f"/proc/{pid}/status").splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    return None


def jail_command_pid(bwrap_pid: int, ns_pid: int) -> int | None:
    """The host pid of the jail's process ``ns_pid`` (2: the command bubblewrap runs,
    a zygote) under the jail's bubblewrap ``bwrap_pid``: bwrap's child is the jail's
    pid 1, whose child is the command. None if it cannot be found."""
    try:
        for init in _children(bwrap_pid):
            for child in _children(init):
                if _ns_pid(child) == ns_pid:
                    return child
    except OSError:
        pass
    return None


def processes_by_uid(zombies: bool = False) -> dict[int, list[int]]:
    """Host pids by real uid, read from /proc/PID/status (the owner of /proc/PID is
    root for a process that is not dumpable, as a zygote is). Zombies are left out
    unless asked for: they hold nothing but their pid until their parent reaps them
    (a jail's pid 1 is reaped by the host's init, which may take a second)."""
    found: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"State:") and line.split()[1] == b"Z" and not zombies:
                        break
                    if line.startswith(b"Uid:"):
                        found.setdefault(int(line.split()[1]), []).append(int(entry))
                        break
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return found


def processes_of(uid: int) -> list[int]:
    """Host pids (but zombies) whose real uid is ``uid``."""
    return processes_by_uid().get(uid, [])
