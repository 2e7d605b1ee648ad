"""The warm pool's settings: sizes follow the machine unless set."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sandbox.jail.settings import MiB, read_env, setting

#: What one idle zygote holds of the machine's memory, for sizing the pool: its jail's
#: proportional share (PSS) with its warm child (JAX imported, tracing warmed, the CPU
#: backend started), by how the jail starts. benchmarks/pool/zygote_memory.py measured
#: 140 MiB for a jail forked from its template (which shares the template's pages until
#: it writes them; 97 MiB of its own) and 236 MiB for a new bubblewrap and interpreter.
ZYGOTE_BYTES = {"fork": 160 * MiB, "exec": 256 * MiB}


#: where this process's memory limit is written (cgroup v2, then v1): in a container
#: the machine's memory is the container's, not the host's that sysconf reads
CGROUP_MEMORY_LIMITS = (
    "/sys/fs/cgroup/memory.max",
    "/sys/fs/cgroup/memory/memory.limit_in_bytes",
)


def _first_number(paths: tuple[str, ...]) -> int | None:
    """The number in the first of ``paths`` that holds one (a cgroup's files: v2's,
    then v1's), None where none does."""
    for path in paths:
        try:
            return int(Path(path).read_text().strip())
        except (OSError, ValueError):
            continue
    return None


def memory_limit() -> int | None:
    """This process's cgroup memory limit in bytes, None where there is none."""
    limit = _first_number(CGROUP_MEMORY_LIMITS)
    # none: v2's "max"; v1's "none" is its page-rounded 2^63
    return limit if limit is not None and limit < 1 << 60 else None


def machine() -> tuple[int, int]:
    """(usable CPUs, total memory in bytes) of this machine, or of the container it
    runs in where that has a smaller memory limit."""
    cpus = len(os.sched_getaffinity(0))
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = memory_limit()
    if limit is not None:
        memory = min(memory, limit)
    return cpus, memory


#: what this process's cgroup uses now, beside its limit (v2, then v1)
CGROUP_MEMORY_USAGE = (
    "/sys/fs/cgroup/memory.current",
    "/sys/fs/cgroup/memory/memory.usage_in_bytes",
)


def available_memory() -> int | None:
    """The machine's available memory in bytes (/proc/meminfo's MemAvailable: free
    memory and what the kernel can reclaim), or what is left under the container's
    limit where that is less; None where it cannot be read."""
    available = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    limit = memory_limit()
    if limit is not None and available is not None:
        used = _first_number(CGROUP_MEMORY_USAGE)
        if used is not None:
            return min(available, max(0, limit - used))
    return available


@dataclass(frozen=True)
class PoolSettings:
    pool_size: int = setting(
        0,
        "Most zygotes alive at once (spares and tenants', every JAX version's pool "
        "together: one budget, sandbox/pool/budget.py). 0: from the machine, three "
        "quarters of the memory over what an idle zygote holds (160 MiB forked from its template, 256 "
        "MiB with `JAXPLAY_FORK_JAILS=0`), at least 2, at most `JAXPLAY_JAIL_SLOTS` "
        "where each jail has its own uid.",
    )
    pool_running: int = setting(
        0,
        "Most runs at once, of every JAX version together; more get `PoolFull` (HTTP "
        "429). 0: from the machine, min(CPUs, ¾ of the memory / `JAXPLAY_MEMORY_BYTES`), "
        "at least 1.",
    )
    pool_spares: int = setting(
        -1,
        "Zygotes kept ready for clients not seen yet (new visitors, a script without a "
        "session, a link's reader, a pristine run), so none waits for a jail to start; "
        "each holds ~140 MiB while it waits. -1: from the pool's size, one spare per "
        "sixteen places, 1 to 4 (4 on a machine of 24 GiB).",
    )
    pool_per_tenant: int = setting(2, "Most zygotes one tenant may hold (its concurrent runs).")
    pool_idle_s: float = setting(300.0, "A tenant's zygote retires after this long unused.")
    pool_spare_after_idle_s: float = setting(
        30.0,
        "When the machine's budget of zygotes is full and a spare is missing, the "
        "least recently used tenant zygote unused for this long gives its place to a "
        "new spare: a new client then finds one ready instead of waiting for a jail to "
        "import JAX (a returning client whose zygote went takes a spare too).",
    )
    pool_max_runs: int = setting(
        2000,
        "A zygote (its tenant's jail) retires after this many runs. Each new jail costs "
        "an import of JAX (~1.5 CPU-s): under load, a small bound spends CPU that runs need.",
    )
    pool_reuse_runs: int = setting(
        500,
        "Runs one process may serve for its tenant, one after another, while nothing it "
        "relies on changed (docs/sandbox.md); 0 or 1: a fresh process per run.",
    )
    pool_reuse_rss_bytes: int = setting(
        1024 * MiB,
        "A process kept across a tenant's runs is not used again once its resident "
        "memory is over this.",
        size=True,
    )
    pool_max_age_s: float = setting(3600.0, "A zygote retires after this long alive.")
    pool_start_s: float = setting(
        60.0, "A zygote that is not ready (JAX imported and warmed) after this long is killed."
    )
    pool_min_available_bytes: int = setting(
        0,
        "While the machine's available memory (/proc/meminfo's MemAvailable) is under "
        "this, the pool retires its least recently used idle tenant zygote, one a second "
        "(a tenant's kept process may hold up to `JAXPLAY_POOL_REUSE_RSS_BYTES`, more "
        "than the idle size the pool was sized by). 0: an eighth of the memory.",
        size=True,
    )

    def spares(self, size: int) -> int:
        """How many spares a pool of ``size`` zygotes keeps ready: ``pool_spares``, or
        from the size. A burst of new clients (eight visitors at once, a script's
        single-use runs one after another) takes them faster than one jail after
        another can start (a forked jail and its warm child: ~0.12 CPU-s): each one ready
        is a client that does not wait (benchmarks/pool/new_jail.py)."""
        wanted = self.pool_spares if self.pool_spares >= 0 else max(1, min(4, size // 16))
        return min(wanted, size)

    def min_available_bytes(self) -> int:
        return self.pool_min_available_bytes or machine()[1] // 8

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PoolSettings:
        return read_env(cls, environ)

    def sizes(self, memory_per_run: int, forked: bool = True) -> tuple[int, int]:
        """(zygotes, concurrent runs) for this machine, settings first. An idle
        zygote costs no CPU: its memory is what bounds how many tenants keep one."""
        cpus, memory = machine()
        idle = ZYGOTE_BYTES["fork" if forked else "exec"]
        # three quarters: the rest, and what kept processes grow past their idle size,
        # is the memory guard's (pool_min_available_bytes, ZygotePool._relieve_memory)
        size = self.pool_size or max(2, memory * 3 // 4 // idle)
        running = self.pool_running or max(1, min(cpus, memory * 3 // 4 // max(1, memory_per_run)))
        return size, min(running, size)
