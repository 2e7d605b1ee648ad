"""Per-jail cgroups: memory, processes and CPU, enforced by the kernel from outside.

Where the host has cgroup v2 (production) each jail gets one leaf with ``memory.max``,
``memory.swap.max = 0``, ``memory.oom.group``, ``pids.max``, ``cpu.max`` and
``cpuset.cpus``, and is killed race-free with ``cgroup.kill``. On a cgroup v1 host
(this project's dev machines) the same limits go into one directory per controller,
made under the supervisor's own cgroup so the host's accounting still covers them.
Without either, jails run in a documented degraded mode on rlimits alone.

Only files of the cgroup filesystem are read here: never a file the jail wrote.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from sandbox.jail.settings import JailConfig, JailLimits

log = logging.getLogger(__name__)

CGROUP_FS = Path("/sys/fs/cgroup")
_V1_CONTROLLERS = ("memory", "pids", "cpu", "cpuset")
_CPU_PERIOD_US = 100_000
#: the CPU weight of one process (cgroup v1 ``cpu.shares``, v2 ``cpu.weight``): what a
#: cgroup of its own weighs by default against its siblings
_V1_SHARES, _V2_WEIGHT = 1024, 100
#: the weight of a jail started ahead of need (a pool's spare while another is ready):
#: on a CPU it shares with a jail running someone's code, the run goes first, and the
#: spare takes what the runs leave
_V1_BACKGROUND_SHARES, _V2_BACKGROUND_WEIGHT = 2, 1


def jails_weight(default: int, cpus: int | None = None) -> int:
    """The CPU weight of the cgroup that holds every jail of this host: as many
    processes' as there are CPUs for them (each run gets a CPU of its own). With the
    default, one process's, all the jails together would weigh as one process against
    the host's others, and a run on a busy host would wait on its CPU's run queue
    several times as long as the same work in a process of its own (docs/sandbox.md,
    "The edit loop on library code")."""
    n = cpus if cpus is not None else len(os.sched_getaffinity(0))
    return default * max(1, n)


_instances = itertools.count(1)


class CgroupError(RuntimeError):
    pass


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read(path: Path) -> str:
    with open(path) as f:
        return f.read()


def _own_v1_path(controller: str) -> str:
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    return "/"


def _start_time(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks after boot), None if there is none.
    With the pid it names one process even where pids are reused: a restarted
    container's worker has the pid of the one before it."""
    try:
        stat = _read(Path(f"/proc/{pid}/stat"))
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _keyed(text: str, key: str) -> int:
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


