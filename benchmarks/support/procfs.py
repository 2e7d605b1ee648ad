"""The benchmarks' one reader of ``/proc``: what a process (or the machine) has spent
and holds, whatever the pool says of itself. Each reader raises OSError for a process
that is gone; the callers decide whether that is a zero or an error."""

from __future__ import annotations

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def stat_fields(pid: int) -> list[str]:
    """``/proc/PID/stat`` after the command name (which may hold spaces): field 0 is
    the state, 1 the parent, 11 and 12 utime and stime, 13 and 14 what it reaped."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (its own, not its children's)."""
    fields = stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / TICK


def threads_cpu_s(pids: list[int]) -> float:
    """CPU seconds of ``pids`` to the nanosecond: every thread's time on a CPU
    (``schedstat``) and what each reaped of its children (cutime and cstime, in
    ticks); a process gone meanwhile counts nothing."""
    total = 0.0
    for pid in pids:
        try:
            fields = stat_fields(pid)
            total += (int(fields[13]) + int(fields[14])) / TICK
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                    total += int(f.read().split()[0]) / 1e9
        except OSError:
            continue
    return total


def status(pid: int, keys: tuple[str, ...] = ("VmRSS", "VmHWM", "Threads")) -> dict[str, int]:
    """The named numbers of ``/proc/PID/status`` as written there (kB for memory)."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in keys:
            values[key] = int(rest.split()[0])
    return values


def memory(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in bytes."""
    values = status(pid, ("VmRSS", "VmHWM"))
    return values.get("VmRSS", 0) * 1024, values.get("VmHWM", 0) * 1024


def machine_busy_s() -> float:
    """CPU seconds all CPUs of the machine spent not idle so far (/proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values[:8]) - idle) / TICK
