"""Starting, limiting and killing one jail.

A jail is started in three steps so that no process of it ever runs unlimited:

1. ``/bin/sh`` is spawned (as the unprivileged jail user when jaxplay runs as root),
   blocked reading one line from its stdin;
2. from outside, the supervisor puts that process into the jail's cgroup, which
   all its descendants inherit;
3. it writes the line; sh ``exec``s ``prlimit`` (the rlimits) and ``taskset`` (the
   CPU affinity), which ``exec`` bubblewrap, which builds the jail and runs the
   command inside. Whatever else is written to stdin is the command's own stdin.

Killing is from outside too: SIGKILL to bubblewrap (whose pid-1 helper then dies of
``--die-with-parent``, taking the whole pid namespace with it) and to everything in
the cgroup, then a wait until the cgroup is empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import os
import pwd
import shutil
import signal
from collections.abc import Mapping, Sequence
from typing import Any

from sandbox.jail.bwrap import LAUNCH_ENV, Runtime, bwrap_argv, python_command
from sandbox.jail.cgroups import Cgroups, JailCgroup
from sandbox.jail.seccomp import SeccompUnavailable, filter_bpf, filter_fd
from sandbox.jail.settings import JailConfig, JailLimits

log = logging.getLogger(__name__)

_GATE = 'read -r _ || exit 111; exec "$@"'
#: How long a killed jail may take to be gone before we say so.
TEARDOWN_S = 2.0


class JailUnavailable(RuntimeError):
    """This host cannot jail user code (and the unsafe flag was not given)."""


class Jailer:
    """What every jail on this host shares: settings, runtime, cgroups, filter, user."""

    def __init__(self, limits: JailLimits | None = None, config: JailConfig | None = None) -> None:
        self.limits = limits or JailLimits.from_env()
        self.config = config or JailConfig.from_env()
        bwrap = shutil.which(self.config.bwrap)
        if bwrap is None:
            raise JailUnavailable(
                f"bubblewrap ({self.config.bwrap!r}) is not installed: apt-get install bubblewrap "
                "(scripts/setup.sh does it)"
            )
        self.bwrap = bwrap
        try:
            filter_bpf()
        except SeccompUnavailable as exc:
            raise JailUnavailable(str(exc)) from None
        #: device nodes bound into every jail (a GPU/TPU worker's; none on CPU)
        self.devices: tuple[str, ...] = ()
        self.user: tuple[int, int] | None = None
        if os.geteuid() == 0:
            try:
                entry = pwd.getpwnam(self.config.jail_user)
            except KeyError:
                raise JailUnavailable(
                    f"running as root, jaxplay launches jails as the user {self.config.jail_user!r}, "
                    "which does not exist: run scripts/setup.sh, or set JAXPLAY_JAIL_USER"
                ) from None
            if entry.pw_uid == 0:
                raise JailUnavailable("JAXPLAY_JAIL_USER must not be root")
            self.user = (entry.pw_uid, entry.pw_gid)
        self.runtime = Runtime.discover()
        self.cgroups = Cgroups.detect(self.config)
        if swept := self.cgroups.sweep():
            log.warning("removed %d cgroups left by a jaxplay that died without cleaning up", swept)
        self._cpus = sorted(os.sched_getaffinity(0))
        self._next_cpu = 0

    def with_runtime(self, runtime: Runtime) -> Jailer:
        """The same jailer (settings, cgroups, filter, user) for jails that run another
        interpreter and environment (another JAX version's)."""
        other = copy.copy(self)
        other.runtime = runtime
        return other

    def next_cpus(self) -> list[int] | None:
        """CPUs for the next jail, round-robin over ours (None: all, unpinned)."""
        n = self.limits.cpus
        if n <= 0 or n >= len(self._cpus):
            return None
        chosen = [self._cpus[(self._next_cpu + i) % len(self._cpus)] for i in range(n)]
        self._next_cpu = (self._next_cpu + n) % len(self._cpus)
        return chosen

    def python(self, *args: str) -> list[str]:
        return python_command(self.runtime, *args)

    def jail(self) -> Jail:
        return Jail(self)

    async def check(self) -> None:
        """Start one tiny jail; raise JailUnavailable, with bwrap's words, if it fails."""
        jail = self.jail()
        try:
            proc = await jail.start(
                self.python("-c", "import sandbox"),
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            assert proc.stdin and proc.stderr
            proc.stdin.close()
            err = await asyncio.wait_for(proc.stderr.read(4096), 30)
            rc = await proc.wait()
        except (OSError, TimeoutError) as exc:
            raise JailUnavailable(f"a test jail could not run: {exc}") from None
        finally:
            await jail.close()
        if rc != 0:
            hint = ""
            if b"Permission denied" in err or b"Can't find source path" in err:
                hint = (
                    f" (the jail user cannot reach {', '.join(self.runtime.ro_paths)}: "
                    "run scripts/setup.sh, which grants it search permission)"
                )
            raise JailUnavailable(
                f"a test jail failed (status {rc}): {err.decode(errors='replace').strip()}{hint}"
            )

    def describe(self) -> dict[str, Any]:
        return {
            "bwrap": self.bwrap,
            "uid": self.user[0] if self.user else os.geteuid(),
            "cgroups": self.cgroups.kind,
            "bound": list(self.runtime.ro_paths),
        }


class Jail:
    """One jail: at most one bubblewrap process tree, its cgroup and its CPUs."""

    def __init__(self, jailer: Jailer) -> None:
        self._jailer = jailer
        self.cpus = jailer.next_cpus()
        self.cgroup: JailCgroup | None = None
        self.proc: asyncio.subprocess.Process | None = None
        self._oom_base = 0

    async def start(
        self,
        command: Sequence[str],
        *,
        pass_fds: Sequence[int] = (),
        stdout: Any = asyncio.subprocess.PIPE,
        stderr: Any = asyncio.subprocess.PIPE,
        env: Mapping[str, str] | None = None,
        limit: int = 2**16,
    ) -> asyncio.subprocess.Process:
        """Start ``command`` in the jail. Its stdin is the returned process's stdin."""
        jailer, limits = self._jailer, self._jailer.limits
        self.cgroup = jailer.cgroups.make(limits, self.cpus)
        seccomp = filter_fd()
        try:
            argv = self._limits_argv() + bwrap_argv(
                jailer.bwrap,
                jailer.runtime,
                limits,
                command,
                seccomp_fd=seccomp,
                env=env,
                devices=jailer.devices,
            )
            kwargs: dict[str, Any] = {}
            if jailer.user is not None:
                kwargs = {"user": jailer.user[0], "group": jailer.user[1], "extra_groups": []}
            self.proc = await asyncio.create_subprocess_exec(
                "/bin/sh", "-c", _GATE, "jaxplay-jail", *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=stdout,
                stderr=stderr,
                env=LAUNCH_ENV,
                pass_fds=(seccomp, *pass_fds),
                start_new_session=True,
                cwd="/",
                limit=limit,
                **kwargs,
            )  # fmt: skip
        finally:
            os.close(seccomp)
        try:
            if self.cgroup is not None:
                self.cgroup.add(self.proc.pid)
                self._oom_base = self.cgroup.oom_kills()
        except OSError:
            self.kill()
            raise
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")
        await self.proc.stdin.drain()
        return self.proc

    def _limits_argv(self) -> list[str]:
        """prlimit and taskset, run by the jail's own uid before bwrap: lowering one's
        own limits needs no privilege (root here may lack CAP_SYS_RESOURCE)."""
        limits = self._jailer.limits
        argv = [
            "prlimit",
            f"--data={limits.data_bytes}:{limits.data_bytes}",
            f"--fsize={limits.fsize_bytes}:{limits.fsize_bytes}",
            f"--nofile={limits.nofile}:{limits.nofile}",
            f"--nproc={limits.nproc}:{limits.nproc}",
            f"--cpu={limits.cpu_s}:{limits.cpu_s + 1}",
            "--core=0:0",
            "--",
        ]
        if self.cpus is not None:
            argv += ["taskset", "--cpu-list", ",".join(map(str, self.cpus))]
        return argv

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer struck in this jail since it started."""
        return self.cgroup is not None and self.cgroup.oom_kills() > self._oom_base

    def kill(self) -> None:
        """SIGKILL the whole jail, now. Safe to call at any time, any number of times."""
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.kill()

    async def wait_gone(self, timeout_s: float = TEARDOWN_S) -> bool:
        """Wait until bubblewrap has exited and nothing is left in the cgroup."""
        if self.proc is not None:
            try:
                await asyncio.wait_for(self.proc.wait(), timeout_s)
            except TimeoutError:
                return False
        if self.cgroup is not None:
            return await self.cgroup.wait_empty(timeout_s)
        return True

    async def close(self) -> None:
        """Kill everything, wait for it to be gone, remove the cgroup."""
        self.kill()
        if not await self.wait_gone():
            self.kill()
            if not await self.wait_gone():
                log.error("jail %s: processes survive SIGKILL; cgroup left in place", self.cgroup)
                return
        if self.cgroup is not None:
            self.cgroup.remove()