@dataclass
class JailCgroup:
    """The cgroup directories of one jail (one on v2, one per controller on v1)."""

    version: int
    dirs: dict[str, Path]  # controller (or "" on v2) -> directory

    @property
    def main(self) -> Path:
        """The directory that names the jail (v2: its cgroup; v1: its pids cgroup)."""
        return self.dirs.get("pids") or next(iter(self.dirs.values()))

    def add(self, pid: int) -> None:
        for d in self.dirs.values():
            _write(d / "cgroup.procs", str(pid))

    def procs_files(self) -> tuple[str, ...]:
        """The files a process writes its pid to, to join this cgroup (every controller)."""
        return tuple(str(d / "cgroup.procs") for d in self.dirs.values())

    def set_cpus(self, cpus: list[int]) -> bool:
        """Move the jail, every thread of it at once, onto ``cpus`` (its cpuset; the
        kernel resets each thread's affinity to it). False where there is no cpuset."""
        d = self.dirs.get("cpuset" if self.version == 1 else "")
        if d is None or not (d / "cpuset.cpus").exists():
            return False
        _write(d / "cpuset.cpus", ",".join(map(str, cpus)))
        return True

    def set_background(self, background: bool) -> bool:
        """The jail's CPU weight: the least (``background``) or one process's. False
        where there is no CPU controller."""
        if self.version == 1:
            d, name = self.dirs.get("cpu"), "cpu.shares"
            value = _V1_BACKGROUND_SHARES if background else _V1_SHARES
        else:
            d, name = self.dirs.get(""), "cpu.weight"
            value = _V2_BACKGROUND_WEIGHT if background else _V2_WEIGHT
        if d is None or not (d / name).exists():
            return False
        _write(d / name, str(value))
        return True

    def pids(self) -> set[int]:
        found: set[int] = set()
        for d in self.dirs.values():
            with contextlib.suppress(FileNotFoundError):
                found.update(int(p) for p in _read(d / "cgroup.procs").split())
        return found

    def empty(self) -> bool:
        if self.version == 2:
            try:
                return _keyed(_read(self.dirs[""] / "cgroup.events"), "populated") == 0
            except FileNotFoundError:
                return True
        return not self.pids()

    def kill(self) -> None:
        """SIGKILL every process in the jail's cgroup."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                _write(self.dirs[""] / "cgroup.kill", "1")
                return
        # v1: no cgroup.kill. Each process listed is killed once; the list is read
        # again until it names none that was not killed yet (a child forked before
        # its parent's SIGKILL landed). One that was killed stays listed until it has
        # exited, which takes milliseconds for a JAX process: killing it again, and
        # reading every controller's list again meanwhile, was most of the server's
        # CPU in a single-use run. A pid reused meanwhile inside the cgroup is caught
        # by the caller's wait for an empty cgroup, which kills again (Jail.close).
        killed: set[int] = set()
        for _ in range(50):
            pids = self.pids() - killed
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            killed |= pids

    async def wait_empty(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self.empty():
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer took in this jail so far."""
        try:
            if self.version == 2:
                return _keyed(_read(self.dirs[""] / "memory.events"), "oom_kill")
            if "memory" in self.dirs:
                return _keyed(_read(self.dirs["memory"] / "memory.oom_control"), "oom_kill")
        except FileNotFoundError:
            pass
        return 0

    def memory_bytes(self) -> int:
        """Memory charged to the jail now (for stats and the benchmark)."""
        try:
            if self.version == 2:
                return int(_read(self.dirs[""] / "memory.current"))
            if "memory" in self.dirs:
                return int(_read(self.dirs["memory"] / "memory.usage_in_bytes"))
        except (FileNotFoundError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        for d in self.dirs.values():
            with contextlib.suppress(OSError):
                d.rmdir()


class Cgroups:
    """The host's cgroup support, found once: v2, v1, or none (degraded)."""

    def __init__(self, version: int, roots: dict[str, Path]) -> None:
        self.version = version  # 2, 1, or 0 for none
        self._roots = roots
        self._seq = 0
        #: every jail cgroup this instance makes is named ``<prefix><n>``
        pid = os.getpid()
        self.prefix = f"jail-{pid}-{_start_time(pid)}-{next(_instances)}-"

    @property
    def main_root(self) -> Path | None:
        """Where the jails' main directories are made (see JailCgroup.main)."""
        return self._roots.get("pids") or next(iter(self._roots.values()), None)

    @property
    def kind(self) -> str:
        return {2: "v2", 1: "v1"}.get(self.version, "none")

    @classmethod
    def detect(cls, config: JailConfig) -> Cgroups:
        if config.cgroup_root == "none":
            return cls(0, {})
        try:
            if (CGROUP_FS / "cgroup.controllers").exists() or (
                config.cgroup_root and Path(config.cgroup_root, "cgroup.controllers").exists()
            ):
                return cls._setup_v2(
                    Path(config.cgroup_root or CGROUP_FS / "jaxplay"), weigh=not config.cgroup_root
                )
            if (CGROUP_FS / "memory" / "memory.limit_in_bytes").exists():
                return cls._setup_v1(config.cgroup_root)
        except OSError as exc:
            log.warning(
                "cgroups unusable (%s): jails run on rlimits alone (degraded; see docs/sandbox.md)",
                exc,
            )
            return cls(0, {})
        log.warning("no cgroup hierarchy found: jails run on rlimits alone (degraded)")
        return cls(0, {})

    @classmethod
    def _setup_v2(cls, root: Path, weigh: bool = True) -> Cgroups:
        wanted = ["memory", "pids", "cpu", "cpuset"]
        if not root.exists():
            parent = root.parent
            available = _read(parent / "cgroup.controllers").split()
            enabled = _read(parent / "cgroup.subtree_control").split()
            missing = [c for c in wanted if c in available and c not in enabled]
            if missing:
                _write(parent / "cgroup.subtree_control", " ".join("+" + c for c in missing))
            root.mkdir()
        available = _read(root / "cgroup.controllers").split()
        for needed in ("memory", "pids"):
            if needed not in available:
                raise CgroupError(f"cgroup v2 controller {needed} is not delegated to {root}")
        enabled = _read(root / "cgroup.subtree_control").split()
        missing = [c for c in wanted if c in available and c not in enabled]
        if missing:
            _write(root / "cgroup.subtree_control", " ".join("+" + c for c in missing))
        if weigh:  # jaxplay's own group; an operator's root keeps the weight it was given
            with contextlib.suppress(OSError):
                _write(root / "cpu.weight", str(min(10_000, jails_weight(_V2_WEIGHT))))
        return cls(2, {"": root})

    @classmethod
    def _setup_v1(cls, configured: str) -> Cgroups:
        roots: dict[str, Path] = {}
        for controller in _V1_CONTROLLERS:
            mount = CGROUP_FS / controller
            if not mount.is_dir():
                continue
            base = (
                Path(configured) / controller
                if configured
                else Path(str(mount) + _own_v1_path(controller)) / "jaxplay"
            )
            base.mkdir(exist_ok=True)
            if controller == "cpu" and not configured:  # jaxplay's own group (as for v2)
                with contextlib.suppress(OSError):
                    _write(base / "cpu.shares", str(jails_weight(_V1_SHARES)))
            if controller == "cpuset":  # v1 cpusets start empty; inherit the parent's
                for name in ("cpuset.cpus", "cpuset.mems"):
                    if not _read(base / name).strip():
                        _write(base / name, _read(base.parent / name).strip())
            roots[controller] = base
        for needed in ("memory", "pids"):
            if needed not in roots:
                raise CgroupError(f"cgroup v1 controller {needed} is not mounted")
        return cls(1, roots)

    def sweep(self) -> int:
        """Remove the cgroups of jails whose supervisor died without cleaning up
        (killed hard): kill what is left in them, then rmdir. Returns how many."""
        swept = 0
        for root in self._roots.values():
            for d in root.glob("jail-*-*-*-*"):
                pid, started = d.name.split("-")[1:3]
                if not pid.isdigit() or _start_time(int(pid)) == started:
                    continue  # its supervisor is alive: not ours to touch
                group = JailCgroup(self.version, {"": d} if self.version == 2 else {root.name: d})
                group.kill()
                with contextlib.suppress(OSError):
                    d.rmdir()
                    swept += 1
        return swept

    def make(
        self, limits: JailLimits, cpus: list[int] | None, background: bool = False
    ) -> JailCgroup | None:
        """A new, empty cgroup for one jail, with the limits written (``background``:
        at the least CPU weight, JailCgroup.set_background)."""
        if not self.version:
            return None
        self._seq += 1
        name = f"{self.prefix}{self._seq}"
        dirs = {controller: root / name for controller, root in self._roots.items()}
        for d in dirs.values():
            d.mkdir()
        group = JailCgroup(self.version, dirs)
        try:
            self._limit(group, limits, cpus)
        except OSError:
            group.remove()
            raise
        if background:
            with contextlib.suppress(OSError):  # a weight the kernel refuses slows nothing
                group.set_background(True)
        return group

    def _limit(self, group: JailCgroup, limits: JailLimits, cpus: list[int] | None) -> None:
        cpu_list = ",".join(map(str, cpus)) if cpus else ""
        quota = len(cpus) * _CPU_PERIOD_US if cpus else 0
        if self.version == 2:
            d = group.dirs[""]
            _write(d / "memory.max", str(limits.memory_bytes))
            for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                with contextlib.suppress(FileNotFoundError):
                    _write(d / name, value)
            _write(d / "pids.max", str(limits.pids))
            if quota and (d / "cpu.max").exists():
                _write(d / "cpu.max", f"{quota} {_CPU_PERIOD_US}")
            if cpu_list and (d / "cpuset.cpus").exists():
                _write(d / "cpuset.cpus", cpu_list)
            return
        mem = group.dirs["memory"]
        _write(mem / "memory.limit_in_bytes", str(limits.memory_bytes))
        if (mem / "memory.memsw.limit_in_bytes").exists():  # swap accounting on: no swap
            _write(mem / "memory.memsw.limit_in_bytes", str(limits.memory_bytes))
        _write(group.dirs["pids"] / "pids.max", str(limits.pids))
        if quota and "cpu" in group.dirs:
            _write(group.dirs["cpu"] / "cpu.cfs_period_us", str(_CPU_PERIOD_US))
            _write(group.dirs["cpu"] / "cpu.cfs_quota_us", str(quota))
        if "cpuset" in group.dirs:
            d = group.dirs["cpuset"]
            _write(d / "cpuset.cpus", cpu_list or _read(d.parent / "cpuset.cpus").strip())
            _write(d / "cpuset.mems", _read(d.parent / "cpuset.mems").strip())
