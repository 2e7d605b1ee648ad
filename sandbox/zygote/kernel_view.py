"""What the kernel holds for a kept process, read by the zygote from /proc.

A kept process's own check of itself (watch.py) sees its Python state; this is the
other half, read from outside the process and out of its control: its threads,
signal masks and dispositions, pending signals, umask, capabilities, seccomp
filters, rlimits, nice and scheduling, cwd, open descriptors, POSIX timers, name,
session; and what decides whether it is idle, busy or too big to keep.
"""

from __future__ import annotations

import os

#: Threads that XLA's CPU client starts when it first needs them (its compile,
#: execute, Eigen and LLVM pools): their number may grow between runs. Every other
#: thread (Python's, or made by any other means) is counted, and must not change.
XLA_THREADS = ("tf_", "llvm-worker-")

#: /proc/PID/status lines compared by ``kernel_view``.
_STATUS_FIELDS = (
    "Umask",
    "SigPnd",
    "ShdPnd",
    "SigBlk",
    "SigIgn",
    "SigCgt",
    "CapInh",
    "CapPrm",
    "CapEff",
    "CapBnd",
    "CapAmb",
    "NoNewPrivs",
    "Seccomp",
    "Seccomp_filters",
    "Cpus_allowed_list",
    "Mems_allowed_list",
)
#: Compared with the reader's own (the zygote's) rather than with the baseline: the
#: pool moves the whole jail to a free CPU before a run (sandbox/pool/zygote_pool.py).
_OWN_FIELDS = ("Cpus_allowed_list", "Mems_allowed_list")


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def kernel_view(pid: int) -> dict[str, str]:
    """What the kernel holds for process ``pid`` that a run could change and that
    would outlive the run (read from /proc by the zygote; OSError if it is gone)."""
    view: dict[str, str] = {}
    for line in _read(f"/proc/{pid}/status").splitlines():
        name, _, value = line.partition(":")
        if name in _STATUS_FIELDS:
            view[name] = value.strip()
    for line in _read("/proc/self/status").splitlines():
        name, _, value = line.partition(":")
        if name in _OWN_FIELDS:
            view[name] = "as the reader's" if view.get(name) == value.strip() else view[name]
    stat = _read(f"/proc/{pid}/stat")
    rest = stat[stat.rindex(")") + 2 :].split()
    # session, nice, real-time priority, policy (proc(5): fields 6, 19, 40, 41)
    view["stat"] = " ".join((rest[3], rest[16], rest[37], rest[38]))
    view["limits"] = _read(f"/proc/{pid}/limits")
    view["cwd"] = os.readlink(f"/proc/{pid}/cwd")
    view["comm"] = _read(f"/proc/{pid}/comm")
    view["timers"] = _read(f"/proc/{pid}/timers")
    fds = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            fds[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            fds[int(fd)] = "?"
    view["fds"] = repr(sorted(fds.items()))
    names = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = _read(f"/proc/{pid}/task/{tid}/comm").strip()
        except OSError:  # gone meanwhile
            continue
        if not name.startswith(XLA_THREADS):
            names.append(name)
    view["threads"] = repr(sorted(names))
    return view


def kernel_changes(before: dict[str, str], now: dict[str, str]) -> list[str]:
    return [name for name in before if before[name] != now.get(name)]


def busy_threads(pid: int) -> int:
    """Threads of ``pid``, but its main one, running now (XLA still computing what a
    run dispatched and never waited for)."""
    busy = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        if int(tid) == pid:
            continue
        try:
            stat = _read(f"/proc/{pid}/task/{tid}/stat")
        except OSError:  # gone meanwhile
            continue
        busy += stat[stat.rindex(")") + 2] == "R"
    return busy


def rss_kib(pid: int) -> int:
    for line in _read(f"/proc/{pid}/status").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_ticks(pid: int) -> int:
    """The CPU time process ``pid`` has used, in clock ticks (10 ms each)."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])  # utime + stime
